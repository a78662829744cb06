package oauthflow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/store"
)

// Statuses of an AuthResult or a WaitResult.
const (
	// StatusCompleted: Token holds an access token.
	StatusCompleted = "completed"
	// StatusPending: the flow waits for the user; URL and AuthID are set
	// (Authenticate), or the flow is still open (Wait with timeout 0).
	StatusPending = "pending"
	// StatusTimeout: Wait's timeout passed before the flow completed.
	StatusTimeout = "timeout"
	// StatusNotFound: Wait found no such flow for the tenant, or it
	// expired, or it failed.
	StatusNotFound = "not_found"
)

// AuthRequest is the body of an authenticate call.
type AuthRequest struct {
	// UserID identifies the end user the token is for. Required.
	UserID string `json:"user_id"`
	// Provider is a ProviderID of the tenant. Required.
	Provider string `json:"provider"`
	// Scopes to request; a stored token is reused only if it covers them.
	// Required: nil (a missing or null "scopes") is a validation error;
	// an empty list asks for no particular scope. At most 100, each 1 to
	// 256 printable ASCII characters without spaces, '"' or '\' (RFC
	// 6749 section 3.3); duplicates count once.
	Scopes []string `json:"scopes"`
	// AgentID is recorded with the flow; tokens are per user, not agent.
	AgentID string `json:"agent_id"`
	// UseAgentBuilderPublicOAuth asks for a hosted public OAuth app, which
	// this server does not offer: true is a validation error.
	UseAgentBuilderPublicOAuth bool `json:"use_agent_builder_public_oauth"`
}

// AuthResult answers Authenticate: completed with Token, or pending with
// the URL to send the user to and the AuthID to Wait on.
type AuthResult struct {
	// Status is StatusCompleted or StatusPending.
	Status string `json:"status"`
	// URL is the provider's authorization URL to send the user to (pending).
	URL string `json:"url,omitempty"`
	// AuthID names the flow for Wait (pending).
	AuthID string `json:"auth_id,omitempty"`
	// Token is the access token (completed).
	Token Secret `json:"token,omitempty"`
}

// LogValue keeps the token out of logs, whatever the handler.
func (r AuthResult) LogValue() slog.Value {
	return slog.GroupValue(slog.String("status", r.Status), slog.String("auth_id", r.AuthID), slog.Bool("token_set", r.Token != ""))
}

// Limits on an AuthRequest.
const (
	maxAgentIDLen = 1024
	maxUserIDLen  = 1024
	maxScopes     = 100
	maxScopeLen   = 256
)

