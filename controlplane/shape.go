package controlplane

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/deployplane/deployplane/apierr"
)

// Shape checks are `validate` struct tags on the request types
// (types.go), run by github.com/go-playground/validator/v10. The
// validator is built once per ControlPlane, in New (it caches each type's
// tags on first use; the tags that need a Limit close over the
// ControlPlane's), and its errors are translated to problems by
// shapeProblems: the loc is ["body", JSON names...] (array indexes as
// ints), the type and message are the ones the plain checks used before
// the tags.
//
// The tags of this package, beside validator's own (omitnil, omitempty,
// required, oneof, gt, gte, lte, and required_if and excluded_unless
// between the members of one object):
//
//	depname   a deployment name, namePattern
//	uuid36    a UUID in its 36-character form
//	str       a string of 1 to Limits.MaxStringBytes bytes
//	dnslabel  an RFC 1123 label (Kubernetes names), dnsLabelPattern
//	dnssub    an RFC 1123 subdomain, dnsSubPattern
//	cident    a C identifier of at most 256 characters, cIdentPattern
//	maxstr    a string of at most Limits.MaxStringBytes bytes ("" too)
//	secretval a secret value of at most Limits.MaxSecretValueBytes bytes
//	dispname  a display name of 1 to maxDisplayName characters
//	httpurl   an absolute http or https URL with a host (validHTTPURL)
//
// What validator cannot say cleanly stays a plain function (validate.go):
// the caps of a list, checked before its items and set at run time; unique
// names and volume mounts naming a volume (they look across items); value
// and valueFrom exclusive; limits >= requests on the defaulted spec;
// Kubernetes qualified names as map keys; the size of free-form objects.

// shapes is a ControlPlane's validator and what the translation needs.
type shapes struct {
	v   *validator.Validate
	lim Limits
	// specRank orders the problems of a resource_spec's own fields, by JSON
	// name: the scales (0), the integer sizes (1), the CPUs (2), each group
	// by name, as the plain checks listed them, then every other field (3),
	// in the order of the fields.
	specRank map[string]int
	// fieldOrder maps the JSON names of each item type's fields to their
	// index, for problems in the order of the fields.
	fieldOrder map[reflect.Type]map[string]int
}

// newShapes returns the validator of a ControlPlane whose limits are lim.
func newShapes(lim Limits) *shapes {
	v := validator.New()
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	for tag, ok := range map[string]func(string) bool{
		"depname":   validName,
		"uuid36":    validUUID36,
		"dnslabel":  validDNSLabel,
		"dnssub":    validDNSSubdomain,
		"cident":    func(s string) bool { return len(s) <= 256 && validCIdent(s) },
		"str":       func(s string) bool { return s != "" && len(s) <= lim.MaxStringBytes },
		"maxstr":    func(s string) bool { return len(s) <= lim.MaxStringBytes },
		"secretval": func(s string) bool { return len(s) <= lim.MaxSecretValueBytes },
		"dispname":  func(s string) bool { n := utf8.RuneCountInString(s); return n >= 1 && n <= maxDisplayName },
		"httpurl":   func(s string) bool { return urlProblem(s) == "" },
		"secretkey": validSecretKey,
		"agentid":   func(s string) bool { return s != "" && len(s) <= MaxAgentIDBytes },
	} {
		err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool { return ok(fl.Field().String()) })
		if err != nil {
			panic(err) // a constant tag name: cannot fail
		}
	}
	sh := &shapes{v: v, lim: lim, specRank: map[string]int{}, fieldOrder: map[reflect.Type]map[string]int{}}
	for _, t := range []reflect.Type{reflect.TypeFor[ResourceSpec](), reflect.TypeFor[SecretInput](), reflect.TypeFor[SecretReference](),
		reflect.TypeFor[LocalObjectReference](), reflect.TypeFor[Volume](), reflect.TypeFor[VolumeMount](),
		reflect.TypeFor[Container](), reflect.TypeFor[EnvVar]()} {
		order := map[string]int{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			order[name] = i
		}
		sh.fieldOrder[t] = order
	}
	rt := reflect.TypeFor[ResourceSpec]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("validate")
		if tag == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case strings.Contains(tag, "gte=0"):
			sh.specRank[name] = 0
		case f.Type.Elem().Kind() == reflect.Int64:
			sh.specRank[name] = 1
		case f.Type.Elem().Kind() == reflect.Float64:
			sh.specRank[name] = 2
		default:
			sh.specRank[name] = 3
		}
	}
	return sh
}

// maxDisplayName is the most characters (not bytes) a display_name has.
const maxDisplayName = MaxDisplayNameChars

