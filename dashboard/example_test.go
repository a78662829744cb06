package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// The dashboard mounted beside the API: sessions in the control plane's
// store, keys checked by the API's key table. A page without a session
// goes to the sign-in page.
func ExampleNew() {
	st := storemem.New()
	cp := controlplane.New(st, nil)
	keys, _ := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey("dp_example"),
		Tenants: []string{"0b4c8a55-1f5e-4d1c-9a53-6f1d8f0e7a11"}}})
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys,
		Dashboard: &dashboard.Options{Sessions: st}})
	defer api.Close()

	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/deployments", nil))
	fmt.Println(w.Code, w.Header().Get("Location"))
	fmt.Println(w.Header().Get("X-Frame-Options"))
	// Output:
	// 303 /ui/signin?next=%2Fui%2Fdeployments
	// DENY
}
