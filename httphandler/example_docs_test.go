package httphandler_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// ExampleOptions_basePath mounts the API under a prefix and tells the
// handler so: the OpenAPI document names the prefix as its server, so
// that clients generated from it call /api-host/v2/..., and the
// interactive page at /api-host/docs loads its assets and the document
// from under the prefix.
func ExampleOptions_basePath() {
	api := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{BasePath: "/api-host"})
	defer api.Close()
	mux := http.NewServeMux()
	mux.Handle("/api-host/", http.StripPrefix("/api-host", api))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/api-host/openapi.json")
	if err != nil {
		panic(err)
	}
	var doc struct {
		Servers []struct{ URL string } `json:"servers"`
		Paths   map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		panic(err)
	}
	fmt.Println("server:", doc.Servers[0].URL)
	fmt.Println("GET /v2/deployments:", doc.Paths["/v2/deployments"]["get"].OperationID)

	resp, err = http.Get(srv.URL + "/api-host/docs")
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println("docs:", resp.StatusCode, resp.Header.Get("Content-Type"))
	// Output:
	// server: /api-host
	// GET /v2/deployments: list_deployments_v2_deployments_get
	// docs: 200 text/html
}
