package httphandler

import (
	"bytes"
	"encoding"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// decodeBody decodes a JSON request body into v, a pointer to a request
// struct of package controlplane or oauthflow.
//
// Object member names match exactly (encoding/json would let "ID" or "Name"
// reach the fields tagged "id" or "name"), a name that appears twice in one
// object is an error (encoding/json would keep the last), and unknown
// members are ignored. null is the same as an absent member. An empty body,
// or null, is a missing body unless optional says it may be omitted (it then
// decodes as {}). Every failure is a *apierr.ValidationError whose loc
// starts with "body".
//
// Malformed JSON is one json_invalid problem. A well-formed body whose
// members have the wrong type decodes anyway: every mistyped value, however
// deep, is a problem (string_type, int_type, list_type, dict_type, ...),
// is left out (its field stays zero, a list item stays in place as its zero
// value so that the indexes of the others hold), and the rest decodes. The
// error is then a *typeProblems, which decodeChecked completes with the
// domain's rule checks. At most maxProblems problems are stored; the rest
// are only counted.
func decodeBody(body []byte, v any, optional bool) error {
	trimmed := bytes.Trim(body, " \t\r\n") // JSON's whitespace only
	if len(trimmed) == 0 || string(trimmed) == "null" {
		if optional {
			return nil
		}
		return apierr.Validation(apierr.Problem{Loc: []any{"body"}, Msg: apierr.MsgFieldRequired, Type: apierr.TypeMissing})
	}
	d := &bodyDecoder{root: reflect.TypeOf(v)}
	err := json.Unmarshal(trimmed, v, json.WithUnmarshalers(json.UnmarshalFromFunc(d.unmarshal)))
	if err != nil {
		var syn *jsontext.SyntacticError
		if errors.As(err, &syn) || d.count() == 0 {
			return apierr.Validation(decodeProblem(d.root, err))
		}
		// A semantic error the checks of unmarshal do not foresee ends the
		// decoding; it joins the problems found until then.
		d.problem(decodeProblem(d.root, err))
	}
	if d.count() == 0 {
		return nil
	}
	return &typeProblems{ValidationError: apierr.ValidationError{Problems: d.ps}, more: d.more}
}

// typeProblems is the 422 of a body with mistyped members (decodeBody): the
// problems stored and how many more were found but not stored.
type typeProblems struct {
	apierr.ValidationError
	more int
}

// Unwrap lets errors.As find the *apierr.ValidationError.
func (e *typeProblems) Unwrap() error { return &e.ValidationError }

// bodyDecoder collects the type problems of one body.
type bodyDecoder struct {
	root reflect.Type
	ps   []apierr.Problem
	more int // problems beyond maxProblems, counted only

	lastType reflect.Type // the type leaf last answered for, and its answer
	lastLeaf bool
}

func (d *bodyDecoder) count() int { return len(d.ps) + d.more }

func (d *bodyDecoder) problem(p apierr.Problem) {
	if len(d.ps) < maxProblems {
		d.ps = append(d.ps, p)
		return
	}
	d.more++
}

// unmarshal is called for every JSON value before it is decoded into v, a
// pointer to its Go destination. It checks that the value's kind fits the
// destination; a value that does not is skipped and reported. Everything
// else (null included) is left to the default decoding, which calls
// unmarshal again for each member and item, except numbers, decoded here so
// that one out of range or fractional for an integer is reported too.
func (d *bodyDecoder) unmarshal(dec *jsontext.Decoder, v any) error {
	k := dec.PeekKind()
	t := reflect.TypeOf(v).Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if k == 'n' || k == jsontext.KindInvalid || t.Kind() == reflect.Interface {
		// null is absent; a syntax error is the default decoding's to
		// report; a free-form value takes any JSON.
		return errors.ErrUnsupported
	}
	if d.leaf(t) {
		// A type that decodes itself: decoded apart, so that its error
		// stays one problem.
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			reflect.ValueOf(v).Elem().SetZero()
			p := decodeProblem(t, err)
			p.Loc = append(locOf(d.root, dec.StackPointer()), p.Loc[1:]...)
			d.problem(p)
		}
		return nil
	}
	fits := false
	switch t.Kind() {
	case reflect.String:
		fits = k == '"'
	case reflect.Bool:
		fits = k == 't' || k == 'f'
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if k != '0' {
			break
		}
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if json.Unmarshal(raw, v) != nil {
			reflect.ValueOf(v).Elem().SetZero()
			d.mistyped(dec, t)
		}
		return nil
	case reflect.Slice, reflect.Array:
		fits = k == '['
	case reflect.Map, reflect.Struct:
		fits = k == '{'
	}
	if fits {
		return errors.ErrUnsupported
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	d.mistyped(dec, t)
	return nil
}

// mistyped reports the value just read as not of type t.
func (d *bodyDecoder) mistyped(dec *jsontext.Decoder, t reflect.Type) {
	if len(d.ps) >= maxProblems {
		d.more++ // not even the loc is built
		return
	}
	typ, msg := kindProblem(t)
	d.problem(apierr.Problem{Loc: locOf(d.root, dec.StackPointer()), Msg: msg, Type: typ})
}

// leaf reports whether values of type t decode themselves.
func (d *bodyDecoder) leaf(t reflect.Type) bool {
	if t == d.lastType { // list items: the same type over and over
		return d.lastLeaf
	}
	p := reflect.PointerTo(t)
	d.lastType = t
	d.lastLeaf = p.Implements(unmarshalerType) || p.Implements(unmarshalerFromType) || p.Implements(textUnmarshalerType)
	return d.lastLeaf
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	unmarshalerFromType = reflect.TypeFor[json.UnmarshalerFrom]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodeProblem describes a decoding error of a value of type t.
func decodeProblem(t reflect.Type, err error) apierr.Problem {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.As(err, &syn):
		msg := "Invalid JSON"
		if syn.Err != nil {
			msg = "Invalid JSON: " + syn.Err.Error()
		}
		return apierr.Problem{Loc: locOf(t, syn.JSONPointer), Msg: msg, Type: apierr.TypeJSONInvalid}
	case errors.As(err, &sem):
		loc := locOf(t, sem.JSONPointer)
		if sem.GoType == nil {
			return apierr.Problem{Loc: loc, Msg: "Invalid JSON value", Type: apierr.TypeJSONInvalid}
		}
		typ, msg := kindProblem(sem.GoType)
		return apierr.Problem{Loc: loc, Msg: msg, Type: typ}
	}
	return apierr.Problem{Loc: []any{"body"}, Msg: "Invalid JSON", Type: apierr.TypeJSONInvalid}
}

// kindProblem names the type of value a Go type expects, in the words of
// the wire contract's problem types.
func kindProblem(t reflect.Type) (typ, msg string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return apierr.TypeStringType, "Input should be a valid string"
	case reflect.Bool:
		return apierr.TypeBoolType, "Input should be a valid boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return apierr.TypeIntType, "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		return apierr.TypeFloatType, "Input should be a valid number"
	case reflect.Slice, reflect.Array:
		return apierr.TypeListType, "Input should be a valid list"
	case reflect.Map, reflect.Struct:
		return apierr.TypeDictType, "Input should be a valid object"
	}
	return apierr.TypeJSONInvalid, "Invalid JSON value"
}

