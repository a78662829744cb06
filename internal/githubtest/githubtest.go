package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v4"
)

// GitHub is a fake GitHub serving one App. Make one with New.
type GitHub struct {
	srv          *httptest.Server
	appID        int64
	slug         string
	key          *rsa.PrivateKey
	clientID     string
	clientSecret string

	mu        sync.Mutex
	setupURL  string
	installID int64  // the next installation page visit installs this (0: a new one)
	account   string // ... on this account
	nextID    int64
	accounts  map[int64]string   // installation -> account
	codes     map[string][]int64 // live codes -> installations the user can access
	users     map[string][]int64 // user tokens -> installations
	down      bool
	secrets   []string
	counts    Counts
	tokens    map[string]int64 // installation tokens -> installation
	deploys   []Deployment
	statuses  []DeploymentStatus
}

// Deployment is a GitHub Deployment made through the API: POST
// /repos/{owner}/{repo}/deployments.
type Deployment struct {
	ID             int64
	InstallationID int64  // whose token made it
	Repo           string // owner/name
	Ref            string
	Environment    string
	Description    string
	// Transient, AutoMerge and RequiredContexts are transient_environment,
	// auto_merge (nil when absent, which GitHub reads as true) and
	// required_contexts (nil when absent: every context).
	Transient        bool
	AutoMerge        *bool
	RequiredContexts []string
}

// DeploymentStatus is a status of a Deployment: POST
// /repos/{owner}/{repo}/deployments/{id}/statuses.
type DeploymentStatus struct {
	DeploymentID   int64
	Repo           string
	State          string
	EnvironmentURL string
	LogURL         string
	Description    string
}

// Counts is how many requests of each kind a GitHub answered.
type Counts struct {
	Exchanges          int // code exchanges with valid client credentials
	InstallationLists  int // GET /user/installations with a valid token
	InstallationTokens int // installation tokens issued
}

// New starts a GitHub with a fresh App (id, slug, 2048-bit RSA key, OAuth
// client) and closes it when t ends.
func New(t testing.TB) *GitHub {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &GitHub{
		appID: 4711, slug: "deployplane-test", key: key,
		clientID: "Iv1." + strings.ToLower(rand.Text()[:16]), clientSecret: "secret-" + rand.Text(),
		account: "acme", nextID: 1000,
		accounts: map[int64]string{}, codes: map[string][]int64{}, users: map[string][]int64{}, tokens: map[string]int64{},
	}
	g.secrets = append(g.secrets, g.clientSecret)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apps/{slug}/installations/new", g.installPage)
	mux.HandleFunc("POST /login/oauth/access_token", g.accessToken)
	mux.HandleFunc("GET /api/v3/user/installations", g.userInstallations)
	mux.HandleFunc("POST /api/v3/app/installations/{id}/access_tokens", g.installationToken)
	mux.HandleFunc("POST /api/v3/repos/{owner}/{repo}/deployments", g.createDeployment)
	mux.HandleFunc("POST /api/v3/repos/{owner}/{repo}/deployments/{id}/statuses", g.createDeploymentStatus)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		down := g.down
		g.mu.Unlock()
		if down {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the web site's base URL (githubapp.Options.WebURL).
func (g *GitHub) URL() string { return g.srv.URL }

// APIURL is the REST API's base URL (githubapp.Options.APIURL).
func (g *GitHub) APIURL() string { return g.srv.URL + "/api/v3/" }

// Client returns an HTTP client for the server.
func (g *GitHub) Client() *http.Client { return g.srv.Client() }

// Close shuts the server down before the test ends: GitHub is unreachable
// from then on.
func (g *GitHub) Close() { g.srv.Close() }

// AppID is the App's id.
func (g *GitHub) AppID() int64 { return g.appID }

// Slug is the App's slug.
func (g *GitHub) Slug() string { return g.slug }

// PrivateKeyPEM is the App's private key, PKCS #1 PEM.
func (g *GitHub) PrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(g.key)})
}

// ClientID is the App's OAuth client id.
func (g *GitHub) ClientID() string { return g.clientID }

// ClientSecret is the App's OAuth client secret.
func (g *GitHub) ClientSecret() string { return g.clientSecret }

// SetSetupURL sets where the installation page redirects (the App's
// setup/callback URL).
func (g *GitHub) SetSetupURL(u string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.setupURL = u
}

// WillInstall sets what the installation page installs from now on: the
// installation id (0: a new one on each visit) on account.
func (g *GitHub) WillInstall(installationID int64, account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.installID, g.account = installationID, account
}

// AddInstallation records an installation of the App on account, as if
// someone had installed it outside the test's flow.
func (g *GitHub) AddInstallation(installationID int64, account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accounts[installationID] = account
}

// Code returns a fresh code of a user who can access installationIDs
// (which need not exist: the user's list then holds them without an
// account).
func (g *GitHub) Code(installationIDs ...int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newCode(slices.Clone(installationIDs))
}

func (g *GitHub) newCode(ids []int64) string {
	code := "code-" + rand.Text()
	g.codes[code] = ids
	g.secrets = append(g.secrets, code)
	return code
}

// Down makes the server answer 503 to every request (true) or serve again.
func (g *GitHub) Down(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// Counts returns how many requests of each kind the server has answered.
func (g *GitHub) Counts() Counts {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts
}

// Secrets returns every secret the server handed out or received: the
// client secret, codes, user tokens and installation tokens.
func (g *GitHub) Secrets() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.secrets)
}

