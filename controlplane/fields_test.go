package controlplane_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
)

// The rules table (FieldRules) is the one declaration of a deployment's
// fields: what carries a field (the request types, the draft the checks
// read, the storage form, the answers) follows from its row. These tests
// hold the wire types and the table together, each failure naming the
// field.

// responseOnly are the members of a Deployment's JSON that no row of the
// rules table declares: the service owns them, and no request carries
// them.
var responseOnly = map[string]string{
	"id":                 "assigned on create",
	"tenant_id":          "the tenant of the API key that reached the deployment",
	"created_at":         "set on create",
	"updated_at":         "set by every change",
	"status":             "the deployment's lifecycle (lifecycle.go)",
	"latest_revision_id": "the newest revision, set when one is created",
	"active_revision_id": "the revision a deployer reported DEPLOYED",
	"image_version":      "the image of the active revision, as its deployer reported it",
	"remote_reconciled":  "whether an agent serves the deployment, decided when its work is queued",
	"status_message":     "why a deployment being deleted waits, written by the teardown's backoff",
	// Answers carry graph_config_path under the hosted service's name
	// too, always equal (wire contract section 9).
	"source_revision_config.langgraph_config_path": "graph_config_path under its other name",
}

// requestOnly are the members of a request that no row of the rules table
// declares: each is read by its own check, not through the draft.
var requestOnly = map[string]string{
	"CreateDeploymentRequest.tag_value_ids":    "the tag values a deployment carries, kept beside it (checker.tagValueIDs)",
	"UpdateDeploymentRequest.revision_source":  "null or the deployment's own source (revisionSourceProblem)",
	"UpdateDeploymentRequest.tracked_packages": "kept on the revision the request creates, not on the deployment",
	// An alias of graph_config_path, folded into it (normalizeRevisionConfig).
	"CreateDeploymentRequest.source_revision_config.langgraph_config_path": "an alias of graph_config_path",
	"UpdateDeploymentRequest.source_revision_config.langgraph_config_path": "an alias of graph_config_path",
}

// jsonMembers lists the members of struct type t by JSON name, with their
// types (pointers removed), in the order of t's fields.
func jsonMembers(t reflect.Type) (names []string, types map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	types = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		names = append(names, name)
		types[name] = ft
	}
	return names, types
}

// memberAt is the type of the member of t at the JSON path loc.
func memberAt(t reflect.Type, loc []string) (reflect.Type, bool) {
	for _, name := range loc {
		if t.Kind() != reflect.Struct && (t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct) {
			return nil, false
		}
		_, types := jsonMembers(t)
		ft, ok := types[name]
		if !ok {
			return nil, false
		}
		t = ft
	}
	return t, true
}