// locOf turns a JSON pointer into a body loc: object member names
// stay strings and array indexes become ints, decided by walking t (an
// all-digit member name of a map or struct stays a string).
func locOf(t reflect.Type, p jsontext.Pointer) []any {
	loc := []any{"body"}
	for tok := range p.Tokens() {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var kind reflect.Kind
		if t != nil {
			kind = t.Kind()
		}
		switch kind {
		case reflect.Slice, reflect.Array:
			if i, err := strconv.Atoi(tok); err == nil {
				loc = append(loc, i)
			} else {
				loc = append(loc, tok)
			}
			t = t.Elem()
		case reflect.Map:
			loc = append(loc, tok)
			t = t.Elem()
		case reflect.Struct:
			loc = append(loc, tok)
			t = fieldType(t, tok)
		default:
			// Inside a free-form value (any): no type to walk.
			loc = append(loc, tok)
			t = nil
		}
	}
	return loc
}

// fieldType is the type of t's field whose JSON name is name, or nil.
func fieldType(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && f.Name == name) {
			return f.Type
		}
	}
	return nil
}

// pathID is pathIDs of the one path value v, of name.
func pathID(v, name string) (string, error) {
	if c, ok := CanonicalTenant(v); ok { // a tenant is a UUID too
		return c, nil
	}
	return "", apierr.Validation(apierr.Problem{Loc: []any{"path", name}, Type: apierr.TypeUUIDParsing,
		Msg: apierr.MsgInvalidUUID})
}

