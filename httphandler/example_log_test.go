package httphandler_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// ExampleHandler_Close serves with a request log and closes the handler
// after the server's shutdown, so that the last request records are
// written before the program exits.
func ExampleHandler_Close() {
	// The time, duration and request id vary from run to run.
	vary := func(_ []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.TimeKey, "duration", "request_id":
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: vary}))
	api := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Logger: log})
	srv := httptest.NewServer(api)

	resp, err := http.Get(srv.URL + "/v2/deployments")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	// At the end: first the server (http.Server.Shutdown; Close for an
	// httptest.Server), then the request log.
	srv.Close()
	_ = api.Close()
	// Output:
	// level=INFO msg=request method=GET path=/v2/deployments status=401 tenant=""
}
