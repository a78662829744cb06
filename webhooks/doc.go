// Package webhooks is a tenant's outbound webhooks: their records in the
// control plane's store, and the dispatcher that delivers the tenant's
// events to them, signed as the Standard Webhooks specification says.
//
// A Service keeps the webhooks (CreateWebhook, ListWebhooks, GetWebhook,
// UpdateWebhook, DeleteWebhook, ListDeliveries; httphandler serves them
// under /v2/webhooks) and, in Run, delivers. A webhook names a url (https,
// or http to a host the operator allows, checked against the egress
// policy when registered and at every dial) and the event types it wants
// (EventTypes, "*" for all). Its secret is write-only: one the server
// generates is answered once, by CreateWebhook.
//
// Deliveries come from the control plane's event log
// (controlplane.ControlPlane.FollowEvents), followed from a cursor kept
// per tenant in the store (wh_cursors): the events after the cursor become
// delivery records (wh_deliveries, wh_pending) and the cursor moves past
// them in one store transaction, so nothing is lost across restarts and no
// event becomes two deliveries. A tenant is dispatched by one Service at a
// time, the holder of its lease (wh_leases: holder and expiry, renewed
// while it runs, taken over by another replica once expired).
//
// Each delivery is a POST of {"type", "timestamp", "data"} (data: the
// event log's data of the event, the deployment's or revision's wire JSON
// and their ids) with the headers webhook-id (the delivery's id, the same
// on every attempt), webhook-timestamp and webhook-signature (Sign). An
// answer other than 2xx, or no answer within AttemptTimeout, is retried
// after each Backoff in turn; then the delivery fails. A 410 Gone disables
// the webhook and fails its pending deliveries. Every attempt is
// recorded in the delivery's log. Delivery is at least once: a replica
// that dies between sending and recording leaves the attempt to be made
// again, so a receiver dedupes by webhook-id. Events the event log no
// longer retains when they are read (a dispatcher stopped for longer than
// the retention) are recorded as a failed delivery of type events.lost.
package webhooks
