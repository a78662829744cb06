package githubapp_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/storemem"
)

// An App on GitHub Enterprise Server, given to the control plane so that
// tenants install it through the verified flow.
func Example() {
	key, err := rsa.GenerateKey(rand.Reader, 2048) // the App's key, from its settings page
	if err != nil {
		log.Fatal(err)
	}
	app, err := githubapp.New(&githubapp.Options{
		AppID:         4711,
		Slug:          "deployplane",
		PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		ClientID:      "Iv1.0123456789abcdef",
		ClientSecret:  "the client secret",
		APIURL:        "https://github.example.com/api/v3/",
		WebURL:        "https://github.example.com",
	})
	if err != nil {
		log.Fatal(err)
	}
	st := storemem.New()
	cp := controlplane.New(st, &controlplane.Options{GitHubApp: app, GitHubInstallStates: githubapp.NewStates(st, nil)})
	_ = cp // cp.StartGitHubInstall, cp.CompleteGitHubInstall
	fmt.Println(app.InstallURL("the-state"))
	// Output: https://github.example.com/apps/deployplane/installations/new?state=the-state
}