// TestWireFieldsHaveRows walks the JSON members of the deployment's wire
// types: each is a row of the rules table, an object of rows
// (source_config, source_revision_config, whose members are walked in
// turn), or one of the documented members the table leaves to others
// (responseOnly, requestOnly). Each row is a member of Deployment, and of
// each request that may carry it: CreateDeploymentRequest when a create
// of some source takes or refuses a value, UpdateDeploymentRequest when a
// PATCH of some source does.
func TestWireFieldsHaveRows(t *testing.T) {
	rules := controlplane.FieldRules()
	isRow := func(loc []string) bool {
		return slices.ContainsFunc(rules, func(r controlplane.FieldRule) bool { return slices.Equal(r.Loc, loc) })
	}
	holdsRows := func(loc []string) bool {
		return slices.ContainsFunc(rules, func(r controlplane.FieldRule) bool {
			return len(r.Loc) > len(loc) && slices.Equal(r.Loc[:len(loc)], loc)
		})
	}
	for _, tt := range []struct {
		v    any
		only map[string]string // by the member's path, or its type's name and path
	}{
		{controlplane.Deployment{}, responseOnly},
		{controlplane.CreateDeploymentRequest{}, requestOnly},
		{controlplane.UpdateDeploymentRequest{}, requestOnly},
	} {
		typ := reflect.TypeOf(tt.v)
		var walk func(rt reflect.Type, loc []string)
		walk = func(rt reflect.Type, loc []string) {
			names, types := jsonMembers(rt)
			for _, name := range names {
				l := append(slices.Clone(loc), name)
				path := strings.Join(l, ".")
				switch {
				case isRow(l):
				case holdsRows(l) && types[name].Kind() == reflect.Struct:
					walk(types[name], l)
				case tt.only[path] != "" || tt.only[typ.Name()+"."+path] != "":
				default:
					t.Errorf("%s.%s: no row of the rules table declares it, and it is not a documented member the table leaves to others", typ.Name(), path)
				}
			}
		}
		walk(typ, nil)
	}
	for _, r := range rules {
		name := strings.Join(r.Loc, ".")
		if _, ok := memberAt(reflect.TypeFor[controlplane.Deployment](), r.Loc); !ok {
			t.Errorf("row %s: Deployment has no member %s", name, name)
		}
		var create, patch bool
		for _, s := range controlplane.Sources() {
			switch r.Create[s] {
			case controlplane.CreateRequired, controlplane.CreateOptional, controlplane.CreateReadOnly:
				create = true
			}
			switch r.Patch[s] {
			case controlplane.PatchImmutable, controlplane.PatchInPlace, controlplane.PatchRevision, controlplane.PatchReadOnly:
				patch = true
			}
		}
		if _, ok := memberAt(reflect.TypeFor[controlplane.CreateDeploymentRequest](), r.Loc); create && !ok {
			t.Errorf("row %s: a create takes it, but CreateDeploymentRequest has no member %s", name, name)
		}
		if _, ok := memberAt(reflect.TypeFor[controlplane.UpdateDeploymentRequest](), r.Loc); patch && !ok {
			t.Errorf("row %s: a PATCH takes it, but UpdateDeploymentRequest has no member %s", name, name)
		}
	}
}

// fieldAt is the field of Deployment at the JSON path loc.
func fieldAt(t *testing.T, loc []string) reflect.StructField {
	t.Helper()
	var f reflect.StructField
	rt := reflect.TypeFor[controlplane.Deployment]()
	for _, l := range loc {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		i := slices.IndexFunc(reflect.VisibleFields(rt), func(sf reflect.StructField) bool {
			jn, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			return jn == l
		})
		if i < 0 {
			t.Fatalf("Deployment has no member %s", strings.Join(loc, "."))
		}
		f = reflect.VisibleFields(rt)[i]
		rt = f.Type
	}
	return f
}

// rowValue is a value for the row at loc in a deployment of source s, of
// the Go type of Deployment's member there, that no base body
// (roundTripBase) holds and no create default gives: the n-th of its kind.
// fx makes the references a value needs; also are other members the
// request needs beside it, by path.
func rowValue(t *testing.T, fx *fixture, s controlplane.Source, loc []string, n int) (v any, also map[string]any) {
	t.Helper()
	name := strings.Join(loc, ".")
	switch name {
	case "source":
		return s, nil
	case "source_config.integration_id":
		return new(fx.integration(tenantA)), nil
	case "source_config.listener_id":
		return new(fx.listener(tenantA)), nil
	case "source_config.listener_config":
		ns := fmt.Sprintf("ns-%d", n)
		return &controlplane.ListenerConfig{K8sNamespace: &ns}, map[string]any{"source_config.listener_id": fx.listener(tenantA, ns)}
	case "source_config.resource_spec":
		return &controlplane.ResourceSpec{CPU: new(float64(n) + 0.5)}, nil
	case "source_config.preview":
		return &controlplane.PreviewConfig{Mode: new(controlplane.PreviewLabel), Label: new(fmt.Sprintf("preview-%d", n)),
			IdleTTLMinutes: new(int64(n)), MaxConcurrent: new(int64(n))}, nil
	case "secrets":
		return []controlplane.Secret{{Name: fmt.Sprintf("GEN_%d", n), Value: fmt.Sprintf("value %d", n)}}, nil
	case "secret_references":
		return []controlplane.SecretReference{{Name: fmt.Sprintf("REF_%d", n), SecretName: fmt.Sprintf("creds-%d", n), SecretKey: "key"}}, nil
	case "agent":
		envs := controlplane.AgentEnvironments()
		return &controlplane.DeploymentAgent{AgentID: fmt.Sprintf("agent-%d", n), Environment: envs[n%len(envs)]}, nil
	}
	// Otherwise the value follows from the member's type and shape tag.
	f := fieldAt(t, loc)
	tag, et := f.Tag.Get("validate"), f.Type
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	p := reflect.New(et)
	switch et.Kind() {
	case reflect.String:
		v := fmt.Sprintf("gen-%d", n)
		if _, opts, ok := strings.Cut(tag, "oneof="); ok {
			vals := strings.Fields(strings.Split(opts, ",")[0])
			v = vals[(n-1)%len(vals)]
		} else if strings.Contains(tag, "httpurl") {
			v = fmt.Sprintf("https://gen-%d.example", n)
		} else if strings.Contains(tag, "uuid") {
			t.Fatalf("row %s: a reference needs a value made for it: add one to rowValue", name)
		}
		p.Elem().SetString(v)
	case reflect.Bool:
		p.Elem().SetBool(true)
	case reflect.Int, reflect.Int64:
		p.Elem().SetInt(int64(n))
	case reflect.Float64:
		p.Elem().SetFloat(float64(n) + 0.5)
	default:
		t.Fatalf("row %s: no value of type %s: add one to rowValue", name, f.Type)
	}
	if f.Type.Kind() == reflect.Pointer {
		return p.Interface(), nil
	}
	return p.Elem().Interface(), nil
}