// validateAuthRequest checks req and returns its scopes without
// duplicates. The work is bounded by the caps, not by the request: a list
// over its cap is one problem and its items are not looked at, so a
// request yields at most maxScopes+4 problems; duplicates are dropped
// through a set.
func validateAuthRequest(req AuthRequest) ([]string, error) {
	var ps problems
	if req.UserID == "" {
		ps.add(apierr.TypeMissing, apierr.MsgFieldRequired, "body", "user_id")
	} else if len(req.UserID) > maxUserIDLen {
		ps.add(apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d characters", maxUserIDLen), "body", "user_id")
	}
	if len(req.AgentID) > maxAgentIDLen {
		ps.add(apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d characters", maxAgentIDLen), "body", "agent_id")
	}
	if req.Provider == "" {
		ps.add(apierr.TypeMissing, apierr.MsgFieldRequired, "body", "provider")
	}
	var scopes []string
	switch {
	case req.Scopes == nil:
		ps.add(apierr.TypeMissing, apierr.MsgFieldRequired, "body", "scopes")
	case len(req.Scopes) > maxScopes:
		ps.add(apierr.TypeTooLong, fmt.Sprintf("List should have at most %d items, not %d", maxScopes, len(req.Scopes)), "body", "scopes")
	default:
		scopes = make([]string, 0, len(req.Scopes))
		seen := make(map[string]bool, len(req.Scopes))
		for i, sc := range req.Scopes {
			if !validScope(sc) {
				ps.add(apierr.TypeStringPatternMismatch, fmt.Sprintf("a scope is 1 to %d printable ASCII characters without spaces, '\"' or '\\'", maxScopeLen), "body", "scopes", i)
				continue
			}
			if !seen[sc] {
				seen[sc] = true
				scopes = append(scopes, sc)
			}
		}
	}
	if req.UseAgentBuilderPublicOAuth {
		ps.add(apierr.TypeValueError, "public OAuth apps are not offered by this server; configure a provider and set this to false", "body", "use_agent_builder_public_oauth")
	}
	return scopes, ps.err()
}

// validScope follows RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
func validScope(sc string) bool {
	if sc == "" || len(sc) > maxScopeLen {
		return false
	}
	for i := 0; i < len(sc); i++ {
		c := sc[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// expirySkew: a token with less than this left is treated as expired, so
// that it does not expire on its way to the client.
const expirySkew = 10 * time.Second

func (t *tokenRecord) expired(now time.Time) bool {
	return !t.Expiry.IsZero() && !now.Add(expirySkew).Before(t.Expiry)
}

// covers reports whether the token was granted every scope of scopes. It
// costs O(len(scopes) + len(t.Scopes)): a provider (which the tenant
// chooses) may have granted many.
func (t *tokenRecord) covers(scopes []string) bool {
	if len(scopes) == 0 {
		return true
	}
	granted := make(map[string]bool, len(t.Scopes))
	for _, sc := range t.Scopes {
		granted[sc] = true
	}
	for _, sc := range scopes {
		if !granted[sc] {
			return false
		}
	}
	return true
}

// Authenticate answers with a stored token of tenant's user for the provider
// when one covers the requested scopes and is unexpired (refreshing it
// through its refresh token when it has expired), or else starts an
// authorization-code flow and answers pending with the provider URL to send
// the user to. Errors: *apierr.ValidationError, apierr.ErrNotFound (unknown provider).
func (s *Service) Authenticate(ctx context.Context, tenant string, req AuthRequest) (AuthResult, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return AuthResult{}, err
	}
	scopes, err := validateAuthRequest(req)
	if err != nil {
		return AuthResult{}, err
	}
	key := tokenKey(tenant, req.Provider, req.UserID)
	var (
		provRaw []byte // decoded only when needed: a stored token needs just its existence
		tok     *tokenRecord
	)
	err = s.st.View(ctx, func(r store.Reader) error {
		var err error
		provRaw, tok, err = readProviderAndToken(r, tenant, req.Provider, key)
		return err
	})
	if err != nil {
		return AuthResult{}, err
	}
	if tok != nil && tok.covers(scopes) {
		res, ok, err := s.useToken(ctx, tenant, provRaw, key, tok, scopes)
		if err != nil || ok {
			return res, err
		}
	}
	prov, err := decodeProvider(provRaw)
	if err != nil {
		return AuthResult{}, err
	}
	return s.startFlow(ctx, tenant, req, prov, scopes)
}

// readProviderAndToken reads the provider's record (or *apierr.NotFoundError)
// and the user's token (nil when there is none).
func readProviderAndToken(r store.Reader, tenant, providerID, key string) ([]byte, *tokenRecord, error) {
	prov, err := r.Get(collProviders, providerKey(tenant, providerID))
	if errors.Is(err, store.ErrNotFound) || providerID == "" {
		return nil, nil, providerNotFound(providerID)
	}
	if err != nil {
		return nil, nil, err
	}
	var tok tokenRecord
	err = getJSON(r, collTokens, key, &tok)
	if errors.Is(err, store.ErrNotFound) {
		return prov, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return prov, &tok, nil
}

func decodeProvider(raw []byte) (providerRecord, error) {
	var rec providerRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("oauthflow: corrupt provider record: %w", err)
	}
	return rec, nil
}

// useToken answers completed with tok if it is unexpired, or with a
// refreshed one. ok=false means a new flow is needed.
func (s *Service) useToken(ctx context.Context, tenant string, provRaw []byte, key string, tok *tokenRecord, scopes []string) (AuthResult, bool, error) {
	secrets, err := s.openToken(key, tok)
	if err != nil {
		return AuthResult{}, false, err
	}
	if !tok.expired(s.clock()) {
		return AuthResult{Status: StatusCompleted, Token: Secret(secrets.AccessToken)}, true, nil
	}
	if secrets.RefreshToken == "" {
		return AuthResult{}, false, nil
	}
	prov, err := decodeProvider(provRaw)
	if err != nil {
		return AuthResult{}, false, err
	}
	cfg, err := s.oauthConfig(tenant, prov, "", nil)
	if err != nil {
		return AuthResult{}, false, err
	}
	fresh, err := cfg.TokenSource(s.providerContext(ctx), &oauth2.Token{RefreshToken: secrets.RefreshToken}).Token()
	if err != nil {
		if ctx.Err() != nil {
			return AuthResult{}, false, ctx.Err()
		}
		s.log.WarnContext(ctx, "oauth token refresh failed; starting a new flow",
			"tenant", tenant, "provider_id", prov.ProviderID, slog.Group("error", safeErrorAttrs(err)...))
		// Another replica may have refreshed it first (refresh tokens are
		// often single-use): take its result if there is one.
		return s.reread(ctx, tenant, prov.ProviderID, key, scopes)
	}
	now := s.clock()
	rec := s.tokenRecord(key, fresh, tok.Scopes, now)
	err = s.st.Update(ctx, func(tx store.Tx) error {
		return putTokenIfProvider(tx, tenant, prov, key, rec)
	})
	if err != nil {
		return AuthResult{}, false, err
	}
	s.log.InfoContext(ctx, "oauth token refreshed", "tenant", tenant, "provider_id", prov.ProviderID)
	return AuthResult{Status: StatusCompleted, Token: Secret(fresh.AccessToken)}, true, nil
}

// reread looks for a usable token stored since the caller's read.
func (s *Service) reread(ctx context.Context, tenant, providerID, key string, scopes []string) (AuthResult, bool, error) {
	var tok *tokenRecord
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		_, tok, err = readProviderAndToken(r, tenant, providerID, key)
		return err
	})
	if err != nil || tok == nil || !tok.covers(scopes) || tok.expired(s.clock()) {
		return AuthResult{}, false, nil
	}
	secrets, err := s.openToken(key, tok)
	if err != nil {
		return AuthResult{}, false, err
	}
	return AuthResult{Status: StatusCompleted, Token: Secret(secrets.AccessToken)}, true, nil
}

// putTokenIfProvider stores a token unless the provider it came from was
// deleted (or deleted and re-created) meanwhile.
func putTokenIfProvider(tx store.Tx, tenant string, prov providerRecord, key string, rec tokenRecord) error {
	var cur providerRecord
	if err := getProvider(tx, tenant, prov.ProviderID, &cur); err != nil {
		return err
	}
	if cur.ID != prov.ID {
		return providerNotFound(prov.ProviderID)
	}
	return putJSON(tx, collTokens, key, rec)
}

// startFlow opens an authorization-code flow and answers pending.
func (s *Service) startFlow(ctx context.Context, tenant string, req AuthRequest, prov providerRecord, scopes []string) (AuthResult, error) {
	now := s.clock()
	authID, state := rand.Text(), rand.Text()
	flow := flowRecord{
		AuthID:      authID,
		Tenant:      tenant,
		ProviderID:  prov.ProviderID,
		UserID:      req.UserID,
		AgentID:     req.AgentID,
		Scopes:      scopes,
		StateKey:    stateKey(state),
		RedirectURI: s.redirectURI(prov.ProviderID),
		Status:      flowPending,
		CreatedAt:   now,
		ExpiresAt:   now.Add(s.flowTTL),
	}
	cfg := endpointConfig(prov, flow.RedirectURI, scopes)
	var opts []oauth2.AuthCodeOption
	if prov.UsesPKCE {
		verifier := oauth2.GenerateVerifier()
		flow.SealedVerifier = s.seal.seal([]byte(verifier), verifierAAD(authID))
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	authURL := cfg.AuthCodeURL(state, opts...)
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var cur providerRecord
		if err := getProvider(tx, tenant, prov.ProviderID, &cur); err != nil {
			return err
		}
		if err := createJSON(tx, collFlows, authID, flow); err != nil {
			return err
		}
		if err := tx.Create(collStates, flow.StateKey, []byte(authID)); err != nil {
			return err
		}
		if err := tx.Put(collFlowExpiry, expiryKey(flow.ExpiresAt, authID), nil); err != nil {
			return err
		}
		_, _, err := sweepExpired(tx, now, sweepPerFlow)
		return err
	})
	if err != nil {
		return AuthResult{}, err
	}
	s.log.InfoContext(ctx, "oauth flow started", "tenant", tenant, "provider_id", prov.ProviderID, "auth_id", authID)
	return AuthResult{Status: StatusPending, URL: authURL, AuthID: authID}, nil
}

func createJSON(tx store.Tx, coll, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Create(coll, key, b)
}

// endpointConfig is the x/oauth2 configuration of a provider without its
// client secret: enough to build an authorization URL.
func endpointConfig(prov providerRecord, redirectURI string, scopes []string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    prov.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: prov.AuthURL, TokenURL: prov.TokenURL},
		RedirectURL: redirectURI,
		Scopes:      scopes,
	}
}

