package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/storemem"
)

// exampleApp stands for GitHub (package githubapp is the real one): the
// user behind code "octocat-code" can access installation 42 of "acme".
type exampleApp struct{}

func (exampleApp) InstallURL(state string) string {
	return "https://github.com/apps/deployplane/installations/new?state=" + url.QueryEscape(state)
}

func (exampleApp) VerifyInstallation(_ context.Context, code string, id int64) (string, error) {
	if code == "octocat-code" && id == 42 {
		return "acme", nil
	}
	return "", controlplane.ErrInstallationForbidden
}

// A tenant installs the GitHub App: the control plane hands out the
// installation URL with a state bound to the tenant, and records the
// installation when GitHub's setup redirect brings the state back and
// GitHub confirms the user can access the installation. The state is
// single use, and an installation belongs to one tenant.
func ExampleControlPlane_StartGitHubInstall() {
	ctx := context.Background()
	st := storemem.New()
	cp := controlplane.New(st, &controlplane.Options{GitHubApp: exampleApp{}, GitHubInstallStates: githubapp.NewStates(st, nil)})

	install, err := cp.StartGitHubInstall(ctx, exampleTenant)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.SplitN(install, "?", 2)[0])
	u, _ := url.Parse(install)
	setup := &controlplane.GitHubSetup{InstallationID: 42, SetupAction: "install", Code: "octocat-code", State: u.Query().Get("state")}
	in, err := cp.CompleteGitHubInstall(ctx, setup)
	if err != nil {
		panic(err)
	}
	fmt.Println(in.InstallationID, in.Name)

	_, err = cp.CompleteGitHubInstall(ctx, setup)
	fmt.Println("again:", errors.Is(err, controlplane.ErrUnknownInstallState))
	_, err = cp.CreateIntegration(ctx, "another-tenant", &controlplane.CreateIntegrationRequest{InstallationID: new(int64(42)), Name: new("acme")})
	fmt.Println("another tenant:", err)
	// Output:
	// https://github.com/apps/deployplane/installations/new
	// 42 acme
	// again: true
	// another tenant: GitHub installation 42 is already registered.
}
