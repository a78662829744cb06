package controlplane

import "testing"

func TestNormalizeRepoURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/acme/agent", "github.com/acme/agent"},
		{"https://github.com/acme/agent.git", "github.com/acme/agent"},
		{"https://github.com/acme/agent/", "github.com/acme/agent"},
		{"https://github.com/acme/agent.git/", "github.com/acme/agent"},
		{"HTTPS://GitHub.COM/Acme/Agent", "github.com/acme/agent"},
		{"http://github.com/acme/agent", "github.com/acme/agent"},
		{"git://github.com/acme/agent.git", "github.com/acme/agent"},
		{"ssh://git@github.com/acme/agent.git", "github.com/acme/agent"},
		{"git@github.com:acme/agent.git", "github.com/acme/agent"},
		{"https://token@github.com/acme/agent", "github.com/acme/agent"},
		{" https://github.com/acme/agent ", "github.com/acme/agent"},
		{"https://github.example.com:8443/acme/agent", "github.example.com:8443/acme/agent"},
		{"https://github.com/acme/agent2", "github.com/acme/agent2"},
		{"https://github.com/acme/agent.github", "github.com/acme/agent.github"},
	} {
		if got := normalizeRepoURL(tc.in); got != tc.want {
			t.Errorf("normalizeRepoURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
