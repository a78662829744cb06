package storebolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storebolt"
)

// logBench is a ControlPlane over a fresh storebolt file with one
// revision to write logs to.
func logBench(b *testing.B) (cp *controlplane.ControlPlane, dep, rev string) {
	b.Helper()
	st, err := storebolt.Open(filepath.Join(b.TempDir(), "db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cp = controlplane.New(st, nil)
	d, err := cp.CreateDeployment(context.Background(), benchTenant, &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		b.Fatal(err)
	}
	return cp, d.ID, *d.LatestRevisionID
}

func buildLines(n int) []controlplane.LogLine {
	ls := make([]controlplane.LogLine, n)
	for i := range ls {
		ls[i] = controlplane.LogLine{Type: controlplane.LogBuild, Message: fmt.Sprintf("#%d 0.%03d Collecting package-%d==1.2.3 (from -r requirements.txt (line %d))", i, i%1000, i, i)}
	}
	return ls
}

// BenchmarkLogBatch: 100 build lines written as one Reporter.Log batch
// (candidate) against one write per line (baseline), on a durable store
// where each write is a commit. ns/op is per 100 lines.
func BenchmarkLogBatch(b *testing.B) {
	lines := buildLines(100)
	benchcmp.CompareNamed(b, "line-by-line", func(b *testing.B) {
		cp, dep, rev := logBench(b)
		for b.Loop() {
			for _, l := range lines {
				if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, l); err != nil {
					b.Fatal(err)
				}
			}
		}
	}, "batch", func(b *testing.B) {
		cp, dep, rev := logBench(b)
		for b.Loop() {
			if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, lines...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLogAtBound: a batch of 100 lines written to a log already at
// its bound of 10,000 lines, so that each write also drops (reads and
// deletes) 100 old lines (candidate), against the same batch written to
// a log far below it (baseline).
func BenchmarkLogAtBound(b *testing.B) {
	lines := buildLines(100)
	benchcmp.CompareNamed(b, "below-bound", func(b *testing.B) {
		cp, dep, rev := logBench(b)
		for b.Loop() {
			if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, lines...); err != nil {
				b.Fatal(err)
			}
		}
	}, "at-bound", func(b *testing.B) {
		cp, dep, rev := logBench(b)
		full := buildLines(controlplane.DefaultLogMaxLines)
		for i := 0; i < len(full); i += 1000 {
			if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, full[i:i+1000]...); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, lines...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLogPage: a page of 50 lines of a full log (10,000 lines), read
// from its end in desc order (candidate), against GetRevision (baseline),
// the call a client polls beside it.
func BenchmarkLogPage(b *testing.B) {
	cp, dep, rev := logBench(b)
	full := buildLines(controlplane.DefaultLogMaxLines)
	for i := 0; i < len(full); i += 1000 {
		if err := cp.AppendLogs(context.Background(), benchTenant, dep, rev, full[i:i+1000]...); err != nil {
			b.Fatal(err)
		}
	}
	q := &controlplane.LogQuery{Type: controlplane.LogBuild, Order: "desc"}
	benchcmp.CompareNamed(b, "get-revision", func(b *testing.B) {
		for b.Loop() {
			if _, err := cp.GetRevision(context.Background(), benchTenant, dep, rev); err != nil {
				b.Fatal(err)
			}
		}
	}, "log-page", func(b *testing.B) {
		for b.Loop() {
			p, err := cp.ListLogs(context.Background(), benchTenant, dep, rev, q)
			if err != nil || len(p.Logs) != 50 {
				b.Fatal(err, len(p.Logs))
			}
		}
	})
}
