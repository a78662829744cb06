package controlplane_test

import (
	"context"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// A deployer writes a revision's log lines in batches; a client reads them
// a page at a time, newest first here, following next_offset. A log over
// its bound answers a line counting what it dropped.
func ExampleControlPlane_ListLogs() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), &controlplane.Options{LogRetention: controlplane.LogRetention{MaxLines: 3}})
	d, err := cp.CreateDeployment(ctx, "acme", &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	rev := *d.LatestRevisionID
	err = cp.AppendLogs(ctx, "acme", d.ID, rev,
		controlplane.LogLine{Type: controlplane.LogBuild, Message: "Cloning"},
		controlplane.LogLine{Type: controlplane.LogBuild, Message: "Step 1/2 : FROM base"},
		controlplane.LogLine{Type: controlplane.LogBuild, Message: "Step 2/2 : RUN pip install"},
		controlplane.LogLine{Type: controlplane.LogBuild, Level: controlplane.LevelError, Message: "pip: no matching distribution"})
	if err != nil {
		fmt.Println(err)
		return
	}
	q := &controlplane.LogQuery{Type: controlplane.LogBuild, Order: "desc", Limit: new(2)}
	for {
		page, err := cp.ListLogs(ctx, "acme", d.ID, rev, q)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, l := range page.Logs {
			fmt.Printf("%-7s %s\n", l.Level, l.Message)
		}
		if page.NextOffset == nil {
			break
		}
		q.Offset = *page.NextOffset
	}
	// Output:
	// ERROR   pip: no matching distribution
	// INFO    Step 2/2 : RUN pip install
	// INFO    Step 1/2 : FROM base
	// WARNING 1 earlier lines dropped: this log keeps its last 3 lines and 5242880 bytes of messages
}
