package controlplane

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is. The Error text of every error
// the ControlPlane returns that matches one of them is a sentence fit for a
// response's "detail" (for example "Deployment ID {id} not found.").
var (
	// ErrNotFound: the id is unknown or belongs to another tenant (HTTP
	// 404). The error is a *NotFoundError.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique name or compute id is taken (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrInvalidState: the request is well-formed but the resource's state
	// forbids it, for example a change while the deployment is being
	// deleted (HTTP 400).
	ErrInvalidState = errors.New("invalid state")
	// ErrInvalidTenant: the tenant string is empty, longer than 64 bytes, or
	// holds a byte outside [A-Za-z0-9._-]. Tenants come from the caller's
	// authentication, not from clients, so this is a programming error
	// (HTTP 500).
	ErrInvalidTenant = errors.New("controlplane: invalid tenant")
)

// The Kind values of a NotFoundError.
const (
	KindDeployment  = "Deployment"
	KindRevision    = "Revision"
	KindListener    = "Listener"
	KindIntegration = "Integration"
)

// NotFoundError says which kind of resource was not found, and its id.
// It matches ErrNotFound.
type NotFoundError struct {
	Kind string // KindDeployment, KindRevision, ...
	ID   string
}

// Error returns "{Kind} ID {ID} not found.".
func (e *NotFoundError) Error() string { return fmt.Sprintf("%s ID %s not found.", e.Kind, e.ID) }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// detailError is a sentence that matches one of the sentinels.
type detailError struct {
	kind   error
	detail string
}

func (e *detailError) Error() string { return e.detail }
func (e *detailError) Unwrap() error { return e.kind }

func conflictf(format string, args ...any) error {
	return &detailError{kind: ErrConflict, detail: fmt.Sprintf(format, args...)}
}

func invalidStatef(format string, args ...any) error {
	return &detailError{kind: ErrInvalidState, detail: fmt.Sprintf(format, args...)}
}

// Problem is one validation failure, as in the HTTPValidationError body.
// Loc starts with "body", "path" or "query" and continues with JSON keys
// (string) and array indexes (int).
type Problem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError lists every problem of a request (HTTP 422).
type ValidationError struct {
	Problems []Problem
}

// Error joins the problems into one line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("validation failed: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, l := range p.Loc {
			if j > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, l)
		}
		b.WriteString(": ")
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Problem type codes used by the ControlPlane, beyond the generic ones.
const (
	TypeMissing                = "missing"
	TypeLiteralError           = "literal_error"
	TypeUUIDParsing            = "uuid_parsing"
	TypeStringPatternMismatch  = "string_pattern_mismatch"
	TypeStringTooShort         = "string_too_short"
	TypeStringTooLong          = "string_too_long"
	TypeTooLong                = "too_long"
	TypeGreaterThan            = "greater_than"
	TypeGreaterThanEqual       = "greater_than_equal"
	TypeLessThanEqual          = "less_than_equal"
	TypeValueError             = "value_error"
	TypeNotApplicableToSource  = "not_applicable_to_source"
	TypeImmutableField         = "immutable_field"
	TypeReadOnlyField          = "read_only_field"
	TypeSourceNotOffered       = "source_not_offered"
	TypeUnknownReference       = "unknown_reference"
	TypeDuplicate              = "duplicate"
	TypeBuildOnPushWithTagRef  = "build_on_push_with_tag"
	TypeNamespaceNotOfListener = "namespace_not_of_listener"
)
