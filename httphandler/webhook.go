package httphandler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
)

// The GitHub webhook (wire contract sections 3 and 7): POST
// /v1/integrations/github/webhook takes no API key, because GitHub holds
// none; the X-Hub-Signature-256 header, an HMAC-SHA256 of the raw body with
// the webhook secret both sides know, is the proof. Push events go to
// ControlPlane.HandleGitHubPush and pull_request events (the previews of
// source_config.preview) to ControlPlane.HandleGitHubPullRequest, each of
// which processes a delivery once (a repeat, with the same
// X-GitHub-Delivery or the same body, is acknowledged and creates
// nothing); every other delivery is acknowledged and changes nothing.

// webhookPath is the webhook's route.
const webhookPath = "/v1/integrations/github/webhook"

// The headers of a GitHub webhook delivery.
const (
	headerSignature = "X-Hub-Signature-256"
	headerEvent     = "X-GitHub-Event"
	headerDelivery  = "X-GitHub-Delivery"
)

// detailWebhookDisabled answers the webhook when Options.GitHubWebhookSecret
// is empty.
const detailWebhookDisabled = "The GitHub webhook is not enabled on this server: no webhook secret is configured."

// pushPayload is what the webhook reads of a GitHub push event; GitHub
// sends much more, which is ignored.
type pushPayload struct {
	Ref          string            `json:"ref"`
	After        string            `json:"after"`
	Installation *pushInstallation `json:"installation"`
	Repository   *pushRepository   `json:"repository"`
}

// pushInstallation is the GitHub App installation a delivery comes from.
type pushInstallation struct {
	ID int64 `json:"id"`
}

// pushRepository is the pushed repository.
type pushRepository struct {
	FullName string `json:"full_name"`
	CloneURL string `json:"clone_url"`
	HTMLURL  string `json:"html_url"`
	SSHURL   string `json:"ssh_url"`
}

// pullRequestPayload is what the webhook reads of a GitHub pull_request
// event.
type pullRequestPayload struct {
	Action       string            `json:"action"`
	Number       int64             `json:"number"`
	PullRequest  *pullRequest      `json:"pull_request"`
	Installation *pushInstallation `json:"installation"`
}

// pullRequest is the pull request of a pull_request event.
type pullRequest struct {
	Head   pullRequestEnd     `json:"head"`
	Base   pullRequestEnd     `json:"base"`
	Labels []pullRequestLabel `json:"labels"`
}

// pullRequestLabel is a label of a pull request.
type pullRequestLabel struct {
	Name string `json:"name"`
}

// webhookEvent is what the webhook reads of the deliveries of both
// events that act, for the API description: a push's members
// (pushPayload) and a pull_request's (pullRequestPayload).
type webhookEvent struct {
	Ref          string            `json:"ref"`
	After        string            `json:"after"`
	Repository   *pushRepository   `json:"repository"`
	Action       string            `json:"action"`
	Number       int64             `json:"number"`
	PullRequest  *pullRequest      `json:"pull_request"`
	Installation *pushInstallation `json:"installation"`
}

// pullRequestEnd is the head or the base of a pull request: a branch of a
// repository (null for the head of a fork since deleted) at a commit.
type pullRequestEnd struct {
	Ref  string          `json:"ref"`
	SHA  string          `json:"sha"`
	Repo *pushRepository `json:"repo"`
}

// webhookResponse is the 202 answer of the webhook: what the delivery did,
// for GitHub's delivery log. A pull_request delivery's revisions are its
// previews' (created or moved to the head commit).
type webhookResponse struct {
	Message          string `json:"message"`
	RevisionsCreated int    `json:"revisions_created"`
	PreviewsCreated  int    `json:"previews_created,omitempty"`
	PreviewsUpdated  int    `json:"previews_updated,omitempty"`
	PreviewsDeleted  int    `json:"previews_deleted,omitempty"`
}

// cloneURL is a repository's URL to compare: clone_url, else html_url,
// else ssh_url ("" for none).
func (r *pushRepository) cloneURL() string {
	switch {
	case r == nil:
		return ""
	case r.CloneURL != "":
		return r.CloneURL
	case r.HTMLURL != "":
		return r.HTMLURL
	}
	return r.SSHURL
}

