package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

func ExampleControlPlane_FollowEvents() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	s, err := cp.FollowEvents(ctx, exampleTenant, nil) // the tenant's whole log, from now
	if err != nil {
		panic(err)
	}
	d := exampleDeployment(ctx, cp)
	if _, err := cp.Process(ctx, quiet{}); err != nil { // deploys it
		panic(err)
	}
	if err := cp.DeleteDeployment(ctx, exampleTenant, d.ID); err != nil {
		panic(err)
	}
	if _, err := cp.Process(ctx, quiet{}); err != nil { // tears it down and removes it
		panic(err)
	}
	for done := false; !done; {
		evs, err := s.Next(ctx) // waits for events
		if err != nil {
			panic(err)
		}
		for _, e := range evs {
			var data struct {
				Change     string `json:"change"`
				Deployment *struct {
					Status string `json:"status"`
				} `json:"deployment"`
				Revision *struct {
					Status string `json:"status"`
				} `json:"revision"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				panic(err)
			}
			status := ""
			switch {
			case data.Deployment != nil:
				status = data.Deployment.Status
			case data.Revision != nil:
				status = data.Revision.Status
			}
			fmt.Println(e.ID, e.Name, data.Change, status)
			done = data.Change == controlplane.ChangeDeleted
		}
	}
	// Output:
	//   tearing down support-agent
	// 1 deployment created AWAITING_DATABASE
	// 2 revision created CREATING
	// 3 revision status QUEUED
	// 4 revision status AWAITING_DEPLOY
	// 5 revision status DEPLOYING
	// 6 revision status DEPLOYED
	// 7 deployment status READY
	// 8 deployment status AWAITING_DELETE
	// 9 deployment deleted
}

func ExampleControlPlane_WaitRevision() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	go func() {
		if _, err := cp.Process(ctx, quiet{}); err != nil {
			panic(err)
		}
	}()
	rev, err := cp.WaitRevision(ctx, exampleTenant, d.ID, *d.LatestRevisionID,
		&controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(60)})
	if err != nil {
		panic(err)
	}
	fmt.Println(rev.Status)
	// Output: DEPLOYED
}
