package webhooks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/webhooks"
)

// A webhook registered, a deployment created, and its deployment.created
// delivery verified by the receiver.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp := controlplane.New(storemem.New(), nil)
	// The receiver is on loopback, which the operator must allow.
	policy, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		panic(err)
	}
	svc, err := webhooks.New(cp, &webhooks.Options{Egress: policy})
	if err != nil {
		panic(err)
	}
	go svc.Run(ctx) // the dispatcher, beside the control plane's Run

	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYqr"
	got := make(chan string, 1)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(webhooks.HeaderTimestamp), 10, 64)
		want, _ := webhooks.Sign(secret, r.Header.Get(webhooks.HeaderID), time.Unix(ts, 0), body)
		got <- fmt.Sprintf("signed: %v", r.Header.Get(webhooks.HeaderSignature) == want)
	}))
	defer rc.Close()

	tenant := "0194c0de-0000-7000-8000-00000000000a"
	if _, err := svc.CreateWebhook(ctx, tenant, &webhooks.CreateWebhookRequest{URL: rc.URL,
		Events: []string{webhooks.EventDeploymentCreated}, Secret: new(secret)}); err != nil {
		panic(err)
	}
	if _, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{
		Name:                 new("support-agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/support-agent:1.0.0")},
	}); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: signed: true
}

// The Standard Webhooks specification's own test vector.
func ExampleSign() {
	sig, err := webhooks.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(sig)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