// oauthConfig is endpointConfig with the client secret decrypted, for the
// token endpoint.
func (s *Service) oauthConfig(tenant string, prov providerRecord, redirectURI string, scopes []string) (*oauth2.Config, error) {
	cfg := endpointConfig(prov, redirectURI, scopes)
	if len(prov.SealedSecret) > 0 {
		secret, err := s.seal.open(prov.SealedSecret, secretAAD(tenant, prov.ProviderID))
		if err != nil {
			return nil, err
		}
		cfg.ClientSecret = string(secret)
	}
	return cfg, nil
}

// providerContext makes x/oauth2 use the injected HTTP client.
func (s *Service) providerContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.client)
}

// tokenRecord seals a token from the provider. The expiry is taken
// relative to the injected clock.
func (s *Service) tokenRecord(key string, t *oauth2.Token, requested []string, now time.Time) tokenRecord {
	rec := tokenRecord{TokenType: t.TokenType, Scopes: grantedScopes(requested, t.Extra("scope")), UpdatedAt: now}
	switch {
	case t.ExpiresIn > 0:
		rec.Expiry = now.Add(time.Duration(t.ExpiresIn) * time.Second)
	case !t.Expiry.IsZero():
		rec.Expiry = t.Expiry.UTC()
	}
	plain, _ := json.Marshal(tokenSecrets{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken})
	rec.Sealed = s.seal.seal(plain, tokenAAD(key))
	return rec
}

