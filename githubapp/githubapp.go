// Package githubapp is a GitHub App as the control plane needs it: the
// installation page that tenants are sent to, the check that the user
// who comes back from it can access the installation (a
// controlplane.GitHubApp), and installation-scoped credentials for
// calling GitHub on an installation's behalf (cloning private
// repositories).
//
// Users are authorized with golang.org/x/oauth2 (the App's OAuth client
// id and secret: the App must "request user authorization (OAuth) during
// installation"), GitHub's API is called through github.com/google/go-github,
// and the App's JWT and installation tokens come from
// github.com/bradleyfalzon/ghinstallation/v2.
package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
	"golang.org/x/oauth2"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of Options: github.com.
const (
	DefaultAPIURL = "https://api.github.com/"
	DefaultWebURL = "https://github.com"
)

// maxInstallationPages bounds the pages of GET /user/installations read
// to find one installation (100 installations a page).
const maxInstallationPages = 20

// Options configure an App. AppID, Slug, PrivateKeyPEM, ClientID and
// ClientSecret are required.
type Options struct {
	// AppID is the App's numeric id (its settings page, "App ID").
	AppID int64
	// Slug is the App's URL name: https://github.com/apps/<slug>.
	Slug string
	// PrivateKeyPEM is a private key of the App (PKCS #1 or PKCS #8 RSA,
	// PEM), which signs the App's JWTs.
	PrivateKeyPEM []byte
	// ClientID and ClientSecret are the App's OAuth client credentials,
	// which trade the code of the setup redirect for a user token.
	ClientID, ClientSecret string
	// APIURL is GitHub's REST API; default DefaultAPIURL. For GitHub
	// Enterprise Server, https://<host>/api/v3/.
	APIURL string
	// WebURL is GitHub's web site (the installation page and the OAuth
	// token endpoint); default DefaultWebURL. For GitHub Enterprise
	// Server, https://<host>.
	WebURL string
	// HTTPClient makes every request to GitHub; default
	// http.DefaultClient. Set its Timeout: the setup redirect waits for
	// GitHub.
	HTTPClient *http.Client
}

// App is a GitHub App. It implements controlplane.GitHubApp and is safe
// for concurrent use.
type App struct {
	slug   string
	api    string // with a trailing slash
	web    string // without
	client *http.Client
	oauth  oauth2.Config
	apps   *ghinstallation.AppsTransport

	mu    sync.Mutex
	insts map[int64]*ghinstallation.Transport // token caches, by installation
}

var _ controlplane.GitHubApp = (*App)(nil)

// New checks o and returns the App.
func New(o *Options) (*App, error) {
	if o == nil {
		o = &Options{}
	}
	var missing []string
	for _, f := range []struct {
		name string
		ok   bool
	}{{"AppID", o.AppID > 0}, {"Slug", o.Slug != ""}, {"PrivateKeyPEM", len(o.PrivateKeyPEM) > 0},
		{"ClientID", o.ClientID != ""}, {"ClientSecret", o.ClientSecret != ""}} {
		if !f.ok {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("githubapp: missing %s", strings.Join(missing, ", "))
	}
	a := &App{slug: o.Slug, api: o.APIURL, web: o.WebURL, client: o.HTTPClient, insts: map[int64]*ghinstallation.Transport{}}
	if a.api == "" {
		a.api = DefaultAPIURL
	}
	if a.web == "" {
		a.web = DefaultWebURL
	}
	if a.client == nil {
		a.client = http.DefaultClient
	}
	for _, u := range []string{a.api, a.web} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, fmt.Errorf("githubapp: %q is not an http(s) URL", u)
		}
	}
	a.api = strings.TrimRight(a.api, "/") + "/"
	a.web = strings.TrimRight(a.web, "/")
	a.oauth = oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		Endpoint: oauth2.Endpoint{AuthURL: a.web + "/login/oauth/authorize", TokenURL: a.web + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams}}
	base := a.client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	apps, err := ghinstallation.NewAppsTransport(base, o.AppID, o.PrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("githubapp: the private key: %w", err)
	}
	apps.BaseURL = strings.TrimRight(a.api, "/")
	a.apps = apps
	return a, nil
}

// InstallURL returns the App's installation page with state, which GitHub
// hands back to the setup redirect.
func (a *App) InstallURL(state string) string {
	return a.web + "/apps/" + url.PathEscape(a.slug) + "/installations/new?state=" + url.QueryEscape(state)
}

// VerifyInstallation trades code for a user token and looks for
// installationID among the installations of this App that the user can
// access (GET /user/installations). It returns the installation's account
// login, or an error matching controlplane.ErrInstallationForbidden when
// the user cannot access it. Its errors never hold the code or the token.
func (a *App) VerifyInstallation(ctx context.Context, code string, installationID int64) (string, error) {
	tok, err := a.oauth.Exchange(context.WithValue(ctx, oauth2.HTTPClient, a.client), code)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return "", fmt.Errorf("githubapp: GitHub refused the code: %s", re.ErrorCode)
		}
		return "", fmt.Errorf("githubapp: exchanging the code: %w", stripURLError(err))
	}
	gh, err := github.NewClient(github.WithHTTPClient(a.client), github.WithAuthToken(tok.AccessToken),
		github.WithURLs(&a.api, nil))
	if err != nil {
		return "", fmt.Errorf("githubapp: %w", err)
	}
	opts := &github.ListOptions{PerPage: 100}
	for range maxInstallationPages {
		insts, resp, err := gh.Apps.ListUserInstallations(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("githubapp: listing the user's installations: %w", err)
		}
		for _, in := range insts {
			if in.GetID() == installationID {
				return in.GetAccount().GetLogin(), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return "", fmt.Errorf("githubapp: installation %d is not among the user's: %w", installationID, controlplane.ErrInstallationForbidden)
}

// stripURLError drops the URL of a *url.Error, whose query may hold
// secrets, and keeps its cause.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// installation returns the token cache of an installation.
func (a *App) installation(id int64) *ghinstallation.Transport {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.insts[id]
	if t == nil {
		t = ghinstallation.NewFromAppsTransport(a.apps, id)
		a.insts[id] = t
	}
	return t
}

// InstallationToken returns a token that acts as the App's installation
// id (for example as the password of an HTTPS git clone, with user name
// "x-access-token"). Tokens are cached and renewed shortly before they
// expire (GitHub's last an hour).
func (a *App) InstallationToken(ctx context.Context, installationID int64) (string, error) {
	if installationID <= 0 {
		return "", errors.New("githubapp: installation id " + strconv.FormatInt(installationID, 10))
	}
	tok, err := a.installation(installationID).Token(ctx)
	if err != nil {
		return "", fmt.Errorf("githubapp: token of installation %d: %w", installationID, err)
	}
	return tok, nil
}

// InstallationClient returns an HTTP client that authenticates its
// requests to GitHub's API as the installation, with tokens from
// InstallationToken.
func (a *App) InstallationClient(installationID int64) *http.Client {
	c := *a.client
	c.Transport = a.installation(installationID)
	return &c
}
