package apierr_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/apierr"
)

// TestNotFoundError checks the sentences of the wire contract's 404s and
// that every NotFoundError, wrapped or not, matches ErrNotFound and nothing
// else.
func TestNotFoundError(t *testing.T) {
	const id = "0194f3a0-0000-7000-8000-00000000000a"
	for _, tt := range []struct {
		kind, id, want string
	}{
		{apierr.KindDeployment, id, "Deployment ID " + id + " not found."},
		{apierr.KindRevision, id, "Revision ID " + id + " not found."},
		{apierr.KindListener, id, "Listener ID " + id + " not found."},
		{apierr.KindTracingProject, id, "Tracing project ID " + id + " not found."},
		{apierr.KindOAuthProvider, "github", "OAuth provider github not found."},
		{apierr.KindDeployment, "zzz", "Deployment ID zzz not found."}, // a malformed id is named as given
	} {
		var err error = &apierr.NotFoundError{Kind: tt.kind, ID: tt.id}
		if got := err.Error(); got != tt.want {
			t.Errorf("%s %s: Error() = %q, want %q", tt.kind, tt.id, got, tt.want)
		}
		wrapped := fmt.Errorf("op: %w", err)
		if !errors.Is(err, apierr.ErrNotFound) || !errors.Is(wrapped, apierr.ErrNotFound) {
			t.Errorf("%s: does not match ErrNotFound", tt.want)
		}
		for _, other := range []error{apierr.ErrConflict, apierr.ErrInvalidState, apierr.ErrInvalidTenant} {
			if errors.Is(wrapped, other) {
				t.Errorf("%s: matches %v", tt.want, other)
			}
		}
		var nf *apierr.NotFoundError
		if !errors.As(wrapped, &nf) || nf.Kind != tt.kind || nf.ID != tt.id {
			t.Errorf("%s: errors.As = %+v", tt.want, nf)
		}
	}
}

// TestDetailError checks that a sentence-carrying error reads as its
// sentence and matches its kind only, also wrapped.
func TestDetailError(t *testing.T) {
	errOwn := errors.New("a domain's own sentinel")
	for _, tt := range []struct {
		name string
		err  error
		kind error
		want string
	}{
		{"Conflictf", apierr.Conflictf("A deployment named '%s' already exists.", "agent"), apierr.ErrConflict,
			"A deployment named 'agent' already exists."},
		{"InvalidStatef", apierr.InvalidStatef("Deployment ID %s is being deleted.", "d1"), apierr.ErrInvalidState,
			"Deployment ID d1 is being deleted."},
		{"a domain's sentinel", &apierr.DetailError{Kind: errOwn, Detail: "This installation link is invalid."}, errOwn,
			"This installation link is invalid."},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: Error() = %q, want %q", tt.name, got, tt.want)
		}
		wrapped := fmt.Errorf("op: %w", tt.err)
		for _, s := range []error{apierr.ErrNotFound, apierr.ErrConflict, apierr.ErrInvalidState, apierr.ErrInvalidTenant, errOwn} {
			if got, want := errors.Is(wrapped, s), s == tt.kind; got != want {
				t.Errorf("%s: errors.Is(%v) = %v, want %v", tt.name, s, got, want)
			}
		}
		var de *apierr.DetailError
		if !errors.As(wrapped, &de) || de.Detail != tt.want || de.Kind != tt.kind {
			t.Errorf("%s: errors.As = %+v", tt.name, de)
		}
	}
}