// roundTripBase is a valid create body of source s named name, as a JSON
// object.
func roundTripBase(fx *fixture, s controlplane.Source, name string) map[string]any {
	body := map[string]any{"name": name, "source": string(s)}
	switch s {
	case controlplane.SourceGitHub:
		body["source_config"] = map[string]any{"integration_id": fx.integration(tenantA), "repo_url": "https://github.com/acme/agent"}
		body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "langgraph.json"}
	case controlplane.SourceInternalSource:
		body["source_revision_config"] = map[string]any{"source_tarball_path": "uploads/base.tar.gz"}
	default:
		body["source_revision_config"] = map[string]any{"image_uri": "registry.example.com/agent:1"}
	}
	return body
}

// withRow is body (a JSON object) with the member at the path name set to
// v, and the members of also.
func withRow(body map[string]any, name string, v any, also map[string]any) map[string]any {
	set := func(path string, v any) {
		o, loc := body, strings.Split(path, ".")
		for _, l := range loc[:len(loc)-1] {
			next, ok := o[l].(map[string]any)
			if !ok {
				next = map[string]any{}
				o[l] = next
			}
			o = next
		}
		o[loc[len(loc)-1]] = v
	}
	set(name, v)
	for k, a := range also {
		set(k, a)
	}
	return body
}

// plain is v dereferenced: nil for a nil pointer.
func plain(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		return v
	}
	if rv.IsNil() {
		return nil
	}
	return rv.Elem().Interface()
}

// valueAt is the value of the member of d at loc, plain.
func valueAt(d *controlplane.Deployment, loc []string) any {
	v := reflect.ValueOf(d).Elem()
	for _, l := range loc {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return nil
			}
			v = v.Elem()
		}
		i := slices.IndexFunc(reflect.VisibleFields(v.Type()), func(sf reflect.StructField) bool {
			jn, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			return jn == l
		})
		v = v.Field(i)
	}
	return plain(v.Interface())
}

// request decodes body (a JSON object) into a request of type R, as a
// client's JSON reaches the ControlPlane.
func request[R any](t *testing.T, body map[string]any) *R {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return decode[R](t, string(b))
}

