package httphandler_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// varying masks what changes from run to run in a log line: the time, the
// duration and the request id.
type varying struct{ w io.Writer }

var varyingValues = regexp.MustCompile(`"(time|duration|request_id)":("[^"]*"|[0-9]+)`)

func (v varying) Write(p []byte) (int, error) {
	_, err := v.w.Write(varyingValues.ReplaceAll(p, []byte(`"$1":"..."`)))
	return len(p), err
}

// ExampleNewLogHandler logs as slog.NewJSONHandler does, and lets the
// handler write its request records itself, in batches.
func ExampleNewLogHandler() {
	log := slog.New(httphandler.NewLogHandler(varying{os.Stdout}, httphandler.LogJSON))
	api := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Logger: log})
	srv := httptest.NewServer(api)

	log.Info("serving", "addr", "loopback")
	resp, err := http.Get(srv.URL + "/v2/deployments")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	srv.Close()
	_ = api.Close() // the request records still waiting
	// Output:
	// {"time":"...","level":"INFO","msg":"serving","addr":"loopback"}
	// {"time":"...","level":"INFO","msg":"request","method":"GET","path":"/v2/deployments","status":401,"duration":"...","request_id":"...","tenant":""}
}