// pathIDs reads the named path values, each a UUID, as lowercase canonical
// strings. Malformed ones are a 422 at ["path", name].
func pathIDs(r *http.Request, names ...string) ([]string, error) {
	ids := make([]string, len(names))
	var ps []apierr.Problem
	for i, name := range names {
		v := r.PathValue(name)
		c, ok := CanonicalTenant(v) // a tenant is a UUID too
		if !ok {
			ps = append(ps, apierr.Problem{Loc: []any{"path", name}, Type: apierr.TypeUUIDParsing,
				Msg: apierr.MsgInvalidUUID})
			continue
		}
		ids[i] = c
	}
	if ps != nil {
		return nil, apierr.Validation(ps...)
	}
	return ids, nil
}

// queryParser reads typed query parameters, collecting every problem.
type queryParser struct {
	v  url.Values
	ps []apierr.Problem
}

func newQueryParser(raw string) *queryParser {
	v, err := url.ParseQuery(raw)
	q := &queryParser{v: v}
	if err != nil {
		q.ps = append(q.ps, apierr.Problem{Loc: []any{"query"}, Type: apierr.TypeValueError,
			Msg: "The query string is malformed: " + err.Error()})
	}
	return q
}

// last returns the last value of a parameter ("" when absent).
func (q *queryParser) last(name string) (string, bool) {
	vs := q.v[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

func (q *queryParser) str(name string) string {
	s, _ := q.last(name)
	return s
}

func (q *queryParser) intp(name string) *int {
	s, ok := q.last(name)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		q.ps = append(q.ps, apierr.Problem{Loc: []any{"query", name}, Type: apierr.TypeIntParsing,
			Msg: "Input should be a valid integer, unable to parse string as an integer"})
		return nil
	}
	return &n
}

func (q *queryParser) int(name string) int {
	if p := q.intp(name); p != nil {
		return *p
	}
	return 0
}

func (q *queryParser) boolp(name string) *bool {
	s, ok := q.last(name)
	if !ok {
		return nil
	}
	var b bool
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on", "t", "y":
		b = true
	case "false", "0", "no", "off", "f", "n":
	default:
		q.ps = append(q.ps, apierr.Problem{Loc: []any{"query", name}, Type: apierr.TypeBoolParsing,
			Msg: "Input should be a valid boolean, unable to interpret input"})
		return nil
	}
	return &b
}

