package main

import "context"

// testHooks are points where this package's tests observe the running
// server, so that they synchronize on what it does instead of sleeping. The
// tests hand them to run through its context (withTestHooks); the command
// itself never sets any. A nil field is not called.
type testHooks struct {
	// longPoll is called when a long poll (GET /v2/auth/wait/{auth_id})
	// has reached the server's handler, after it is set to end at shutdown.
	longPoll func()
}

type testHooksKey struct{}

// withTestHooks returns ctx carrying h, for run.
func withTestHooks(ctx context.Context, h testHooks) context.Context {
	return context.WithValue(ctx, testHooksKey{}, h)
}

// hooksFrom returns the hooks ctx carries, or none.
func hooksFrom(ctx context.Context) testHooks {
	h, _ := ctx.Value(testHooksKey{}).(testHooks)
	return h
}
