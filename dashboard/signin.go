package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// signinData is the sign-in page's.
type signinData struct {
	Token string // the form's CSRF token, also in the dp_signin cookie
	Next  string
}

// signinPage serves GET /ui/signin: the form, with a fresh token in a
// cookie and in the form (double submit: a page of another site can post
// the form but cannot read the cookie).
func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if sess, err := h.current(r); err == nil && sess.Tenant != "" {
		http.Redirect(w, r, h.safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	h.renderSignin(w, r, http.StatusOK, nil)
}

func (h *Handler) renderSignin(w http.ResponseWriter, r *http.Request, status int, f *form) {
	token := randomToken()
	h.setCookie(w, r, signinCookie, token, h.sess.now().Add(time.Hour))
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostForm.Get("next")
	}
	h.render(w, status, "signin", &view{Title: "Sign in", Form: f, Data: signinData{Token: token, Next: h.safeNext(next)}})
}

// signin serves POST /ui/signin: checks the form's token, the key (with
// the same Authenticator as the API) and the tenant, and opens a session.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !tokenEqual(c.Value, r.PostForm.Get("csrf")) || !sameOrigin(r) {
		h.renderError(w, r, nil, http.StatusForbidden, "This sign-in form did not come from this dashboard (its CSRF token is missing or wrong). Open the sign-in page and try again.")
		return
	}
	f := &form{Values: r.PostForm, Action: "signin"}
	key := strings.TrimSpace(r.PostForm.Get("api_key"))
	f.Values.Del("api_key") // never echoed back
	if key == "" {
		f.add("api_key", "Enter an API key.")
		h.renderSignin(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	principal, tenants, err := h.auth.SignIn(r.Context(), key)
	if errors.Is(err, ErrInvalidKey) {
		f.add("api_key", "This API key is not valid.")
		h.renderSignin(w, r, http.StatusUnauthorized, f)
		return
	}
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if len(tenants) == 0 {
		f.add("api_key", "This API key may not use any workspace.")
		h.renderSignin(w, r, http.StatusForbidden, f)
		return
	}
	want := strings.ToLower(strings.TrimSpace(r.PostForm.Get("tenant")))
	if want != "" && !slices.Contains(tenants, want) {
		f.add("tenant", "This API key may not use that workspace.")
		h.renderSignin(w, r, http.StatusForbidden, f)
		return
	}
	var digest string
	if _, ok := h.auth.(KeyChecker); ok {
		d := sha256.Sum256([]byte(key))
		digest = hex.EncodeToString(d[:])
	}
	sess, cookie, err := h.sess.create(r.Context(), principal, tenants, digest)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if want != "" && sess.Tenant == "" {
		if err := h.sess.setTenant(r.Context(), sess, want); err != nil {
			h.fail(w, r, nil, err)
			return
		}
	}
	h.setCookie(w, r, signinCookie, "", time.Time{})
	h.setCookie(w, r, sessionCookie, cookie, time.Unix(sess.Expires, 0))
	next := h.safeNext(r.PostForm.Get("next"))
	if sess.Tenant == "" {
		next = h.base + "/workspace?next=" + url.QueryEscape(next)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout serves POST /ui/signout: the session ends.
func (h *Handler) signout(q *request) error {
	if err := h.sess.remove(q.r.Context(), q.sess); err != nil {
		return err
	}
	h.setCookie(q.w, q.r, sessionCookie, "", time.Time{})
	http.Redirect(q.w, q.r, h.base+"/signin", http.StatusSeeOther)
	return nil
}

// workspacePage serves GET /ui/workspace: pick one of the key's tenants.
func (h *Handler) workspacePage(q *request) error {
	h.render(q.w, http.StatusOK, "workspace", &view{Title: "Choose a workspace", Sess: q.sess,
		Data: struct{ Next string }{h.safeNext(q.r.URL.Query().Get("next"))}})
	return nil
}

// chooseWorkspace serves POST /ui/workspace.
func (h *Handler) chooseWorkspace(q *request) error {
	t := strings.ToLower(q.r.PostForm.Get("tenant"))
	if !slices.Contains(q.sess.Tenants, t) {
		f := &form{Values: q.r.PostForm, Action: "workspace"}
		f.add("tenant", "Choose one of the workspaces listed.")
		h.render(q.w, http.StatusUnprocessableEntity, "workspace", &view{Title: "Choose a workspace", Sess: q.sess, Form: f,
			Data: struct{ Next string }{h.safeNext(q.r.PostForm.Get("next"))}})
		return nil
	}
	if err := h.sess.setTenant(q.r.Context(), q.sess, t); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, h.safeNext(q.r.PostForm.Get("next")), http.StatusSeeOther)
	return nil
}
