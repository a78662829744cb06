package httphandler_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestAuthenticateLargeScopeLists: two large bodies (60,000 scopes;
// 200,000 blank ones, about 1 MB) are each answered with one
// too_long problem at ["body", "scopes"], in a small body: the items of a
// list over its cap are not looked at.
func TestAuthenticateLargeScopeLists(t *testing.T) {
	s := newServer(t, nil)
	distinct := make([]string, 60_000)
	for i := range distinct {
		distinct[i] = fmt.Sprintf(`"scope-%d"`, i)
	}
	blank := strings.Repeat(`"",`, 200_000)
	for name, scopes := range map[string]string{
		"60,000 scopes":        strings.Join(distinct, ","),
		"200,000 blank scopes": blank[:len(blank)-1],
	} {
		r := s.as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": [`+scopes+`]}`)
		if len(r.body) > 64<<10 {
			t.Errorf("%s: a %d-byte answer", name, len(r.body))
		}
		ps := problems(t, r)
		if len(ps) != 1 || ps[0].Type != "too_long" || fmt.Sprint(ps[0].Loc) != "[body scopes]" {
			t.Errorf("%s: problems %v, want one too_long at [body scopes]", name, ps)
		}
	}
}