// TestValidationError checks Validation's nil for no problems, the Error
// line, and errors.As through wrapping.
func TestValidationError(t *testing.T) {
	if err := apierr.Validation(); err != nil {
		t.Errorf("Validation() = %#v, want an untyped nil", err)
	}
	if err := apierr.Validation([]apierr.Problem{}...); err != nil {
		t.Errorf("Validation(empty) = %#v, want an untyped nil", err)
	}
	ps := []apierr.Problem{
		{Loc: []any{"body", "name"}, Msg: "Field required", Type: apierr.TypeMissing},
		{Loc: []any{"body", "source_config", "resource_spec", "sidecars", 0, "name"}, Msg: "String should have at least 1 character",
			Type: apierr.TypeStringTooShort},
		{Loc: []any{"query", "limit"}, Msg: "Input should be a valid integer", Type: apierr.TypeIntParsing},
	}
	err := fmt.Errorf("op: %w", apierr.Validation(ps...))
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("errors.As(%v) found no *ValidationError", err)
	}
	if d := cmp.Diff(ps, ve.Problems); d != "" {
		t.Errorf("Problems (-want +got):\n%s", d)
	}
	want := "validation failed: body.name: Field required; " +
		"body.source_config.resource_spec.sidecars.0.name: String should have at least 1 character; " +
		"query.limit: Input should be a valid integer"
	if got := ve.Error(); got != want {
		t.Errorf("Error() =\n%q, want\n%q", got, want)
	}
	for _, s := range []error{apierr.ErrNotFound, apierr.ErrConflict, apierr.ErrInvalidState, apierr.ErrInvalidTenant} {
		if errors.Is(err, s) {
			t.Errorf("a *ValidationError matches %v", s)
		}
	}
}

// TestCheckTenant is the table of the tenant rule: 1 to 64 bytes of ASCII
// letters, digits, '.', '_' and '-'.
func TestCheckTenant(t *testing.T) {
	for _, tt := range []struct {
		tenant string
		ok     bool
	}{
		{"0194f3a0-0000-7000-8000-00000000000a", true}, // httphandler's tenants: canonical UUIDs
		{"0194F3A0-0000-7000-8000-00000000000A", true}, // the rule is not the UUID form
		{"acme", true},
		{"a", true},
		{"A.b_c-9", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"a/b", false},         // the store key separator
		{"a b", false},         // space
		{"a\x00b", false},      // NUL
		{"ténant", false},      // not ASCII
		{"tenant\n", false},    // control character
		{"a:b", false},         // punctuation outside the set
		{"../etc", false},      // '/' again
		{"\xffinvalid", false}, // not UTF-8 either
	} {
		err := apierr.CheckTenant(tt.tenant)
		if tt.ok != (err == nil) {
			t.Errorf("CheckTenant(%q) = %v, want ok %v", tt.tenant, err, tt.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, apierr.ErrInvalidTenant) {
			t.Errorf("CheckTenant(%q) = %v, does not match ErrInvalidTenant", tt.tenant, err)
		}
		for _, s := range []error{apierr.ErrNotFound, apierr.ErrConflict, apierr.ErrInvalidState} {
			if errors.Is(err, s) {
				t.Errorf("CheckTenant(%q) matches %v", tt.tenant, s)
			}
		}
		if !strings.HasPrefix(err.Error(), "invalid tenant ") {
			t.Errorf("CheckTenant(%q) = %q, want it to start with %q", tt.tenant, err, "invalid tenant ")
		}
	}
	// A long tenant is not copied whole into the error.
	if err := apierr.CheckTenant(strings.Repeat("x", 1<<20)); err == nil || len(err.Error()) > 300 {
		t.Errorf("CheckTenant(1 MiB) = an error of %d bytes, want at most 300", len(fmt.Sprint(err)))
	}
}

// TestCheckTenantModel compares CheckTenant with the rule written as a
// regular expression, on strings drawn mostly near the rule's edges.
func TestCheckTenantModel(t *testing.T) {
	model := regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	rapid.Check(t, func(t *rapid.T) {
		alphabet := rapid.SampledFrom([]rune("aZ09._-/ :\x00\x7fé"))
		s := string(rapid.SliceOfN(alphabet, 0, 70).Draw(t, "tenant"))
		if got, want := apierr.CheckTenant(s) == nil, model.MatchString(s); got != want {
			t.Fatalf("CheckTenant(%q) ok = %v, the rule says %v", s, got, want)
		}
	})
}