// validSignature reports whether header, an X-Hub-Signature-256 value, is
// "sha256=" and the hex HMAC-SHA256 of body with secret. The digests are
// compared in constant time.
func validSignature(secret, body []byte, header string) bool {
	digits, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	sig, err := hex.DecodeString(digits)
	if err != nil || len(sig) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(sig, mac.Sum(nil))
}

func (h *handler) githubWebhook(c *call) (int, any, error) {
	if len(h.webhookSecret) == 0 {
		return 0, nil, &statusError{status: http.StatusServiceUnavailable, detail: detailWebhookDisabled}
	}
	sig := c.r.Header.Get(headerSignature)
	if sig == "" {
		return 0, nil, &statusError{status: http.StatusUnauthorized, detail: "Missing " + headerSignature + " header."}
	}
	body := c.body // read first, within WebhookMaxBodyBytes (body.go)
	if !validSignature(h.webhookSecret, body, sig) {
		return 0, nil, &statusError{status: http.StatusUnauthorized, detail: "Invalid " + headerSignature + " signature."}
	}
	switch event := c.r.Header.Get(headerEvent); event {
	case "push":
	case "pull_request":
		return h.githubPullRequest(c, body)
	case "ping":
		return http.StatusAccepted, webhookResponse{Message: "Ping received."}, nil
	default:
		return http.StatusAccepted, webhookResponse{Message: "Event ignored: only push and pull_request events create revisions."}, nil
	}
	var p pushPayload
	if err := decodeBody(body, &p, false); err != nil {
		return 0, nil, err
	}
	// Which pushes build (branch pushes, not tags, other refs or branch
	// deletions) is the control plane's rule: every push goes to it.
	// A delivery is processed once: the control plane remembers its id and
	// the digest of its signed body (the id is not signed, so a replay
	// under a new id is caught by the body).
	sum := sha256.Sum256(body)
	ev := &controlplane.PushEvent{Ref: p.Ref, After: p.After,
		DeliveryID: c.r.Header.Get(headerDelivery), BodyDigest: hex.EncodeToString(sum[:])}
	if p.Installation != nil {
		ev.InstallationID = p.Installation.ID
	}
	ev.RepoURL = p.Repository.cloneURL()
	revs, err := h.cp.HandleGitHubPush(c.r.Context(), ev)
	if err != nil {
		return 0, nil, err
	}
	msg := strconv.Itoa(len(revs)) + " revisions created."
	if len(revs) == 1 {
		msg = "1 revision created."
	}
	return http.StatusAccepted, webhookResponse{Message: msg, RevisionsCreated: len(revs)}, nil
}

// githubPullRequest hands a signed pull_request delivery to the control
// plane, which decides which actions and pull requests make previews.
func (h *handler) githubPullRequest(c *call, body []byte) (int, any, error) {
	var p pullRequestPayload
	if err := decodeBody(body, &p, false); err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256(body)
	ev := &controlplane.PullRequestEvent{Action: p.Action, Number: p.Number,
		DeliveryID: c.r.Header.Get(headerDelivery), BodyDigest: hex.EncodeToString(sum[:])}
	if p.Installation != nil {
		ev.InstallationID = p.Installation.ID
	}
	if pr := p.PullRequest; pr != nil {
		ev.BaseRepoURL, ev.BaseRef = pr.Base.Repo.cloneURL(), pr.Base.Ref
		if pr.Base.Repo != nil {
			ev.BaseRepo = pr.Base.Repo.FullName
		}
		ev.HeadRepoURL, ev.HeadRef, ev.HeadSHA = pr.Head.Repo.cloneURL(), pr.Head.Ref, pr.Head.SHA
		for _, l := range pr.Labels {
			ev.Labels = append(ev.Labels, l.Name)
		}
	}
	changes, err := h.cp.HandleGitHubPullRequest(c.r.Context(), ev)
	if err != nil {
		return 0, nil, err
	}
	var res webhookResponse
	for _, ch := range changes {
		switch ch.Action {
		case controlplane.PreviewCreated:
			res.PreviewsCreated++
		case controlplane.PreviewUpdated:
			res.PreviewsUpdated++
		case controlplane.PreviewDeleted:
			res.PreviewsDeleted++
		}
		if ch.Revision != nil {
			res.RevisionsCreated++
		}
	}
	res.Message = fmt.Sprintf("Previews: %d created, %d updated, %d deleted.", res.PreviewsCreated, res.PreviewsUpdated, res.PreviewsDeleted)
	return http.StatusAccepted, res, nil
}
