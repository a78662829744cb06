// Package httphandler is deployplane's HTTP API: the routes of the wire
// contract (sections 1 to 5) over a controlplane.ControlPlane, the GitHub
// webhook of build_on_push (section 7), the OAuth helpers (section 8)
// over an optional oauthflow.Service, the tenants' outbound webhooks
// (/v2/webhooks) over an optional webhooks.Service, and the listener tokens and agent
// routes of the agents that serve listeners (section 11; a listener
// token reaches only its own listener's agent routes), as one
// http.Handler to mount on any mux.
//
//	cp := controlplane.New(storebolt.Open(...), nil)
//	go cp.Run(ctx, deploysim.New(nil)) // moves revisions along; the handler only records requests
//	keys, _ := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(key), Tenants: []string{tenant}}})
//	mux.Handle("/api-host/", http.StripPrefix("/api-host", httphandler.New(cp, &httphandler.Options{Authenticator: keys})))
//
// The handler never moves a revision itself: a created deployment's
// revision stays CREATING until the program runs ControlPlane.Run with a
// Deployer (deploysim's simulation, or a real one). DELETE answers 204 at
// once and leaves the deployment AWAITING_DELETE until Run has torn it down
// and removed it; GET then answers 404.
//
// The design notes of this package (why its mechanisms are built as they
// are) are in docs/design-notes.md of the repository.
package httphandler
