// Package egress makes the *http.Client for requests a server makes on a
// tenant's behalf: the OAuth code exchange and token refresh at a token
// endpoint the tenant registered (package oauthflow), and the git clones
// of repositories a tenant names (package imagebuild).
//
// A tenant chooses where those requests go, so without a policy a tenant
// could make the server reach what only the server can reach: its own
// loopback interface, a cloud metadata service at 169.254.169.254, a
// database on the private network (server-side request forgery). A Policy
// refuses that:
//
//   - Requests use https. Plain http is refused before anything is sent,
//     on every redirect too.
//   - Each connection is checked when it is dialled, against the address
//     the name resolved to, so a name that resolves to a private address,
//     or that a hostile DNS server rebinds to one between a check and the
//     connection, is refused too: the check and the connection use the same
//     address. Only public unicast addresses may be reached: CheckAddr
//     refuses loopback, private (RFC 1918, RFC 4193 fc00::/7), shared
//     (CGNAT 100.64.0.0/10), link-local, multicast, unspecified, broadcast,
//     reserved, documentation and benchmarking addresses, IPv4-mapped and
//     NAT64 IPv6 addresses by the IPv4 address they carry, and the IPv6
//     transition prefixes (6to4, Teredo) whose IPv4 target cannot be
//     checked.
//   - No proxy is used, whatever HTTP_PROXY says: through a proxy the check
//     would see the proxy's address, not the target's.
//
// Refusals are *RefusedError values matching ErrRefused; an http.Client
// returns them wrapped in a *url.Error (and, from the dial, a *net.OpError),
// so match them with errors.Is or errors.As. No connection is opened and
// no byte is sent to a refused address.
//
// # What the operator trusts
//
// Options.AllowHosts lists hosts the operator trusts: a request to one of
// them may use http and may reach any address it resolves to, private and
// loopback included. An entry is a host name or an IP literal ("auth.corp",
// "127.0.0.1", "::1"), which allows every port, or host:port
// ("127.0.0.1:8443", "[::1]:9000"), which allows that port only. Names match
// exactly (case-insensitively, ignoring a final dot): allowing "corp" does
// not allow "auth.corp". Every tenant may then reach those hosts, so allow
// only services meant for all of them (a company's identity provider, a
// fake provider in tests).
//
// # Checking before the request
//
// CheckURL applies the parts of the policy that need no DNS to a URL a
// tenant gives, so that a service can refuse it when it is registered
// rather than when it is first used: the scheme, and the host when it is an
// IP literal or a name that is always loopback ("localhost" and names under
// ".localhost", RFC 6761). It cannot see where other names resolve; the
// dial-time check still applies to them.
package egress
