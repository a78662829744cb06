package httphandler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/webhooks"
)

// TestWebhookRoutes: the wire details of /v2/webhooks: what a create
// refuses and where, that the secret is answered by the create alone
// (and only when generated), that another tenant's webhook is not found,
// and the list and delivery pages.
func TestWebhookRoutes(t *testing.T) {
	s := newServer(t, nil)
	long := strings.Repeat("a", webhooks.MaxDescriptionLen+1)
	for _, tc := range []struct {
		name, body string
		loc        string // of the only problem
		typ        string
	}{
		{"no url", `{"events": ["*"]}`, "body.url", apierr.TypeMissing},
		{"no events", `{"url": "https://hooks.example.com"}`, "body.events", apierr.TypeMissing},
		{"no event", `{"url": "https://hooks.example.com", "events": []}`, "body.events", apierr.TypeTooShort},
		{"unknown event", `{"url": "https://hooks.example.com", "events": ["deployment.created", "deployment.exploded"]}`, "body.events.1", apierr.TypeLiteralError},
		{"event twice", `{"url": "https://hooks.example.com", "events": ["*", "*"]}`, "body.events.1", apierr.TypeDuplicate},
		{"events not a list", `{"url": "https://hooks.example.com", "events": "*"}`, "body.events", apierr.TypeListType},
		{"relative url", `{"url": "/hook", "events": ["*"]}`, "body.url", apierr.TypeURLParsing},
		{"url with credentials", `{"url": "https://u:p@hooks.example.com", "events": ["*"]}`, "body.url", apierr.TypeURLParsing},
		{"ftp", `{"url": "ftp://hooks.example.com", "events": ["*"]}`, "body.url", apierr.TypeURLScheme},
		{"http", `{"url": "http://hooks.example.com", "events": ["*"]}`, "body.url", apierr.TypeURLScheme},
		{"loopback", `{"url": "https://127.0.0.1:9000/hook", "events": ["*"]}`, "body.url", apierr.TypeURLHost},
		{"metadata service", `{"url": "https://169.254.169.254/", "events": ["*"]}`, "body.url", apierr.TypeURLHost},
		{"private", `{"url": "https://192.168.1.10/", "events": ["*"]}`, "body.url", apierr.TypeURLHost},
		{"localhost", `{"url": "https://localhost/", "events": ["*"]}`, "body.url", apierr.TypeURLHost},
		{"secret without prefix", `{"url": "https://hooks.example.com", "events": ["*"], "secret": "hunter2"}`, "body.secret", apierr.TypeStringPatternMismatch},
		{"short secret", `{"url": "https://hooks.example.com", "events": ["*"], "secret": "whsec_AAAA"}`, "body.secret", apierr.TypeStringPatternMismatch},
		{"long description", `{"url": "https://hooks.example.com", "events": ["*"], "description": "` + long + `"}`, "body.description", apierr.TypeStringTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := problems(t, s.as(keyA, "POST", "/v2/webhooks", tc.body))
			if len(ps) != 1 || locString(ps[0].Loc) != tc.loc || ps[0].Type != tc.typ {
				t.Fatalf("problems %+v, want one %s at %s", ps, tc.typ, tc.loc)
			}
		})
	}

	// A generated secret is answered once, by the create.
	created := s.as(keyA, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/a", "events": ["revision.failed", "deployment.created"]}`)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	var wh struct {
		ID, URL, Secret string
		Events          []string
		Enabled         bool
		CreatedAt       string `json:"created_at"`
		UpdatedAt       string `json:"updated_at"`
	}
	if err := json.Unmarshal(created.body, &wh); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wh.Secret, "whsec_") || !wh.Enabled || len(wh.Events) != 2 || wh.CreatedAt == "" || wh.UpdatedAt == "" {
		t.Fatalf("create answered %s", created.body)
	}
	hook := "/v2/webhooks/" + wh.ID
	given := s.as(keyA, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/b", "events": ["*"], "secret": "whsec_`+
		strings.Repeat("QUJD", 8)+`"}`)
	if given.status != http.StatusCreated || strings.Contains(string(given.body), "secret") {
		t.Fatalf("a create with a secret answered it: %d %s", given.status, given.body)
	}
	for _, r := range []reply{
		s.as(keyA, "GET", hook, ""),
		s.as(keyA, "GET", "/v2/webhooks", ""),
		s.as(keyA, "PATCH", hook, `{"secret": "whsec_`+strings.Repeat("QUJD", 8)+`", "description": "rotated"}`),
		s.as(keyA, "GET", hook+"/deliveries", ""),
	} {
		if r.status != http.StatusOK || strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), wh.Secret) {
			t.Fatalf("answered the secret: %d %s", r.status, r.body)
		}
	}

	// Another tenant's webhook is not found, whatever the method.
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		body := ""
		if m == "PATCH" {
			body = `{"enabled": false}`
		}
		r := s.as(keyB, m, hook, body)
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "Webhook ID "+wh.ID+" not found.") {
			t.Errorf("%s of another tenant's webhook: %d %s", m, r.status, r.body)
		}
	}
	if r := s.as(keyB, "GET", hook+"/deliveries", ""); r.status != http.StatusNotFound {
		t.Errorf("deliveries of another tenant's webhook: %d %s", r.status, r.body)
	}
	if r := s.as(keyB, "GET", "/v2/webhooks", ""); r.status != 200 || !strings.Contains(string(r.body), `"resources":[]`) {
		t.Errorf("another tenant's list: %s", r.body)
	}

	// PATCH: validation, a change, enabled.
	if ps := problems(t, s.as(keyA, "PATCH", hook, `{"events": ["nope"], "url": "http://hooks.example.com"}`)); len(ps) != 2 {
		t.Errorf("patch problems %+v", ps)
	}
	if ps := problems(t, s.as(keyA, "PATCH", "/v2/webhooks/not-a-uuid", `{}`)); len(ps) != 1 || locString(ps[0].Loc) != "path.webhook_id" {
		t.Errorf("a bad id: %+v", ps)
	}
	p := must[webhooks.Webhook](t, s, keyA, "PATCH", hook, `{"enabled": false, "events": ["*"]}`, 200)
	if p.Enabled || len(p.Events) != 1 || p.URL != "https://hooks.example.com/a" || *p.Description != "rotated" {
		t.Errorf("patched %+v", p)
	}

	// The list, newest first and paged.
	list := must[webhooks.WebhookPage](t, s, keyA, "GET", "/v2/webhooks?limit=1", "", 200)
	if len(list.Resources) != 1 || list.Offset != 1 || list.Resources[0].URL != "https://hooks.example.com/b" {
		t.Errorf("first page %+v", list)
	}
	if ps := problems(t, s.as(keyA, "GET", "/v2/webhooks?limit=x&offset=-1", "")); len(ps) != 2 {
		t.Errorf("list problems %+v", ps)
	}
	if ps := problems(t, s.as(keyA, "GET", hook+"/deliveries?limit=101", "")); len(ps) != 1 || locString(ps[0].Loc) != "query.limit" {
		t.Errorf("deliveries problems %+v", ps)
	}

	// DELETE, then not found.
	if r := s.as(keyA, "DELETE", hook, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := s.as(keyA, "GET", hook, ""); r.status != http.StatusNotFound {
		t.Fatalf("after delete: %d %s", r.status, r.body)
	}

	// At most MaxWebhooks per tenant.
	for i := 1; i < webhooks.MaxWebhooks; i++ {
		if r := s.as(keyB, "POST", "/v2/webhooks", fmt.Sprintf(`{"url": "https://hooks.example.com/%d", "events": ["*"]}`, i)); r.status != 201 {
			t.Fatalf("webhook %d: %d %s", i, r.status, r.body)
		}
	}
	s.as(keyB, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/last", "events": ["*"]}`)
	if r := s.as(keyB, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/over", "events": ["*"]}`); r.status != http.StatusConflict {
		t.Fatalf("beyond the cap: %d %s", r.status, r.body)
	}
}

// TestWebhookRoutesDisabled: without Options.Webhooks, /v2/webhooks
// answers 404 saying so, and the document does not list it.
func TestWebhookRoutesDisabled(t *testing.T) {
	s := newServerWith(t, serverSetup{noWebhooks: true})
	r := s.as(keyA, "GET", "/v2/webhooks", "")
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "not enabled") {
		t.Fatalf("GET /v2/webhooks: %d %s", r.status, r.body)
	}
	if doc := s.do("GET", "/openapi.json", "").body; strings.Contains(string(doc), "/v2/webhooks") {
		t.Fatal("the document lists /v2/webhooks")
	}
}

func locString(loc []any) string {
	parts := make([]string, len(loc))
	for i, l := range loc {
		parts[i] = fmt.Sprint(l)
	}
	return strings.Join(parts, ".")
}
