package deploydocker

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

// Pull errors: the final ones are the answers no retry changes, by the
// daemon's error class or, for those it reports as internal errors, by
// their text (as the daemon words them); everything else is retried.
func TestFinalPullError(t *testing.T) {
	for _, tc := range []struct {
		err   error
		final bool
	}{
		{cerrdefs.ErrNotFound.WithMessage("repository 127.0.0.1:5000/nothing/here not found: name unknown: Unknown name"), true},
		{cerrdefs.ErrUnauthenticated.WithMessage("unauthorized"), true},
		{cerrdefs.ErrPermissionDenied.WithMessage("denied"), true},
		{cerrdefs.ErrInvalidArgument.WithMessage("bad parameter"), true},
		{cerrdefs.ErrInternal.WithMessage(`Head "http://127.0.0.1:5000/v2/x/manifests/1": no basic auth credentials`), true},
		{cerrdefs.ErrInternal.WithMessage("pull access denied for nothing, repository does not exist or may require 'docker login': denied: requested access to the resource is denied"), true},
		{cerrdefs.ErrInternal.WithMessage("manifest for postgres:99 not found: manifest unknown: manifest unknown"), true},
		{cerrdefs.ErrInternal.WithMessage(`Get "https://regisrty.example/v2/": dial tcp: lookup regisrty.example on 127.0.0.53:53: no such host`), true},
		{cerrdefs.ErrInternal.WithMessage("no matching manifest for linux/amd64 in the manifest list entries"), true},
		{errors.New("invalid reference format: repository name (library/Bad) must be lowercase"), true},

		{cerrdefs.ErrInternal.WithMessage("received unexpected HTTP status: 503 Service Unavailable"), false},
		{cerrdefs.ErrInternal.WithMessage(`Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused`), false},
		{cerrdefs.ErrInternal.WithMessage("toomanyrequests: You have reached your pull rate limit"), false},
		{cerrdefs.ErrInternal.WithMessage(`Get "https://r.example/v2/": net/http: TLS handshake timeout`), false},
		{cerrdefs.ErrUnavailable.WithMessage("the daemon is busy"), false},
		{cerrdefs.ErrResourceExhausted.WithMessage("too many requests"), false},
		{fmt.Errorf("read: %w", errors.New("unexpected EOF")), false},
	} {
		if got := finalPullError(tc.err); got != tc.final {
			t.Errorf("finalPullError(%q) = %v, want %v", tc.err, got, tc.final)
		}
	}
}

// Health check statuses: 4xx is final but for the three that ask to come
// back later; the rest is waited out.
func TestHealthAnswerFinal(t *testing.T) {
	final := map[int]bool{
		http.StatusNotFound: true, http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusForbidden: true,
		http.StatusMethodNotAllowed: true, http.StatusGone: true,
		http.StatusRequestTimeout: false, http.StatusTooEarly: false, http.StatusTooManyRequests: false,
		http.StatusInternalServerError: false, http.StatusBadGateway: false, http.StatusServiceUnavailable: false,
		http.StatusNoContent: false, http.StatusFound: false,
	}
	for status, want := range final {
		if got := healthAnswerFinal(status); got != want {
			t.Errorf("healthAnswerFinal(%d) = %v, want %v", status, got, want)
		}
	}
}
