package controlplane

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/wiretime"
)

// rowFixtures are two deployments that differ in every field of the rules
// table (checked by TestRulesFixturesDiffer), for the row property tests.
func rowFixtures() (a, b *deploymentRecord) {
	a = &deploymentRecord{Deployment: Deployment{ID: "0190a2b4-0000-7000-8000-00000000000a", Name: "alpha", DisplayName: new("Alpha"), Source: SourceGitHub,
		Status: StatusReady, CreatedAt: wiretime.New(wiretime.Time{}.Time()),
		SourceConfig: SourceConfig{IntegrationID: new("0190a2b4-0000-7000-8000-0000000000a1"), RepoURL: new("github.com/o/a"),
			DeploymentType: new(DeploymentTypeDev), BuildOnPush: new(true), CustomURL: new("https://a.example"),
			ResourceSpec: &ResourceSpec{CPU: new(1.0)}, ListenerID: new("0190a2b4-0000-7000-8000-0000000000a2"),
			ListenerConfig: &ListenerConfig{K8sNamespace: new("ns-a")}, InstallCommand: new("pip install a"), BuildCommand: new("make a"),
			Preview:      &PreviewConfig{Mode: new(PreviewLabel), Label: new("preview"), IdleTTLMinutes: new(int64(60)), MaxConcurrent: new(int64(3))},
			AutoRollback: new(true)},
		SourceRevisionConfig: SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("a.json"), ImageURI: new("r/a:1"),
			SourceTarballPath: new("uploads/a.tar.gz"), RepoCommitSHA: new("aaaaaaa")},
		Secrets: []Secret{{Name: "A", Value: "a"}}, URL: new("http://127.0.0.1:1/a"),
		SecretReferences: []SecretReference{{Name: "A_REF", SecretName: "creds-a", SecretKey: "key-a"}},
		Agent:            &DeploymentAgent{AgentID: "agent-a", Environment: AgentDevelopment}, IsPreview: true,
		PinnedRevisionID: new("0190a2b4-0000-7000-8000-0000000000a3")}}
	b = &deploymentRecord{Deployment: Deployment{ID: a.ID, Name: "beta", DisplayName: new("Beta"), Source: SourceExternalDocker,
		Status: StatusReady, CreatedAt: a.CreatedAt,
		SourceConfig: SourceConfig{IntegrationID: new("0190a2b4-0000-7000-8000-0000000000b1"), RepoURL: new("github.com/o/b"),
			DeploymentType: new(DeploymentTypeProd), BuildOnPush: new(false), CustomURL: new("https://b.example"),
			ResourceSpec: &ResourceSpec{CPU: new(2.0)}, ListenerID: new("0190a2b4-0000-7000-8000-0000000000b2"),
			ListenerConfig: &ListenerConfig{K8sNamespace: new("ns-b")}, InstallCommand: new("pip install b"), BuildCommand: new("make b"),
			AutoRollback: new(false)},
		SourceRevisionConfig: SourceRevisionConfig{RepoRef: new("dev"), GraphConfigPath: new("b.json"), ImageURI: new("r/b:1"),
			SourceTarballPath: new("uploads/b.tar.gz"), RepoCommitSHA: new("bbbbbbb")},
		Secrets: []Secret{{Name: "B", Value: "b"}}, URL: new("http://127.0.0.1:1/b"),
		SecretReferences: []SecretReference{{Name: "B_REF", SecretName: "creds-b", SecretKey: "key-b"}},
		Agent:            &DeploymentAgent{AgentID: "agent-b", Environment: AgentStaging}}}
	return a, b
}

func rowName(r *fieldRule) string { return strings.Join(r.loc, ".") }

