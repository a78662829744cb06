package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
)

// simAgentsScan is how often the simulated agents' supervisor looks for
// listeners that were created or deleted.
const simAgentsScan = 2 * time.Second

// simVersion is the version the simulated agents report.
const simVersion = "simulated"

// simAgents serves, inside the server, every listener the server does not
// drive with a simulated agent (-deployer sim, -sim-agents): an
// agent.Agent per listener, with the simulated Deployer, speaking the
// agent protocol to the server's own handler in process (agent.InProcess)
// with an API key of the listener's tenant that only this process knows.
// So on a default server a deployment on any listener reaches DEPLOYED,
// through the same routes a real agent uses.
type simAgents struct {
	cp     *controlplane.ControlPlane
	drives func(*controlplane.Listener) bool
	api    http.Handler
	keys   map[string]string // tenant -> its simulated agents' API key
	sim    controlplane.Deployer
	log    *slog.Logger
}

// simAgentKeys makes an API key for the simulated agents of each tenant,
// random and never shown, and the entries of the key table that accept
// them.
func simAgentKeys(tenants []string) (map[string]string, []httphandler.Key) {
	keys := map[string]string{}
	var table []httphandler.Key
	for _, t := range tenants {
		if _, ok := keys[t]; ok {
			continue
		}
		var b [32]byte
		_, _ = rand.Read(b[:])
		k := "dp_sim_" + base64.RawURLEncoding.EncodeToString(b[:])
		keys[t] = k
		table = append(table, httphandler.Key{SHA256: httphandler.HashKey(k), Tenants: []string{t}})
	}
	return keys, table
}

// simAgent is one running simulated agent.
type simAgent struct {
	stop context.CancelFunc
	done chan struct{}
}

// run keeps one simulated agent running per listener not driven, of each
// tenant that has a key, looking for new and deleted listeners every
// simAgentsScan, until ctx ends; then it stops them (each gives back the
// work it holds) and returns.
func (s *simAgents) run(ctx context.Context) {
	running := map[string]*simAgent{} // tenant/listener
	defer func() {
		for _, a := range running {
			a.stop()
		}
		for _, a := range running {
			<-a.done
		}
	}()
	t := time.NewTicker(simAgentsScan)
	defer t.Stop()
	for {
		want, ok := s.scan(ctx)
		for k, a := range running {
			select {
			case <-a.done:
				delete(running, k) // stopped by itself: started again below if still wanted
				continue
			default:
			}
			if _, keep := want[k]; ok && !keep {
				a.stop()
				<-a.done
				delete(running, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if running[k] == nil {
				running[k] = s.start(ctx, want[k])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// simTarget is a listener a simulated agent serves.
type simTarget struct{ tenant, listener string }

// scan lists the listeners of every tenant with a key that the server
// does not drive; ok is false when a list failed (the running agents are
// then kept).
func (s *simAgents) scan(ctx context.Context) (map[string]simTarget, bool) {
	want := map[string]simTarget{}
	ok := true
	limit := controlplane.MaxPageLimit
	for _, tenant := range slices.Sorted(maps.Keys(s.keys)) {
		for offset := 0; ; {
			page, err := s.cp.ListListeners(ctx, tenant, &controlplane.ListListenersQuery{Limit: &limit, Offset: offset})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("simulated agents: listing listeners failed", "tenant", tenant, "err", err)
				}
				ok = false
				break
			}
			for i := range page.Resources {
				if l := &page.Resources[i]; !s.drives(l) {
					want[tenant+"/"+l.ID] = simTarget{tenant: tenant, listener: l.ID}
				}
			}
			if len(page.Resources) < limit {
				break
			}
			offset = page.Offset
		}
	}
	return want, ok
}

// start runs a simulated agent for the listener until ctx ends or it is
// stopped.
func (s *simAgents) start(ctx context.Context, t simTarget) *simAgent {
	actx, stop := context.WithCancel(ctx)
	a := &simAgent{stop: stop, done: make(chan struct{})}
	log := s.log.With("simulated_agent", t.listener)
	ag, err := agent.New(&agent.Options{ControlPlane: "http://deployplane.internal", ListenerID: t.listener, APIKey: s.keys[t.tenant],
		HTTPClient: &http.Client{Transport: agent.InProcess(s.api)}, Deployer: s.sim, Version: simVersion, Logger: log})
	if err != nil {
		log.Error("simulated agents: cannot start one", "err", err)
		close(a.done)
		return a
	}
	go func() {
		defer close(a.done)
		if err := ag.Run(actx); err != nil {
			log.Warn("simulated agents: an agent stopped", "err", err)
		}
	}()
	return a
}

// simAgentsLoop is a started supervisor: stop ends it and waits.
type simAgentsLoop struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// startSimAgents runs s until the returned loop is stopped (nil s: a loop
// with nothing to stop).
func startSimAgents(ctx context.Context, s *simAgents) *simAgentsLoop {
	l := &simAgentsLoop{stop: func() {}}
	if s == nil {
		return l
	}
	ctx, l.stop = context.WithCancel(ctx)
	l.wg.Go(func() { s.run(ctx) })
	return l
}

// close stops the simulated agents and waits for them.
func (l *simAgentsLoop) close() {
	l.stop()
	l.wg.Wait()
}
