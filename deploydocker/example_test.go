package deploydocker_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/storebolt"
)

// Embedding the Docker deployer: the control plane over a store, the
// deployer with the control plane as its State, its proxy on a listener of
// its own, Reconcile once, then Run. (Not run by go test: it needs a
// Docker daemon and runs until interrupted.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := storebolt.Open("deployplane.db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	cp := controlplane.New(st, nil)

	d, err := deploydocker.New(&deploydocker.Options{
		Host:     "unix:///var/run/docker.sock",
		ProxyURL: "http://127.0.0.1:8125", // deployments answer at ProxyURL/<id>
		State:    cp,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	go http.ListenAndServe("127.0.0.1:8125", d.Proxy())
	if err := d.Reconcile(ctx); err != nil { // adopt or remove what an earlier run left
		log.Fatal(err)
	}
	if err := cp.Run(ctx, d); err != nil {
		log.Fatal(err)
	}
}