// grantedScopes is what a token is taken to cover: the scopes requested
// plus those the provider's "scope" response field names, split on spaces
// (RFC 6749 section 3.3) and, for GitHub, commas. Requested scopes count
// even when the response omits them: providers rename scopes (Google
// answers "email" with ".../auth/userinfo.email"), and treating a renamed
// scope as missing would send the user through a new flow on every call.
// A scope the user declined therefore also counts; the API the token is
// for has the last word.
//
// The response comes from a provider the tenant chose, so it may name any
// number of scopes: the de-duplication goes through a set, and so costs
// O(size of the response).
func grantedScopes(requested []string, response any) []string {
	out := slices.Clone(requested)
	seen := make(map[string]bool, len(requested))
	for _, sc := range requested {
		seen[sc] = true
	}
	add := func(sc string) {
		if sc != "" && !seen[sc] {
			seen[sc] = true
			out = append(out, sc)
		}
	}
	if sc, ok := response.(string); ok {
		for _, f := range strings.Fields(sc) {
			add(f)
			for part := range strings.SplitSeq(f, ",") {
				add(part)
			}
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func (s *Service) openToken(key string, rec *tokenRecord) (tokenSecrets, error) {
	var out tokenSecrets
	plain, err := s.seal.open(rec.Sealed, tokenAAD(key))
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(plain, &out); err != nil {
		return out, fmt.Errorf("oauthflow: corrupt token record: %w", err)
	}
	return out, nil
}

// CallbackRequest is what the provider sends the browser back with.
type CallbackRequest struct {
	// ProviderID is the {provider_id} of the callback path.
	ProviderID string
	// Code is the authorization code (query "code").
	Code string
	// State is the flow's state (query "state").
	State string
	// Error and ErrorDescription are RFC 6749's "error" and
	// "error_description" query parameters, set when the user or the
	// provider refused.
	Error            string
	ErrorDescription string
}

// LogValue keeps the authorization code and state out of logs.
func (r CallbackRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider_id", r.ProviderID), slog.String("error", r.Error))
}

// exchangeTimeout bounds the code exchange, which runs detached from the
// browser's request: a browser that goes away must not waste the code.
const exchangeTimeout = 30 * time.Second

// Callback finishes the flow that req.State belongs to: it exchanges the
// code at the provider's token endpoint (with the PKCE verifier), stores
// the token encrypted, and completes the flow, waking its waiters. Each
// state is accepted once. It needs no tenant: the state identifies the
// flow. Errors: ErrUnknownState (nothing changed), *AuthorizationError and
// ErrExchangeFailed (the flow is marked failed), apierr.ErrNotFound (the provider
// was deleted; the flow is marked failed).
func (s *Service) Callback(ctx context.Context, req CallbackRequest) error {
	if req.State == "" {
		return ErrUnknownState
	}
	now := s.clock()
	var (
		flow    flowRecord
		prov    providerRecord
		outcome error // why the flow failed at once, if it did
	)
	err := s.st.Update(ctx, func(tx store.Tx) error {
		flow, prov, outcome = flowRecord{}, providerRecord{}, nil
		sk := stateKey(req.State)
		authID, err := tx.Get(collStates, sk)
		if errors.Is(err, store.ErrNotFound) {
			return ErrUnknownState
		}
		if err != nil {
			return err
		}
		if err := getJSON(tx, collFlows, string(authID), &flow); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrUnknownState
			}
			return err
		}
		if flow.ProviderID != req.ProviderID || flow.Status != flowPending || !now.Before(flow.ExpiresAt) {
			return ErrUnknownState
		}
		if err := tx.Delete(collStates, sk); err != nil {
			return err
		}
		switch err := getProvider(tx, flow.Tenant, flow.ProviderID, &prov); {
		case req.Error != "":
			outcome = &AuthorizationError{Code: req.Error, Description: req.ErrorDescription}
		case req.Code == "":
			outcome = &AuthorizationError{Code: "invalid_request", Description: "the provider sent neither a code nor an error"}
		case errors.Is(err, apierr.ErrNotFound):
			outcome = err
		case err != nil:
			return err
		}
		flow.Status = flowExchanging
		if outcome != nil {
			flow.Status = flowFailed
		}
		return putJSON(tx, collFlows, flow.AuthID, flow)
	})
	if err != nil {
		return err
	}
	if outcome != nil {
		s.notes.notify(flow.AuthID)
		s.log.WarnContext(ctx, "oauth flow failed", "tenant", flow.Tenant, "provider_id", flow.ProviderID, "auth_id", flow.AuthID, "reason", outcome.Error())
		return outcome
	}

	// The state is spent; from here the flow ends completed or failed even
	// if the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
	defer cancel()
	tok, err := s.exchange(ctx, flow, prov, req.Code)
	if err != nil {
		s.log.WarnContext(ctx, "oauth code exchange failed", "tenant", flow.Tenant, "provider_id", flow.ProviderID, "auth_id", flow.AuthID, slog.Group("error", safeErrorAttrs(err)...))
		if ferr := s.finish(ctx, flow, prov, nil); ferr != nil {
			return ferr
		}
		var re *egress.RefusedError
		if errors.As(err, &re) {
			return &refusedExchange{re}
		}
		return fmt.Errorf("%w: %s", ErrExchangeFailed, safeErrorText(err))
	}
	if err := s.finish(ctx, flow, prov, tok); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "oauth flow completed", "tenant", flow.Tenant, "provider_id", flow.ProviderID, "auth_id", flow.AuthID)
	return nil
}

