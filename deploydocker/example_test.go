package deploydocker_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/imagebuild"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// Embedding the Docker deployer: the control plane over a store (github
// deployments' url, their custom_url, where the proxy serves them), the
// deployer with the control plane as its State and imagebuild as its
// Builder on the same daemon, its proxy on a listener of its own,
// Reconcile once, then Run. (Not run by go test: it needs a Docker daemon
// and runs until interrupted.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := storebolt.Open("deployplane.db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	cp := controlplane.New(st, &controlplane.Options{CustomURLTemplate: "http://127.0.0.1:8125/{id}"})

	cli, err := client.New(client.FromEnv, client.WithHost("unix:///var/run/docker.sock"))
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	b, err := imagebuild.New(cli, nil) // public https repositories; see imagebuild.Options
	if err != nil {
		log.Fatal(err)
	}
	d, err := deploydocker.New(&deploydocker.Options{
		Client:   cli,
		ProxyURL: "http://127.0.0.1:8125", // deployments answer at ProxyURL/<id>
		State:    cp,
		Builder:  b, // github revisions are built, then run; Teardown removes the images
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

// The level of a line of a container's output, as its deploy log shows it.
func ExampleLevelOf() {
	for _, line := range []string{
		"INFO:     Application startup complete.",
		`{"level": "warning", "event": "slow graph"}`,
		"Traceback (most recent call last):",
	} {
		fmt.Println(deploydocker.LevelOf(line, controlplane.LevelError))
	}
	// Output:
	// INFO
	// WARNING
	// ERROR
}

// Each deployment's database and Redis: containers of its own
// (Options.Services), or a database, role and Redis user on servers the
// operator shares (Options.Databases with a deploydb.Shared). (Not run by
// go test: it needs a Docker daemon and the shared servers.)
func ExampleDatabases() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)

	// Containers of the deployment's own, their data under /srv/deployplane,
	// on a network of the operator's (docker network create deployplane),
	// where the revision's containers find them by name.
	own, err := deploydocker.New(&deploydocker.Options{
		Network:  "deployplane",
		ProxyURL: "http://127.0.0.1:8125",
		State:    cp,
		Services: &deploydocker.Services{PostgresImage: "postgres:16-alpine", RedisImage: "redis:7-alpine", DataDir: "/srv/deployplane"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer own.Close()

	// Or shared servers.
	shared, err := deploydb.New(ctx, &deploydb.Options{
		PostgresDSN: "postgres://admin:secret@db.internal:5432/postgres",
		RedisURL:    "redis://:secret@redis.internal:6379",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer shared.Close()
	onShared, err := deploydocker.New(&deploydocker.Options{
		ProxyURL:  "http://127.0.0.1:8125",
		State:     cp,
		Databases: shared,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer onShared.Close()
}
