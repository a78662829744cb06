package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/oauthflow"
)

func TestSecretIsRedacted(t *testing.T) {
	const s = "hunter2"
	sec := oauthflow.Secret(s)
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s"} {
		fmt.Fprintf(&out, verb+"\n", sec)
		fmt.Fprintf(&out, verb+"\n", struct{ S oauthflow.Secret }{sec})
		fmt.Fprintf(&out, verb+"\n", &sec)
	}
	fmt.Fprintln(&out, sec, []oauthflow.Secret{sec}, map[string]oauthflow.Secret{"k": sec})
	text := slog.New(slog.NewTextHandler(&out, nil))
	js := slog.New(slog.NewJSONHandler(&out, nil))
	for _, l := range []*slog.Logger{text, js} {
		l.Info("m", "secret", sec, "ptr", &sec,
			"result", oauthflow.AuthResult{Status: "completed", Token: sec},
			"wait", oauthflow.WaitResult{Status: "completed", Token: sec},
			"new", oauthflow.NewProvider{ProviderID: "p", ClientSecret: sec},
			"patch", oauthflow.ProviderPatch{ClientSecret: &sec},
			"callback", oauthflow.CallbackRequest{Code: s, State: s},
		)
	}
	if strings.Contains(out.String(), s) || strings.Contains(out.String(), fmt.Sprintf("%x", s)) {
		t.Errorf("secret printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "[REDACTED]") {
		t.Errorf("no redaction marker in:\n%s", out.String())
	}
	// JSON keeps the value: the token in an answer is for the client.
	b, err := json.Marshal(oauthflow.AuthResult{Status: "completed", Token: sec})
	if err != nil || string(b) != `{"status":"completed","token":"hunter2"}` {
		t.Errorf("json.Marshal(AuthResult) = %s, %v", b, err)
	}
	if string(sec) != s {
		t.Errorf("string(Secret) = %q", string(sec))
	}
}

// Secrets appear in no log line, no stored record and no returned
// provider, across successful and failed flows, refreshes and patches.
func TestSecretsStayOutOfLogsStoreAndAnswers(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// Log every call's inputs and outputs as a careless caller would.
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var answers []any
	p := e.addProvider(t, tenantA, "fake", true)
	answers = append(answers, p)

	// Successful flow, then refresh.
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
	cb := visit(t, res.URL)
	logger.Info("callback", "req", cb, "result", res)
	if err := e.svc.Callback(ctx, cb); err != nil {
		t.Fatal(err)
	}
	w, err := e.svc.Wait(ctx, tenantA, res.AuthID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("waited", "result", w)
	e.clock.Advance(2 * time.Hour)
	refreshed, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
	if err != nil || refreshed.Status != oauthflow.StatusCompleted {
		t.Fatalf("refresh: %+v, %v", refreshed, err)
	}
	logger.Info("refreshed", "result", refreshed)

	// Failed exchange and denied flow.
	res, err = e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "bob", Provider: "fake", Scopes: noScopes})
	if err != nil {
		t.Fatal(err)
	}
	bad := visit(t, res.URL)
	e.prov.ForgetCodes()
	err = e.svc.Callback(ctx, bad)
	logger.Error("callback failed", "err", err, "req", bad)

	// Patch the secret.
	newSecret := oauthflow.Secret("patched-" + e.prov.ClientSecret())
	patch := oauthflow.ProviderPatch{ClientSecret: &newSecret, Name: ptr("renamed")}
	logger.Info("patch", "patch", patch)
	p, err = e.svc.UpdateProvider(ctx, tenantA, "fake", patch)
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, p)
	list, err := e.svc.ListProviders(ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, list)

	secrets := append(e.prov.Secrets(), string(newSecret), cb.State, bad.State)
	// The verifier is among the provider's secrets: it recorded every
	// verifier it checked.
	if verified := e.prov.Counts().PKCEVerified; verified == 0 {
		t.Fatal("no PKCE verifier was checked")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "oauth flow completed") {
		t.Fatalf("the log did not capture the service's messages:\n%s", logs)
	}
	records := dump(t, e.st)
	answerJSON := mustJSON(t, answers)
	for _, s := range secrets {
		for _, form := range []string{s, url.QueryEscape(s)} {
			if strings.Contains(logs, form) {
				t.Errorf("secret %q in the log", s)
			}
			if strings.Contains(answerJSON, form) {
				t.Errorf("secret %q in a returned provider", s)
			}
			for k, v := range records {
				if strings.Contains(k, form) || strings.Contains(v, form) {
					t.Errorf("secret %q stored in plain text in %q", s, k)
				}
			}
		}
	}
}
