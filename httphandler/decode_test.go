package httphandler_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// TestTypeProblemsWithRuleProblems: a body whose members have the wrong
// type is a 422 listing every mistyped member (nested ones with their
// path, list indexes as ints) together with the rule problems of what did
// decode, and nothing is written. A rule problem at or under a mistyped
// member is not listed: the member was sent, just not as the right type.
func TestTypeProblemsWithRuleProblems(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	tests := []struct {
		name, method, path, body string
		want                     []apierr.Problem
	}{
		{"every member of the wrong type", "POST", "/v2/deployments", `{"name":5,"source":7,"secrets":"x"}`, []apierr.Problem{
			{Loc: []any{"body", "name"}, Type: "string_type"},
			{Loc: []any{"body", "source"}, Type: "string_type"},
			{Loc: []any{"body", "secrets"}, Type: "list_type"}}},
		{"nested, with rules", "POST", "/v2/deployments", `{"name": "ok", "source": "external_docker",
			"source_revision_config": {"image_uri": 5},
			"secrets": [{"name": "A", "value": 1}, 3, {"name": "bad name!", "value": "v"}]}`, []apierr.Problem{
			{Loc: []any{"body", "source_revision_config", "image_uri"}, Type: "string_type"},
			{Loc: []any{"body", "secrets", 0, "value"}, Type: "string_type"},
			{Loc: []any{"body", "secrets", 1}, Type: "dict_type"},
			{Loc: []any{"body", "secrets", 2, "name"}, Type: "string_pattern_mismatch"}}},
		{"rules of a source that decoded", "POST", "/v2/deployments", `{"name": "Bad Name", "source": "svn", "tag_value_ids": [1, "x"]}`,
			[]apierr.Problem{
				{Loc: []any{"body", "tag_value_ids", 0}, Type: "string_type"},
				{Loc: []any{"body", "source"}, Type: "literal_error"},
				{Loc: []any{"body", "name"}, Type: "string_pattern_mismatch"},
				{Loc: []any{"body", "tag_value_ids", 1}, Type: "uuid_parsing"}}},
		{"integer out of range and fractional", "POST", "/v2/deployments", `{"name": "n", "source": "external_docker",
			"source_revision_config": {"image_uri": "i"},
			"source_config": {"resource_spec": {"min_scale": 1e400, "max_scale": 1.5, "cpu": "1"}}}`, []apierr.Problem{
			{Loc: []any{"body", "source_config", "resource_spec", "min_scale"}, Type: "int_type"},
			{Loc: []any{"body", "source_config", "resource_spec", "max_scale"}, Type: "int_type"},
			{Loc: []any{"body", "source_config", "resource_spec", "cpu"}, Type: "float_type"}}},
		{"PATCH: type and immutable field", "PATCH", "/v2/deployments/" + f.github.ID,
			`{"name": "renamed", "source_config": {"build_on_push": "yes"}}`, []apierr.Problem{
				{Loc: []any{"body", "source_config", "build_on_push"}, Type: "bool_type"},
				{Loc: []any{"body", "name"}, Type: "immutable_field"}}},
		{"new revision: type and rule", "POST", "/v2/deployments/" + f.github.ID + "/revisions",
			`{"source_revision_config": {"repo_ref": ["main"]}, "secrets": [{"name": "1A", "value": "v"}]}`, []apierr.Problem{
				{Loc: []any{"body", "source_revision_config", "repo_ref"}, Type: "string_type"},
				{Loc: []any{"body", "secrets", 0, "name"}, Type: "string_pattern_mismatch"}}},
		{"PATCH of an unknown deployment stays a 422 of its types", "PATCH", "/v2/deployments/0194c0de-0000-7000-8000-0000000000ff",
			`{"secrets": 1}`, []apierr.Problem{{Loc: []any{"body", "secrets"}, Type: "list_type"}}},
		{"bad path id and bad body", "PATCH", "/v2/deployments/nope", `{"secrets": 3, "name": "x"}`, []apierr.Problem{
			{Loc: []any{"path", "deployment_id"}, Type: "uuid_parsing"},
			{Loc: []any{"body", "secrets"}, Type: "list_type"}}},
		{"listener create", "POST", "/v2/listeners",
			`{"compute_type": "k8s8", "compute_id": 5, "compute_config": {"k8s_namespaces": ["Bad", 1]}}`, []apierr.Problem{
				{Loc: []any{"body", "compute_id"}, Type: "string_type"},
				{Loc: []any{"body", "compute_config", "k8s_namespaces", 1}, Type: "string_type"},
				{Loc: []any{"body", "compute_type"}, Type: "literal_error"},
				{Loc: []any{"body", "compute_config", "k8s_namespaces", 0}, Type: "string_pattern_mismatch"}}},
		{"listener PATCH", "PATCH", "/v2/listeners/" + f.listener.ID, `{"compute_id": "other", "version": 3}`, []apierr.Problem{
			{Loc: []any{"body", "version"}, Type: "string_type"},
			{Loc: []any{"body", "compute_id"}, Type: "immutable_field"}}},
		{"not an object", "POST", "/v2/deployments", `[{"name": "x"}]`, []apierr.Problem{
			{Loc: []any{"body"}, Type: "dict_type"}}},
		{"malformed JSON stays one problem", "POST", "/v2/deployments", `{"name": 5, "source": }`, []apierr.Problem{
			{Loc: []any{"body", "source"}, Type: "json_invalid"}}},
		{"a duplicate name after a type problem is malformed JSON", "POST", "/v2/deployments", `{"name": 5, "source": "github", "source": "x"}`,
			[]apierr.Problem{{Loc: []any{"body", "source"}, Type: "json_invalid"}}},
		{"a free-form value takes any JSON", "POST", "/v2/deployments", `{"name": 5, "source": "external_docker",
			"source_revision_config": {"image_uri": "i"},
			"source_config": {"resource_spec": {"sidecars": [{"name": "s", "image": "i", "env": [{"name": "A", "valueFrom": {"x": [1, "y"]}}]}]}}}`,
			[]apierr.Problem{{Loc: []any{"body", "name"}, Type: "string_type"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.as(keyA, "GET", "/v2/deployments?limit=100", "").body
			beforeL := s.as(keyA, "GET", "/v2/listeners?limit=100", "").body
			got := problems(t, s.as(keyA, tt.method, tt.path, tt.body))
			for i := range got {
				got[i].Msg = ""
			}
			diff(t, "problems", tt.want, got)
			diff(t, "deployments (nothing written)", string(before), string(s.as(keyA, "GET", "/v2/deployments?limit=100", "").body))
			diff(t, "listeners (nothing written)", string(beforeL), string(s.as(keyA, "GET", "/v2/listeners?limit=100", "").body))
		})
	}
	revs := must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+f.github.ID+"/revisions", "", 200)
	diff(t, "revisions of the github deployment", 1, len(revs.Resources))
}

