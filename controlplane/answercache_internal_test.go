package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestAnswerCacheBounded: the answers GetDeploymentJSON keeps stay within
// Options.AnswerCacheBytes however many deployments are read, a
// deployment found missing loses its answer, and a negative bound keeps
// nothing.
func TestAnswerCacheBounded(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		limit       int
		wantEntries bool
	}{{200 << 10, true}, {-1, false}} {
		t.Run(fmt.Sprint(c.limit), func(t *testing.T) {
			cp := New(storemem.New(), &Options{AnswerCacheBytes: c.limit})
			var ids []string
			for i := range 200 {
				d, err := cp.CreateDeployment(ctx, "t1", &CreateDeploymentRequest{Name: new(fmt.Sprintf("d%d", i)),
					Source: new(SourceExternalDocker), SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, d.ID)
				for range 2 {
					if _, err := cp.GetDeploymentJSON(ctx, "t1", d.ID); err != nil {
						t.Fatal(err)
					}
				}
				if _, size := cp.answers.Len(); size > max(c.limit, 0) {
					t.Fatalf("after %d deployments the answers take %d bytes, beyond %d", i+1, size, c.limit)
				}
			}
			n, _ := cp.answers.Len()
			if got := n > 0; got != c.wantEntries || n >= len(ids) {
				t.Fatalf("%d answers kept of %d deployments", n, len(ids))
			}
			if !c.wantEntries {
				return
			}
			// The last one read is kept; once deleted and torn down, a read
			// finds it missing and forgets its answer.
			last := ids[len(ids)-1]
			var stored []byte
			err := cp.st.View(ctx, func(r store.Reader) error {
				b, err := cp.storedDeployment(r, "t1", last)
				stored = bytes.Clone(b)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if cp.answers.Get("t1", last, stored) == nil {
				t.Fatal("the last answer made is not kept")
			}
			if err := cp.DeleteDeployment(ctx, "t1", last); err != nil {
				t.Fatal(err)
			}
			for {
				ok, err := cp.Process(ctx, nopDeployer{})
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
			}
			if _, err := cp.GetDeploymentJSON(ctx, "t1", last); err == nil {
				t.Fatal("a deleted deployment was found")
			}
			if cp.answers.Get("t1", last, stored) != nil {
				t.Fatal("the answer of a deployment found missing is kept")
			}
		})
	}
}

// nopDeployer tears down at once.
type nopDeployer struct{}

func (nopDeployer) Deploy(context.Context, *Work, Reporter) error       { return nil }
func (nopDeployer) Teardown(context.Context, string, *Deployment) error { return nil }
