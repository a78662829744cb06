package httphandler_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/uploads"
)

// langgraphDeployOptions adds to opts what langgraph deploy's routes need
// (wire contract section 10): the upload service over an in-memory
// bucket and an external registry's realm, both real.
func langgraphDeployOptions(t *testing.T, cp *controlplane.ControlPlane, opts *httphandler.Options) *httphandler.Options {
	t.Helper()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	// The signature does not cover the host: the tests PUT the URL's path
	// and query to their own server.
	upl, err := uploads.New(cp, &uploads.Options{Bucket: bucket, Key: []byte(strings.Repeat("k", 32)), PublicURL: "http://uploads.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := registry.NewTokenServer(registry.NewTokenStore(cp, nil), &registry.TokenOptions{Key: registry.SigningKey([]byte("s")), Service: "ext-registry"})
	if err != nil {
		t.Fatal(err)
	}
	opts.Uploads, opts.RegistryRealm = upl, ts
	return opts
}

// checkLanggraphDeployRoutes exercises, against the document, the upload
// routes (with internal_source deployment src) and the realm (with a push
// token of internal_docker deployment img), their successes and their
// documented errors.
func checkLanggraphDeployRoutes(t *testing.T, s *server, c *docChecker, src, img, other string) {
	t.Helper()
	at := func(method, pattern, path, body string, want int, headers ...string) reply {
		t.Helper()
		r := s.do(method, path, body, headers...)
		if r.status != want {
			t.Errorf("%s %s: %d, want %d: %s", method, path, r.status, want, r.body)
		}
		c.check(method, pattern, r)
		return r
	}
	key := []string{"X-Api-Key", keyA}
	// Uploads.
	up := at("POST", "/v2/deployments/{deployment_id}/upload-url", "/v2/deployments/"+src+"/upload-url", "", 200, key...)
	var u struct{ UploadURL, ObjectPath string }
	if err := json.Unmarshal(up.body, &struct {
		U *string `json:"upload_url"`
		P *string `json:"object_path"`
	}{&u.UploadURL, &u.ObjectPath}); err != nil || u.ObjectPath == "" {
		t.Fatalf("upload-url: %s %v", up.body, err)
	}
	at("POST", "/v2/deployments/{deployment_id}/upload-url", "/v2/deployments/"+img+"/upload-url", "", 400, key...)
	pu, err := url.Parse(u.UploadURL)
	if err != nil {
		t.Fatal(err)
	}
	put := "/v2/uploads/{tenant}/{deployment_id}/{upload_id}"
	bad := pu.Path + "?" + strings.Replace(pu.RawQuery, "signature=", "signature=AA", 1)
	at("PUT", put, bad, "tarball", 403, "Content-Type", "application/gzip")
	at("PUT", put, pu.RequestURI(), "tarball", 200, "Content-Type", "application/gzip")
	at("PUT", put, pu.RequestURI(), "tarball", 409, "Content-Type", "application/gzip")

	// The realm, with a push token of the API.
	pt := s.as(keyA, "POST", "/v2/deployments/"+img+"/push-token", "")
	var tok struct{ Token string }
	if err := json.Unmarshal(pt.body, &tok); err != nil || tok.Token == "" {
		t.Fatalf("push-token: %s", pt.body)
	}
	basic := func(password string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("oauth2accesstoken:"+password))}
	}
	q := "?service=ext-registry&scope=" + url.QueryEscape("repository:deployments/"+img+"/agent:push,pull") +
		"&scope=" + url.QueryEscape("repository:deployments/"+other+"/agent:pull")
	r := at("GET", httphandler.RealmPath, httphandler.RealmPath+q, "", 200, basic(tok.Token)...)
	if !strings.Contains(string(r.body), `"scope":"repository:deployments/`+img+`/agent:push,pull"`) {
		t.Errorf("the realm granted %s", r.body)
	}
	at("GET", httphandler.RealmPath, httphandler.RealmPath+q, "", 401)
	at("GET", httphandler.RealmPath, httphandler.RealmPath+q, "", 401, basic("dpr_unknown")...)
	at("GET", httphandler.RealmPath, httphandler.RealmPath+"?service=docker.io", "", 400, basic(tok.Token)...)
	form := url.Values{"grant_type": {"password"}, "username": {"u"}, "password": {tok.Token}, "service": {"ext-registry"},
		"client_id": {"containerd-client"}, "scope": {"repository:deployments/" + img + "/agent:pull"}}
	formCT := []string{"Content-Type", "application/x-www-form-urlencoded"}
	at("POST", httphandler.RealmPath, httphandler.RealmPath, form.Encode(), 200, formCT...)
	form.Set("password", "dpr_unknown")
	at("POST", httphandler.RealmPath, httphandler.RealmPath, form.Encode(), 400, formCT...)
	at("GET", httphandler.RealmJWKSPath, httphandler.RealmJWKSPath, "", 200)
	// The realm answers with an API key alone as it does without one.
	at("GET", httphandler.RealmPath, httphandler.RealmPath+q, "", 401, key...)
}

// TestRealmPathsAreRegistrys: the paths httphandler serves the realm at are
// package registry's.
func TestRealmPathsAreRegistrys(t *testing.T) {
	if httphandler.RealmPath != registry.TokenPath || httphandler.RealmJWKSPath != registry.JWKSPath {
		t.Errorf("httphandler serves %s and %s, package registry names %s and %s",
			httphandler.RealmPath, httphandler.RealmJWKSPath, registry.TokenPath, registry.JWKSPath)
	}
}