// TestProblemsCapped: a 1 MB body of 200,000 mistyped items answers a 422
// of 100 problems, the last saying how many were left out, in a small
// body. (Handler time is bounded too: the decoder does not even build the
// loc of a problem beyond the cap, and the rules do not run.)
func TestProblemsCapped(t *testing.T) {
	s := newServer(t, nil)
	const n = 200_000
	body := `{"name": "n", "source": "github", "secrets": [` + strings.Repeat("1234,", n-1) + `1234]}`
	if len(body) > 1<<20 {
		t.Fatalf("body of %d bytes, over the default limit", len(body))
	}
	r := s.as(keyA, "POST", "/v2/deployments", body)
	ps := problems(t, r)
	t.Logf("422 body of %d bytes", len(r.body))
	if len(r.body) >= 64<<10 {
		t.Errorf("422 body of %d bytes", len(r.body))
	}
	if len(ps) != 100 {
		t.Fatalf("%d problems listed, want 100", len(ps))
	}
	diff(t, "first", apierr.Problem{Loc: []any{"body", "secrets", 0}, Msg: "Input should be a valid object", Type: "dict_type"}, ps[0])
	diff(t, "99th", []any{"body", "secrets", 98}, ps[98].Loc)
	diff(t, "last", apierr.Problem{Loc: []any{"body"}, Type: "too_many_errors",
		Msg: fmt.Sprintf("Too many problems: %d more problems not shown", n-99)}, ps[99])

	// Exactly 100 problems are all listed.
	body = `{"name": "n", "source": "external_docker", "source_revision_config": {"image_uri": "i"},
		"secrets": [` + strings.Repeat("1,", 99) + `1]}`
	ps = problems(t, s.as(keyA, "POST", "/v2/deployments", body))
	diff(t, "100 problems", 100, len(ps))
	diff(t, "the 100th is a problem", []any{"body", "secrets", 99}, ps[99].Loc)

	// 101 problems from the type checks and the rules together: capped
	// as well.
	body = `{"name": "Bad Name", "source": "external_docker", "source_revision_config": {"image_uri": "i"},
		"secrets": [` + strings.Repeat("1,", 99) + `1]}`
	ps = problems(t, s.as(keyA, "POST", "/v2/deployments", body))
	diff(t, "problems listed", 100, len(ps))
	diff(t, "last", "too_many_errors", ps[99].Type)
}

// TestOAuthProblemsCapped: the cap applies to the OAuth domain's
// validation errors too.
func TestOAuthProblemsCapped(t *testing.T) {
	s := newServer(t, nil)
	_ = must[any](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), http.StatusOK)
	body := `{"user_id": "u", "provider": "fake", "scopes": [` + strings.Repeat(`"",`, 199_999) + `""]}`
	r := s.as(keyA, "POST", "/v2/auth/authenticate", body)
	ps := problems(t, r)
	if len(ps) > 100 {
		t.Errorf("%d problems listed", len(ps))
	}
	if len(r.body) >= 64<<10 {
		t.Errorf("422 body of %d bytes", len(r.body))
	}
}
