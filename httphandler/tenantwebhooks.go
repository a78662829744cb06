package httphandler

import (
	"net/http"

	"github.com/deployplane/deployplane/controlplane"

	"github.com/deployplane/deployplane/webhooks"
)

// The tenants' outbound webhooks (/v2/webhooks) over a webhooks.Service:
// decode, call one method, encode. (webhook.go is the GitHub App's
// inbound webhook.)

// detailWebhooksDisabled answers /v2/webhooks when Options.Webhooks is nil.
const detailWebhooksDisabled = "Webhooks (/v2/webhooks) are not enabled on this server."

// webhookRoutes are the routes of the webhooks, none without a Service.
func (h *handler) webhookRoutes(page []param) []route {
	if h.webhooks == nil {
		return nil
	}
	const item = "/v2/webhooks/{webhook_id}"
	return []route{
		{method: http.MethodPost, path: "/v2/webhooks", serve: (*handler).createWebhook,
			summary: "Register a webhook: the tenant's events of the types it names are POSTed to its url, signed (Standard Webhooks)",
			description: "url must be https (http only to hosts the operator allows) and a host the server may reach on a tenant's " +
				"behalf (its egress policy). events lists event types (deployment.created, deployment.updated, deployment.deleted, " +
				"revision.created, revision.deployed, revision.failed, preview.created) or \"*\" for all. secret is write-only: " +
				"\"whsec_\" and the base64 of 24 to 64 bytes; without one the server generates one and answers it in this answer " +
				"only. The webhook receives the events that follow its registration.",
			body: webhooks.CreateWebhookRequest{}, status: http.StatusCreated, resp: webhooks.CreatedWebhook{},
			errors: []int{http.StatusConflict}},
		{method: http.MethodGet, path: "/v2/webhooks", serve: (*handler).listWebhooks,
			summary: "List the tenant's webhooks, newest first", status: http.StatusOK, resp: webhooks.WebhookPage{}, query: page},
		{method: http.MethodGet, path: item, serve: (*handler).getWebhook,
			summary: "Get a webhook (never its secret)", status: http.StatusOK, resp: webhooks.Webhook{}},
		{method: http.MethodPatch, path: item, serve: (*handler).updateWebhook, op: "patch_webhook",
			summary: "Update a webhook; enabled false stops it and fails its pending deliveries",
			body:    webhooks.UpdateWebhookRequest{}, status: http.StatusOK, resp: webhooks.Webhook{}},
		{method: http.MethodDelete, path: item, serve: (*handler).deleteWebhook,
			summary: "Delete a webhook and its delivery log", status: http.StatusNoContent},
		{method: http.MethodGet, path: item + "/deliveries", serve: (*handler).listWebhookDeliveries, op: "list_webhook_deliveries",
			summary: "A webhook's delivery log, newest first: each delivery's status, attempts and last answer",
			description: "A delivery is pending until an attempt gets a 2xx answer (succeeded) or its last retry fails (failed). " +
				"Its id is the webhook-id header of every attempt: receivers dedupe by it, as a delivery may arrive more than once.",
			status: http.StatusOK, resp: webhooks.DeliveryPage{}, query: page},
	}
}

func (h *handler) createWebhook(c *call) (int, any, error) {
	var req webhooks.CreateWebhookRequest
	validate := func() error { return h.webhooks.ValidateCreate(&req) }
	if err := h.decodeChecked(c, &req, false, nil, validate); err != nil {
		return 0, nil, err
	}
	w, err := h.webhooks.CreateWebhook(c.r.Context(), c.tenant, &req)
	return http.StatusCreated, w, err
}

func (h *handler) listWebhooks(c *call) (int, any, error) {
	q, err := parseWebhookPage(c.r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	p, err := h.webhooks.ListWebhooks(c.r.Context(), c.tenant, q)
	return http.StatusOK, p, err
}

func (h *handler) getWebhook(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "webhook_id")
	if err != nil {
		return 0, nil, err
	}
	w, err := h.webhooks.GetWebhook(c.r.Context(), c.tenant, ids[0])
	return http.StatusOK, w, err
}

func (h *handler) updateWebhook(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "webhook_id")
	var req webhooks.UpdateWebhookRequest
	validate := func() error { return h.webhooks.ValidateUpdate(&req) }
	if err := h.decodeChecked(c, &req, false, pathErr, validate); err != nil {
		return 0, nil, err
	}
	w, err := h.webhooks.UpdateWebhook(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, w, err
}

func (h *handler) deleteWebhook(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "webhook_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.webhooks.DeleteWebhook(c.r.Context(), c.tenant, ids[0])
}

func (h *handler) listWebhookDeliveries(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "webhook_id")
	q, qErr := parseWebhookPage(c.r.URL.RawQuery)
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	p, err := h.webhooks.ListDeliveries(c.r.Context(), c.tenant, ids[0], q)
	return http.StatusOK, p, err
}

// parseWebhookPage reads limit and offset.
func parseWebhookPage(raw string) (*webhooks.ListQuery, error) {
	p := newQueryParser(raw)
	q := &webhooks.ListQuery{Limit: p.intp("limit"), Offset: p.int("offset")}
	// The parse problems, with those of what did parse; else the Service
	// validates q itself.
	return q, p.done(func(controlplane.Limits) error { return q.Validate() }, controlplane.Limits{})
}