// TestRowsRoundTrip: for every row and every source, a value a create
// takes, and a value a PATCH sets (in place or by a new revision), is what
// the deployment then answers: the create's or the PATCH's answer, GET,
// its JSON and the list, which read the storage form. The dry-run
// validators accept the same requests; a value a PATCH set by a revision
// comes back when that revision is redeployed.
func TestRowsRoundTrip(t *testing.T) {
	for _, r := range controlplane.FieldRules() {
		name := strings.Join(r.Loc, ".")
		for _, s := range controlplane.Sources() {
			create, patch := r.Create[s], r.Patch[s]
			creates := create == controlplane.CreateRequired || create == controlplane.CreateOptional
			patches := patch == controlplane.PatchInPlace || patch == controlplane.PatchRevision
			if !creates && !patches {
				continue
			}
			t.Run(name+"/"+string(s), func(t *testing.T) {
				fx := newFixture(t, &controlplane.Options{Uploads: controlplane.AnyUpload{}})
				// answers checks every answer about d after step.
				answers := func(step string, d *controlplane.Deployment, want any) {
					t.Helper()
					got, err := fx.cp.GetDeployment(fx.ctx, tenantA, d.ID)
					if err != nil {
						t.Fatal(err)
					}
					b, err := fx.cp.GetDeploymentJSON(fx.ctx, tenantA, d.ID)
					if err != nil {
						t.Fatal(err)
					}
					page, err := fx.cp.ListDeployments(fx.ctx, tenantA, &controlplane.ListDeploymentsQuery{DeploymentIDs: []string{d.ID}})
					if err != nil || len(page.Resources) != 1 {
						t.Fatalf("list: %v, %v", page, err)
					}
					for _, a := range []struct {
						what string
						d    *controlplane.Deployment
					}{{"the call", d}, {"GET", got}, {"GET's JSON", decode[controlplane.Deployment](t, string(b))}, {"the list", &page.Resources[0]}} {
						if v := valueAt(a.d, r.Loc); !reflect.DeepEqual(v, want) {
							t.Errorf("%s of %s: dropped by %s: %s answers %#v, want %#v", name, s, step, a.what, v, want)
						}
					}
				}

				if creates {
					v, also := rowValue(t, fx, s, r.Loc, 1)
					req := request[controlplane.CreateDeploymentRequest](t, withRow(roundTripBase(fx, s, "created"), name, v, also))
					if err := fx.cp.ValidateCreateDeployment(fx.ctx, tenantA, req); err != nil {
						t.Fatalf("%s of %s: the dry run of a create refuses %#v: %v", name, s, v, err)
					}
					d, err := fx.cp.CreateDeployment(fx.ctx, tenantA, req)
					if err != nil {
						t.Fatalf("%s of %s: a create with %#v: %v", name, s, v, err)
					}
					answers("a create", d, plain(v))
				}
				if !patches {
					return
				}
				d, err := fx.cp.CreateDeployment(fx.ctx, tenantA, request[controlplane.CreateDeploymentRequest](t, roundTripBase(fx, s, "patched")))
				if err != nil {
					t.Fatal(err)
				}
				pin := name == "pinned_revision_id"
				if pin {
					// Only the active revision can be pinned.
					fx.drainer(deploysim.New(&deploysim.Options{Step: 1}))()
					if d, err = fx.cp.GetDeployment(fx.ctx, tenantA, d.ID); err != nil || d.ActiveRevisionID == nil {
						t.Fatalf("deployed: %v, %v", d, err)
					}
				}
				var vals []any
				var revs []string
				for n := 2; n <= 3; n++ {
					v, also := rowValue(t, fx, s, r.Loc, n)
					if pin {
						v = d.ActiveRevisionID
					}
					req := request[controlplane.UpdateDeploymentRequest](t, withRow(map[string]any{}, name, v, also))
					if err := fx.cp.ValidateUpdateDeployment(fx.ctx, tenantA, d.ID, req); err != nil {
						t.Fatalf("%s of %s: the dry run of a PATCH refuses %#v: %v", name, s, v, err)
					}
					if d, err = fx.cp.UpdateDeployment(fx.ctx, tenantA, d.ID, req); err != nil {
						t.Fatalf("%s of %s: a PATCH with %#v: %v", name, s, v, err)
					}
					answers("a PATCH", d, plain(v))
					vals, revs = append(vals, plain(v)), append(revs, *d.LatestRevisionID)
				}
				if patch != controlplane.PatchRevision {
					return
				}
				if revs[0] == revs[1] {
					t.Fatalf("%s of %s: the PATCHes of a revision field made no revision", name, s)
				}
				// Redeploying the first PATCH's revision sets its value
				// back, from the revision's record.
				if d, err = fx.cp.RedeployRevision(fx.ctx, tenantA, d.ID, revs[0]); err != nil {
					t.Fatal(err)
				}
				answers("a redeploy", d, vals[0])
			})
		}
	}
}