// list reads a comma-separated parameter (repeating the parameter adds
// values). Empty means no values.
func (q *queryParser) list(name string) []string {
	var out []string
	for _, v := range q.v[name] {
		if strings.TrimSpace(v) == "" {
			continue
		}
		for s := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// done reports the parse problems, if any, together with those validate
// finds in what could be parsed (with the ControlPlane's limits), so that a
// 422 lists every problem. Without parse problems it returns nil: the
// ControlPlane validates the query itself.
func (q *queryParser) done(validate func(controlplane.Limits) error, lim controlplane.Limits) error {
	if len(q.ps) == 0 {
		return nil
	}
	return joinProblems(apierr.Validation(q.ps...), validate(lim))
}

// parseListDeployments reads the query of GET /v2/deployments (wire
// contract section 5); lim are the ControlPlane's Limits.
func parseListDeployments(raw string, lim controlplane.Limits) (*controlplane.ListDeploymentsQuery, error) {
	p := newQueryParser(raw)
	q := &controlplane.ListDeploymentsQuery{
		Limit:            p.intp("limit"),
		Offset:           p.int("offset"),
		NameContains:     p.str("name_contains"),
		Status:           controlplane.DeploymentStatus(p.str("status")),
		RemoteReconciled: p.boolp("remote_reconciled"),
		TagValueIDs:      p.list("tag_value_ids"),
		ImageVersion:     p.str("image_version"),
		DeploymentType:   controlplane.DeploymentType(p.str("deployment_type")),
		DeploymentIDs:    p.list("deployment_ids"),
		Name:             p.str("name"),
		AgentID:          p.str("agent_id"),
		AgentEnvironment: controlplane.AgentEnvironment(p.str("agent_environment")),
	}
	return q, p.done(q.ValidateWith, lim)
}

// parseListRevisions reads the query of GET
// /v2/deployments/{deployment_id}/revisions.
func parseListRevisions(raw string, lim controlplane.Limits) (*controlplane.ListRevisionsQuery, error) {
	p := newQueryParser(raw)
	q := &controlplane.ListRevisionsQuery{
		Limit:            p.intp("limit"),
		Offset:           p.int("offset"),
		RemoteReconciled: p.boolp("remote_reconciled"),
	}
	for _, s := range p.list("status") {
		q.Status = append(q.Status, controlplane.RevisionStatus(s))
	}
	return q, p.done(q.ValidateWith, lim)
}

// parseDeleteDeployment reads the query of DELETE
// /v2/deployments/{deployment_id} (wire contract section 11): force
// (default false) and delete_tracing_project (default true).
func parseDeleteDeployment(raw string) (*controlplane.DeleteDeploymentOptions, error) {
	p := newQueryParser(raw)
	o := &controlplane.DeleteDeploymentOptions{}
	if f := p.boolp("force"); f != nil {
		o.Force = *f
	}
	if d := p.boolp("delete_tracing_project"); d != nil {
		o.KeepTracingProject = !*d
	}
	return o, p.problems()
}

// parseDeleteDeployments reads the query of DELETE /v2/deployments:
// deployment_ids (comma-separated, as given) and the options of a single
// DELETE, which apply to each. Its problems are the options' and, with
// them, those of the ids as a whole.
func parseDeleteDeployments(raw string) ([]string, *controlplane.DeleteDeploymentOptions, error) {
	ids := newQueryParser(raw).list("deployment_ids")
	opts, err := parseDeleteDeployment(raw)
	if err != nil {
		err = joinProblems(err, controlplane.ValidateDeleteDeployments(ids))
	}
	return ids, opts, err
}

// parseDeleteListener reads the query of DELETE /v2/listeners/{listener_id}:
// force (default false).
func parseDeleteListener(raw string) (*controlplane.DeleteListenerOptions, error) {
	p := newQueryParser(raw)
	o := &controlplane.DeleteListenerOptions{}
	if f := p.boolp("force"); f != nil {
		o.Force = *f
	}
	return o, p.problems()
}

// problems reports the parse problems, if any, of a query with nothing
// more to validate.
func (q *queryParser) problems() error {
	if len(q.ps) == 0 {
		return nil
	}
	return apierr.Validation(q.ps...)
}

// parseListListeners reads the query of GET /v2/listeners.
func parseListListeners(raw string, lim controlplane.Limits) (*controlplane.ListListenersQuery, error) {
	p := newQueryParser(raw)
	q := &controlplane.ListListenersQuery{Limit: p.intp("limit"), Offset: p.int("offset")}
	return q, p.done(q.ValidateWith, lim)
}
