package webhooks

import (
	"slices"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// TestEventTypes: which webhook event types each event of the log is
// (previews are made by the service only, so no public API makes one).
func TestEventTypes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{controlplane.EventDeployment, `{"change":"created","deployment_id":"d","deployment":{"is_preview":false}}`, []string{EventDeploymentCreated}},
		{controlplane.EventDeployment, `{"change":"created","deployment_id":"d","deployment":{"is_preview":true}}`,
			[]string{EventDeploymentCreated, EventPreviewCreated}},
		{controlplane.EventDeployment, `{"change":"status","deployment_id":"d","deployment":{}}`, []string{EventDeploymentUpdated}},
		{controlplane.EventDeployment, `{"change":"updated","deployment_id":"d","deployment":{}}`, []string{EventDeploymentUpdated}},
		{controlplane.EventDeployment, `{"change":"deleted","deployment_id":"d"}`, []string{EventDeploymentDeleted}},
		{controlplane.EventRevision, `{"change":"created","revision":{"status":"CREATING"}}`, []string{EventRevisionCreated}},
		{controlplane.EventRevision, `{"change":"status","revision":{"status":"DEPLOYING"}}`, nil},
		{controlplane.EventRevision, `{"change":"status","revision":{"status":"DEPLOYED"}}`, []string{EventRevisionDeployed}},
		{controlplane.EventRevision, `{"change":"updated","revision":{"status":"DEPLOYED"}}`, nil},
		{controlplane.EventRevision, `{"change":"status","revision":{"status":"BUILD_FAILED"}}`, []string{EventRevisionFailed}},
		{controlplane.EventRevision, `{"change":"status","revision":{"status":"CREATE_FAILED"}}`, []string{EventRevisionFailed}},
		{controlplane.EventRevision, `{"change":"status","revision":{"status":"DEPLOY_FAILED"}}`, []string{EventRevisionFailed}},
		{controlplane.EventLog, `{"type":"build","log":{}}`, nil},
	} {
		got, _ := eventTypes(&controlplane.Event{ID: "1", Name: tc.name, Data: []byte(tc.data)})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %v, want %v", tc.name, tc.data, got, tc.want)
		}
	}
}