// TestRulesFixturesDiffer: the fixtures differ in every row, and each
// row's set copies its field and nothing else (every other row reads the
// same after it).
func TestRulesFixturesDiffer(t *testing.T) {
	for i := range rules {
		r := &rules[i]
		a, b := rowFixtures()
		if reflect.DeepEqual(r.get(&a.Deployment), r.get(&b.Deployment)) {
			t.Fatalf("%s: the fixtures agree", rowName(r))
		}
		if _, ok := fieldAt(reflect.TypeFor[Deployment](), r.loc); !ok {
			t.Errorf("%s names no field of Deployment", rowName(r))
		}
		r.set(&a.Deployment, &b.Deployment)
		if !reflect.DeepEqual(r.get(&a.Deployment), r.get(&b.Deployment)) {
			t.Errorf("%s: set does not copy the field", rowName(r))
		}
		orig, _ := rowFixtures()
		for j := range rules {
			if o := &rules[j]; j != i && !reflect.DeepEqual(o.get(&a.Deployment), o.get(&orig.Deployment)) {
				t.Errorf("%s: set changes %s too", rowName(r), rowName(o))
			}
		}
	}
}

// TestRulesSnapshot: a new revision records every snapshot row; a redeploy
// of it sets back every snapRestored row and leaves every other field of
// the deployment as it is; every revision-triggering field (PatchRevision
// for some source) is snapRestored.
func TestRulesSnapshot(t *testing.T) {
	for i := range rules {
		r := &rules[i]
		a, b := rowFixtures()
		rev := newRevision(a, "0190a2b4-0000-7000-8000-0000000000c1", a.CreatedAt)
		if got := r.get(rev.snapshot()); r.snap != snapNone && !reflect.DeepEqual(got, r.get(&a.Deployment)) {
			t.Errorf("%s: the revision records %v, want %v", rowName(r), got, r.get(&a.Deployment))
		}
		redeployed(&b.Deployment, rev)
		want := r.get(&b.Deployment)
		if r.snap == snapRestored {
			want = r.get(&a.Deployment)
		}
		_, orig := rowFixtures()
		if r.snap != snapRestored {
			want = r.get(&orig.Deployment)
		}
		if got := r.get(&b.Deployment); !reflect.DeepEqual(got, want) {
			t.Errorf("%s (snapshot policy %d): after redeploy %v, want %v", rowName(r), r.snap, got, want)
		}
		for si := range allSources {
			if r.patch[si] == PatchRevision && r.snap != snapRestored {
				t.Errorf("%s: revision-triggering for %s but not restored by a redeploy", rowName(r), allSources[si])
			}
		}
	}
}

// TestRulesIndexes: changing a row's field changes the deployment's index
// keys of exactly the index fields the row names, and its list summary iff
// the row says so.
func TestRulesIndexes(t *testing.T) {
	for i := range rules {
		r := &rules[i]
		a, b := rowFixtures()
		before, sum := a.indexTerms(), a.summary()
		r.set(&a.Deployment, &b.Deployment)
		after := a.indexTerms()
		var changed []string
		for _, k := range append(slices.Clone(before), after...) {
			if slices.Contains(before, k) != slices.Contains(after, k) {
				changed = append(changed, k[:1]) // the field byte
			}
		}
		slices.Sort(changed)
		changed = slices.Compact(changed)
		want := slices.Sorted(slices.Values(r.index))
		if !slices.Equal(changed, want) {
			t.Errorf("%s: changes the index keys of %v, the row says %v", rowName(r), changed, want)
		}
		if got := a.summary() != sum; got != r.summary {
			t.Errorf("%s: changes the summary: %v, the row says %v", rowName(r), got, r.summary)
		}
	}
}

// TestRulesDefaults: a row has a create default only for a source where
// the field is optional on create, and the default is a value.
func TestRulesDefaults(t *testing.T) {
	for i := range rules {
		r := &rules[i]
		for si, def := range r.def {
			if def == nil {
				continue
			}
			if r.create[si] != CreateOptional {
				t.Errorf("%s: a default for %s, where it is not optional", rowName(r), allSources[si])
			}
			var d Deployment
			def(&d)
			if r.get(&d) == nil {
				t.Errorf("%s: the default for %s is null", rowName(r), allSources[si])
			}
		}
	}
}