func (g *GitHub) installPage(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if r.PathValue("slug") != g.slug || state == "" {
		http.NotFound(w, r)
		return
	}
	g.mu.Lock()
	id := g.installID
	if id == 0 {
		g.nextID++
		id = g.nextID
	}
	g.accounts[id] = g.account
	code := g.newCode([]int64{id})
	back, err := url.Parse(g.setupURL)
	g.mu.Unlock()
	if err != nil || back.Host == "" {
		http.Error(w, "no setup URL", http.StatusInternalServerError)
		return
	}
	v := back.Query()
	v.Set("installation_id", strconv.FormatInt(id, 10))
	v.Set("setup_action", "install")
	v.Set("code", code)
	v.Set("state", state)
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (g *GitHub) accessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	// GitHub answers 200 with an error field.
	if id != g.clientID || secret != g.clientSecret {
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "incorrect_client_credentials"})
		return
	}
	g.counts.Exchanges++
	code := r.PostForm.Get("code")
	ids, ok := g.codes[code]
	delete(g.codes, code)
	if !ok {
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad_verification_code",
			"error_description": "The code passed is incorrect or expired."})
		return
	}
	tok := "ghu_" + rand.Text()
	g.users[tok] = ids
	g.secrets = append(g.secrets, tok)
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "scope": ""})
}

func (g *GitHub) userInstallations(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	ids, ok := g.users[tok]
	if ok {
		g.counts.InstallationLists++
	}
	type account struct {
		Login string `json:"login"`
	}
	type installation struct {
		ID      int64    `json:"id"`
		AppID   int64    `json:"app_id"`
		Account *account `json:"account,omitempty"`
	}
	all := make([]installation, len(ids))
	for i, id := range ids {
		all[i] = installation{ID: id, AppID: g.appID}
		if a, ok := g.accounts[id]; ok {
			all[i].Account = &account{Login: a}
		}
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Bad credentials"})
		return
	}
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 || per > 100 {
		per = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
	if hi < len(all) {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(page+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, g.srv.URL, next.RequestURI()))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(all), "installations": all[lo:hi]})
}

func (g *GitHub) installationToken(w http.ResponseWriter, r *http.Request) {
	raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(tk *jwt.Token) (any, error) {
		if _, ok := tk.Method.(*jwt.SigningMethodRSA); !ok || tk.Method.Alg() != "RS256" {
			return nil, fmt.Errorf("alg %v", tk.Header["alg"])
		}
		return &g.key.PublicKey, nil
	})
	if err != nil || claims.Issuer != strconv.FormatInt(g.appID, 10) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "A JSON web token could not be decoded"})
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	_, known := g.accounts[id]
	var tok string
	if known {
		tok = "ghs_" + rand.Text()
		g.secrets = append(g.secrets, tok)
		g.tokens[tok] = id
		g.counts.InstallationTokens++
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !known {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Not Found"})
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": "2099-01-01T00:00:00Z"})
}

// Deployments returns the Deployments made so far, oldest first.
func (g *GitHub) Deployments() []Deployment {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.deploys)
}

// DeploymentStatuses returns the Deployment statuses added so far, oldest
// first.
func (g *GitHub) DeploymentStatuses() []DeploymentStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.statuses)
}

// installationOf is the installation whose token authorizes r, or 0
// (after answering 401).
func (g *GitHub) installationOf(w http.ResponseWriter, r *http.Request) int64 {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, _ = strings.CutPrefix(auth, "Bearer ")
	}
	g.mu.Lock()
	id := g.tokens[tok]
	g.mu.Unlock()
	if id == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Bad credentials"})
	}
	return id
}

func (g *GitHub) createDeployment(w http.ResponseWriter, r *http.Request) {
	inst := g.installationOf(w, r)
	if inst == 0 {
		return
	}
	var req struct {
		Ref                  string    `json:"ref"`
		Environment          string    `json:"environment"`
		Description          string    `json:"description"`
		TransientEnvironment bool      `json:"transient_environment"`
		AutoMerge            *bool     `json:"auto_merge"`
		RequiredContexts     *[]string `json:"required_contexts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Ref == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Validation Failed"})
		return
	}
	g.mu.Lock()
	d := Deployment{ID: int64(len(g.deploys) + 1), InstallationID: inst, Repo: r.PathValue("owner") + "/" + r.PathValue("repo"),
		Ref: req.Ref, Environment: req.Environment, Description: req.Description, Transient: req.TransientEnvironment, AutoMerge: req.AutoMerge}
	if req.RequiredContexts != nil {
		d.RequiredContexts = append([]string{}, *req.RequiredContexts...)
	}
	g.deploys = append(g.deploys, d)
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": d.ID, "ref": d.Ref, "sha": d.Ref, "environment": d.Environment})
}

func (g *GitHub) createDeploymentStatus(w http.ResponseWriter, r *http.Request) {
	if g.installationOf(w, r) == 0 {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	var req struct {
		State          string `json:"state"`
		EnvironmentURL string `json:"environment_url"`
		LogURL         string `json:"log_url"`
		Description    string `json:"description"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	g.mu.Lock()
	known := id > 0 && id <= int64(len(g.deploys)) && g.deploys[id-1].Repo == repo
	states := []string{"error", "failure", "inactive", "in_progress", "queued", "pending", "success"}
	ok := err == nil && known && slices.Contains(states, req.State)
	if ok {
		g.statuses = append(g.statuses, DeploymentStatus{DeploymentID: id, Repo: repo, State: req.State,
			EnvironmentURL: req.EnvironmentURL, LogURL: req.LogURL, Description: req.Description})
	}
	n := len(g.statuses)
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !known:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Not Found"})
	case !ok:
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Validation Failed"})
	default:
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": n, "state": req.State, "environment_url": req.EnvironmentURL})
	}
}
