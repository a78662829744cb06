package apierr_test

import (
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/apierr"
)

// getDeployment stands for a domain method: it reports a missing resource
// with its kind and the id the caller gave.
func getDeployment(id string) error {
	return fmt.Errorf("get: %w", &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id})
}

// A caller matches the sentinel with errors.Is, reads the kind and id with
// errors.As, and shows the Error text as the sentence it is.
func ExampleNotFoundError() {
	err := getDeployment("0194f3a0-0000-7000-8000-00000000000a")
	var nf *apierr.NotFoundError
	if errors.Is(err, apierr.ErrNotFound) && errors.As(err, &nf) {
		fmt.Println(nf.Kind, nf.ID)
		fmt.Println(nf)
	}
	fmt.Println(&apierr.NotFoundError{Kind: apierr.KindOAuthProvider, ID: "github"})
	// Output:
	// Deployment 0194f3a0-0000-7000-8000-00000000000a
	// Deployment ID 0194f3a0-0000-7000-8000-00000000000a not found.
	// OAuth provider github not found.
}

// Conflictf and InvalidStatef make errors that match their sentinel and
// read as the sentence a client is shown.
func ExampleConflictf() {
	err := apierr.Conflictf("A deployment named '%s' already exists.", "agent")
	fmt.Println(errors.Is(err, apierr.ErrConflict), errors.Is(err, apierr.ErrInvalidState))
	fmt.Println(err)
	// Output:
	// true false
	// A deployment named 'agent' already exists.
}

// A domain's own sentinel carries its sentence the same way.
func ExampleDetailError() {
	errUnknownInstallState := errors.New("unknown install state")
	err := &apierr.DetailError{Kind: errUnknownInstallState,
		Detail: "This installation link is invalid, has expired, or was already used."}
	fmt.Println(errors.Is(err, errUnknownInstallState))
	fmt.Println(err)
	// Output:
	// true
	// This installation link is invalid, has expired, or was already used.
}

// Validation collects every problem of a request into one error, or
// returns nil when there is none.
func ExampleValidation() {
	var ps []apierr.Problem
	fmt.Println(apierr.Validation(ps...) == nil)

	ps = append(ps,
		apierr.Problem{Loc: []any{"body", "name"}, Msg: "Field required", Type: apierr.TypeMissing},
		apierr.Problem{Loc: []any{"body", "secrets", 1, "name"}, Msg: "Duplicate secret name", Type: apierr.TypeDuplicate})
	err := apierr.Validation(ps...)
	var ve *apierr.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Loc, p.Type)
		}
	}
	fmt.Println(err)
	// Output:
	// true
	// [body name] missing
	// [body secrets 1 name] duplicate
	// validation failed: body.name: Field required; body.secrets.1.name: Duplicate secret name
}

// Both domains check the tenant they are given the same way.
func ExampleCheckTenant() {
	fmt.Println(apierr.CheckTenant("0194f3a0-0000-7000-8000-00000000000a"))
	err := apierr.CheckTenant("acme/other")
	fmt.Println(errors.Is(err, apierr.ErrInvalidTenant))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// invalid tenant "acme/other": a tenant is 1 to 64 bytes of ASCII letters, digits, '.', '_' and '-'
}