// TestRulesStorage: the storage form keeps every row's value, a
// deployment record each row's, a revision record each snapshot row's; a
// row's own member (stored) is a top-level field's, under a key no other
// member has.
func TestRulesStorage(t *testing.T) {
	for i := range rules {
		r := &rules[i]
		a, b := rowFixtures()
		r.set(&a.Deployment, &b.Deployment)
		enc, err := (secretCodec{}).encodeDeployment("t", a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := (secretCodec{}).decodeDeployment(enc, "t", a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v, want := r.get(&got.Deployment), r.get(&b.Deployment); !reflect.DeepEqual(v, want) {
			t.Errorf("%s: a stored deployment record keeps %#v, want %#v (record %s)", rowName(r), v, want, enc)
		}
		if r.snap == snapNone {
			continue
		}
		rev := newRevision(a, "0190a2b4-0000-7000-8000-0000000000c1", a.CreatedAt)
		if enc, err = (secretCodec{}).encodeRevision("t", rev); err != nil {
			t.Fatal(err)
		}
		gotRev, err := (secretCodec{}).decodeRevision(enc, "t", a.ID, rev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v, want := r.get(gotRev.snapshot()), r.get(&b.Deployment); !reflect.DeepEqual(v, want) {
			t.Errorf("%s: a stored revision record keeps %#v, want %#v (record %s)", rowName(r), v, want, enc)
		}
	}
	keys := map[string]string{}
	st := reflect.TypeFor[storedDeployment]()
	for i := range st.NumField() {
		if k, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ","); k != "-" {
			keys[k] = "storedDeployment." + st.Field(i).Name
		}
	}
	for i := range rules {
		r := &rules[i]
		if r.stored == "" {
			continue
		}
		if len(r.loc) != 1 {
			t.Errorf("%s: a stored key, but not a top-level field", rowName(r))
		}
		if other, ok := keys[r.stored]; ok {
			t.Errorf("%s: stored key %q is %s's too", rowName(r), r.stored, other)
		}
		keys[r.stored] = rowName(r)
	}
}

// TestRowMembersBetweenNameAndSource: a record's row members sit between
// the name and the source, whatever the name holds; a member there that is
// no row's (a newer build's) is skipped, and the rows around it are read.
func TestRowMembersBetweenNameAndSource(t *testing.T) {
	for _, name := range []string{"a", `quote " and \ backslash`, `ends with \`, "<&>", ""} {
		d := deploymentRecord{Deployment: Deployment{ID: "d", Name: name, DisplayName: new(`"dn" ,"s":`), Source: SourceGitHub, Secrets: []Secret{}}}
		b, err := (secretCodec{}).encodeDeployment("t", &d)
		if err != nil {
			t.Fatal(err)
		}
		if want := `,"dn":"\"dn\" ,\"s\":","s":"g"`; !strings.Contains(string(b), want) {
			t.Errorf("name %q: record %s, want it to hold %s", name, b, want)
		}
		got, err := (secretCodec{}).decodeDeployment(b, "t", "d")
		if err != nil {
			t.Fatal(err)
		}
		got.TenantID = ""
		if diff := cmp.Diff(&d, got); diff != "" {
			t.Errorf("name %q: round trip (-want +got):\n%s", name, diff)
		}
	}
	b := []byte(`{"v":1,"n":"a","zz":{"s":1},"dn":"D","s":"github","c":0,"u":0,"st":""}`)
	got, err := (secretCodec{}).decodeDeployment(b, "t", "d")
	if err != nil {
		t.Fatal(err)
	}
	if got.DisplayName == nil || *got.DisplayName != "D" || got.Source != SourceGitHub {
		t.Errorf("a record with another build's member: display_name %v, source %q; want D, github", got.DisplayName, got.Source)
	}
}