// exchange trades the code for a token at the provider.
func (s *Service) exchange(ctx context.Context, flow flowRecord, prov providerRecord, code string) (*oauth2.Token, error) {
	cfg, err := s.oauthConfig(flow.Tenant, prov, flow.RedirectURI, flow.Scopes)
	if err != nil {
		return nil, err
	}
	var opts []oauth2.AuthCodeOption
	if len(flow.SealedVerifier) > 0 {
		verifier, err := s.seal.open(flow.SealedVerifier, verifierAAD(flow.AuthID))
		if err != nil {
			return nil, err
		}
		opts = append(opts, oauth2.VerifierOption(string(verifier)))
	}
	return cfg.Exchange(s.providerContext(ctx), code, opts...)
}

// finish ends a flow claimed by Callback: completed with tok stored, or
// failed when tok is nil. A completed flow stays readable by Wait for
// another FlowTTL. If the provider was deleted during the exchange the
// token is dropped, the flow fails, and finish returns apierr.ErrNotFound.
func (s *Service) finish(ctx context.Context, flow flowRecord, prov providerRecord, tok *oauth2.Token) error {
	now := s.clock()
	key := tokenKey(flow.Tenant, flow.ProviderID, flow.UserID)
	var rec tokenRecord
	if tok != nil {
		rec = s.tokenRecord(key, tok, flow.Scopes, now)
	}
	var stored bool
	err := s.st.Update(ctx, func(tx store.Tx) error {
		stored = false
		var cur flowRecord
		if err := getJSON(tx, collFlows, flow.AuthID, &cur); err != nil {
			return err
		}
		if cur.Status != flowExchanging {
			return fmt.Errorf("oauthflow: flow %s changed while exchanging (status %s)", flow.AuthID, cur.Status)
		}
		cur.Status = flowFailed
		if tok != nil {
			switch err := putTokenIfProvider(tx, flow.Tenant, prov, key, rec); {
			case errors.Is(err, apierr.ErrNotFound):
				// Deleted during the exchange: the flow fails.
			case err != nil:
				return err
			default:
				stored = true
				cur.Status = flowCompleted
				if err := tx.Delete(collFlowExpiry, expiryKey(cur.ExpiresAt, cur.AuthID)); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				cur.ExpiresAt = now.Add(s.flowTTL)
				if err := tx.Put(collFlowExpiry, expiryKey(cur.ExpiresAt, cur.AuthID), nil); err != nil {
					return err
				}
			}
		}
		return putJSON(tx, collFlows, cur.AuthID, cur)
	})
	if err != nil {
		return err
	}
	s.notes.notify(flow.AuthID)
	if tok != nil && !stored {
		return providerNotFound(prov.ProviderID)
	}
	return nil
}

// safeErrorAttrs describes a provider error without the response body,
// which may echo credentials.
func safeErrorAttrs(err error) []any {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return []any{slog.String("refused", refused.Error())}
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		attrs := []any{slog.String("error_code", re.ErrorCode)}
		if re.Response != nil {
			attrs = append(attrs, slog.Int("http_status", re.Response.StatusCode))
		}
		return attrs
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return []any{slog.String("op", ue.Op), slog.String("cause", ue.Err.Error())}
	}
	return []any{slog.String("cause", err.Error())}
}

// safeErrorText is safeErrorAttrs as one line.
func safeErrorText(err error) string {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return refused.Error()
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		if re.ErrorCode != "" {
			return fmt.Sprintf("the provider answered %d %s", status, re.ErrorCode)
		}
		return fmt.Sprintf("the provider answered %d", status)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the provider could not be reached: " + ue.Err.Error()
	}
	return err.Error()
}