func validUUID36(s string) bool { return validUUID(s) }

// shapeProblems validates s (a pointer to a struct) with v and returns its
// problems at base plus each field's JSON path.
func (sh *shapes) problems(base []any, s any) []apierr.Problem {
	err := sh.v.Struct(s)
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		panic(err) // InvalidValidationError: s is not a struct pointer, a bug here
	}
	ps := make([]apierr.Problem, 0, len(ves))
	for _, fe := range ves {
		typ, msg := shapeMessage(fe, sh.lim)
		ps = append(ps, apierr.Problem{Loc: shapeLoc(base, fe.Namespace()), Type: typ, Msg: msg})
	}
	return ps
}

// shapeLoc turns a validator namespace with JSON names
// ("Deployment.source_config.resource_spec.sidecars[0].name") into a loc
// below base: the struct's own name is dropped, and an index in brackets
// becomes an int (a map key in brackets stays a string).
func shapeLoc(base []any, ns string) []any {
	loc := append(make([]any, 0, len(base)+4), base...)
	_, ns, _ = strings.Cut(ns, ".")
	for ns != "" {
		if ns[0] == '[' {
			key, rest, _ := strings.Cut(ns[1:], "]")
			if n, err := strconv.Atoi(key); err == nil {
				loc = append(loc, n)
			} else {
				loc = append(loc, key)
			}
			ns = strings.TrimPrefix(rest, ".")
			continue
		}
		i := strings.IndexAny(ns, ".[")
		if i < 0 {
			i = len(ns)
		}
		loc = append(loc, ns[:i])
		ns = strings.TrimPrefix(ns[i:], ".")
	}
	return loc
}

// shapeMessage is the problem type and message of a failed tag, as the
// plain checks wrote them.
func shapeMessage(fe validator.FieldError, lim Limits) (typ, msg string) {
	switch fe.Tag() {
	case "required":
		return apierr.TypeMissing, apierr.MsgFieldRequired
	case "required_if": // preview.label with mode label
		return apierr.TypeMissing, "Field required when mode is 'label'"
	case "excluded_unless": // preview.label without mode label
		return apierr.TypeNotApplicable, "label applies only when mode is 'label'"
	case "depname":
		return apierr.TypeStringPatternMismatch, "String should match pattern '" + namePattern + "'"
	case "dnslabel":
		return apierr.TypeStringPatternMismatch, "String should match pattern '" + dnsLabelPattern + "'"
	case "dnssub":
		return apierr.TypeStringPatternMismatch, "String should match pattern '" + dnsSubPattern + "'"
	case "cident":
		return apierr.TypeStringPatternMismatch, "String should match pattern '" + cIdentPattern + " (at most 256 characters)'"
	case "uuid36":
		return apierr.TypeUUIDParsing, apierr.MsgInvalidUUID
	case "str", "maxstr":
		if s, _ := fe.Value().(string); s == "" {
			return apierr.TypeStringTooShort, "String should have at least 1 character"
		}
		return apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", lim.MaxStringBytes)
	case "dispname":
		if s, _ := fe.Value().(string); s == "" {
			return apierr.TypeStringTooShort, "String should have at least 1 character"
		}
		return apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d characters", maxDisplayName)
	case "httpurl":
		s, _ := fe.Value().(string)
		return urlProblem(s), urlMessage
	case "secretkey":
		return apierr.TypeStringPatternMismatch, "String should match pattern '" + secretKeyPattern + "'"
	case "agentid":
		if s, _ := fe.Value().(string); s == "" {
			return apierr.TypeStringTooShort, "String should have at least 1 character"
		}
		return apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", MaxAgentIDBytes)
	case "secretval":
		return apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", lim.MaxSecretValueBytes)
	case "oneof":
		vs := strings.Fields(fe.Param())
		for i := range vs {
			vs[i] = "'" + vs[i] + "'"
		}
		list := vs[len(vs)-1]
		if len(vs) > 1 {
			list = strings.Join(vs[:len(vs)-1], ", ") + " or " + list
		}
		return apierr.TypeLiteralError, "Input should be " + list
	case "gt":
		return apierr.TypeGreaterThan, "Input should be greater than " + fe.Param()
	case "gte":
		return apierr.TypeGreaterThanEqual, "Input should be greater than or equal to " + fe.Param()
	case "lte":
		return apierr.TypeLessThanEqual, "Input should be less than or equal to " + fe.Param()
	}
	return apierr.TypeValueError, "Value is not valid (" + fe.Tag() + ")"
}
