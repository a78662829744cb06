package httphandler

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// decodeTargets are the request types decodeBody meets.
var decodeTargets = []func() any{
	func() any { return new(controlplane.CreateDeploymentRequest) },
	func() any { return new(controlplane.UpdateDeploymentRequest) },
	func() any { return new(controlplane.CreateListenerRequest) },
	func() any { return new(controlplane.UpdateListenerRequest) },
	func() any { return new(controlplane.CreateIntegrationRequest) },
	func() any { return new(oauthflow.NewProvider) },
	func() any { return new(oauthflow.ProviderPatch) },
	func() any { return new(oauthflow.AuthRequest) },
	func() any { return new(pushPayload) },
}

// FuzzDecodeBody: decodeBody never panics; every problem's loc starts
// with "body" and goes on with member names and indexes; at most
// maxProblems are stored; a body the strict decoder (json.Unmarshal) takes
// decodes to the same value without problems, a body it refuses as
// malformed JSON is one json_invalid problem, and a body it refuses for a
// type gives type problems.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"name": `, `{"a":1}{}`, "{\"name\": \"\xff\"}",
		`{"name": "a", "name": "b"}`, `{"name": 5, "source": 7, "secrets": "x"}`,
		`{"secrets": [1, {"name": 2, "value": "v"}, null, {"name": "A"}]}`,
		`{"source_config": {"resource_spec": {"min_scale": 1e400, "max_scale": 1.5, "cpu": "1", "labels": {"0": 1}}}}`,
		`{"source_config": {"resource_spec": {"sidecars": [{"env": [{"valueFrom": {"x": [1]}}]}, 3]}}}`,
		`{"compute_config": {"k8s_namespaces": ["a", 1, []]}, "version": {}}`,
		`{"installation_id": 9007199254740993, "name": "n"}`, `{"installation_id": -1.5}`,
		`{"scopes": [1, "a", null], "user_id": true, "use_agent_builder_public_oauth": "yes"}`,
		`{"ref": 1, "installation": {"id": "x"}, "repository": {"clone_url": []}}`,
		`{"a/b~c": 1, "name": {"x": 1, "x": 2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range decodeTargets {
			v := target()
			err := decodeBody(body, v, true)
			strict := target()
			serr := json.Unmarshal(body, strict)
			if err == nil {
				if serr == nil {
					if d := cmp.Diff(strict, v); d != "" {
						t.Fatalf("%T %q: decodes unlike json.Unmarshal (-strict +got):\n%s", v, body, d)
					}
				}
				continue
			}
			var ve *apierr.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("%T %q: %v", v, body, err)
			}
			if len(ve.Problems) > maxProblems {
				t.Fatalf("%T %q: %d problems stored", v, body, len(ve.Problems))
			}
			for _, p := range ve.Problems {
				if len(p.Loc) == 0 || p.Loc[0] != "body" || p.Msg == "" || p.Type == "" {
					t.Fatalf("%T %q: problem %+v", v, body, p)
				}
				for _, l := range p.Loc[1:] {
					switch l := l.(type) {
					case string:
					case int:
						if l < 0 {
							t.Fatalf("%T %q: loc %v", v, body, p.Loc)
						}
					default:
						t.Fatalf("%T %q: loc %v holds %T", v, body, p.Loc, l)
					}
				}
			}
			var tp *typeProblems
			var syn *jsontext.SyntacticError
			switch {
			case errors.As(err, &tp):
				if serr == nil || errors.As(serr, &syn) {
					t.Fatalf("%T %q: type problems %+v, json.Unmarshal: %v", v, body, ve.Problems, serr)
				}
			case errors.As(serr, &syn):
				if len(ve.Problems) != 1 || ve.Problems[0].Type != "json_invalid" {
					t.Fatalf("%T %q: malformed JSON gives %+v", v, body, ve.Problems)
				}
			default:
				// Not a type problem: malformed JSON, or a semantic error
				// the kind checks do not foresee; either way one problem.
				if serr == nil || len(ve.Problems) != 1 {
					t.Fatalf("%T %q: %+v, json.Unmarshal: %v", v, body, ve.Problems, serr)
				}
			}
		}
	})
}
