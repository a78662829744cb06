package controlplane_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// wireTimeRE is the timestamp format of wire contract section 1.
var wireTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// timestamps encodes a Deployment, a Revision and a Listener stamped with
// created and updated and returns the created_at and updated_at strings of
// each, in that order.
func timestamps(t tb, created, updated time.Time) []string {
	t.Helper()
	var out []string
	for _, v := range []any{
		controlplane.Deployment{CreatedAt: created, UpdatedAt: updated},
		&controlplane.Revision{CreatedAt: created, UpdatedAt: updated},
		controlplane.Listener{CreatedAt: created, UpdatedAt: updated},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		var m struct {
			CreatedAt string `json:"created_at"`
			UpdatedAt string `json:"updated_at"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.CreatedAt, m.UpdatedAt)
	}
	return out
}

// TestWireTimeFormat: every timestamp is UTC with exactly six fractional
// digits, whatever the fraction and the time's location; digits beyond the
// microsecond are truncated, as the ControlPlane's clock truncates them.
func TestWireTimeFormat(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*3600)
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"zero microseconds", time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), "2026-11-21T10:04:05.000000Z"},
		{"one digit", time.Date(2026, 11, 21, 6, 45, 30, 400_000_000, time.UTC), "2026-11-21T06:45:30.400000Z"},
		{"five digits", time.Date(2026, 11, 21, 6, 45, 29, 677_250_000, time.UTC), "2026-11-21T06:45:29.677250Z"},
		{"six digits", time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC), "2026-11-21T10:04:05.123456Z"},
		{"one microsecond", time.Date(2026, 11, 21, 10, 4, 5, 1000, time.UTC), "2026-11-21T10:04:05.000001Z"},
		{"non-UTC to UTC", time.Date(2026, 11, 21, 12, 4, 5, 123_456_000, plus2), "2026-11-21T10:04:05.123456Z"},
		{"non-UTC across midnight", time.Date(2027, 1, 1, 1, 0, 0, 0, plus2), "2026-12-31T23:00:00.000000Z"},
		{"local zone", time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC).In(time.Local), "2026-11-21T10:04:05.000000Z"},
		{"nanoseconds truncated", time.Date(2026, 11, 21, 10, 4, 5, 123_456_789, time.UTC), "2026-11-21T10:04:05.123456Z"},
		{"truncated, not rounded", time.Date(2026, 11, 21, 10, 4, 5, 999_999_999, time.UTC), "2026-11-21T10:04:05.999999Z"},
		{"zero time", time.Time{}, "0001-01-01T00:00:00.000000Z"},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999_999_000, time.UTC), "9999-12-31T23:59:59.999999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, got := range timestamps(t, tt.in, tt.in) {
				if got != tt.want {
					t.Errorf("encoded %v as %q, want %q", tt.in, got, tt.want)
				}
			}
		})
	}
	// Like time.Time, a year beyond four digits is an encoding error.
	for _, v := range []any{controlplane.Deployment{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		controlplane.Revision{UpdatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		controlplane.Listener{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if b, err := json.Marshal(v); err == nil {
			t.Errorf("json.Marshal(%T) with year out of range = %s, want an error", v, b)
		}
	}
}

// TestWireTimeOfClock: a ControlPlane whose clock has nanoseconds stamps
// the microsecond below, and the wire shows that microsecond.
func TestWireTimeOfClock(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	now := time.Date(2026, 11, 21, 12, 4, 5, 999_999_999, time.FixedZone("UTC+2", 2*3600))
	cp := controlplane.New(st, &controlplane.Options{Clock: func() time.Time { return now }})
	d, err := cp.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.UTC().Truncate(time.Microsecond); !d.CreatedAt.Equal(want) || d.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", d.CreatedAt, want)
	}
	b, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"created_at", "updated_at"} {
		if got, want := m[k], "2026-11-21T10:04:05.999999Z"; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
}

// TestWireTimeRoundTrip: a time truncated to the microsecond survives
// encoding and decoding (encoding/json into the same types) exactly, in
// UTC, and every encoded timestamp has the fixed-width form.
func TestWireTimeRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		at := func(label string) time.Time {
			micros := rapid.Int64Range(time.Date(0, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro(),
				time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).UnixMicro()).Draw(rt, label+" µs")
			offset := rapid.IntRange(-14*3600, 14*3600).Draw(rt, label+" offset")
			return time.UnixMicro(micros).In(time.FixedZone("", offset))
		}
		created, updated := at("created"), at("updated")
		for _, s := range timestamps(rt, created, updated) {
			if !wireTimeRE.MatchString(s) {
				rt.Fatalf("timestamp %q does not match %s", s, wireTimeRE)
			}
		}
		check := func(what string, gotC, gotU time.Time) {
			if !gotC.Equal(created) || !gotU.Equal(updated) || gotC.Location() != time.UTC || gotU.Location() != time.UTC {
				rt.Fatalf("%s round trip: created %v updated %v, want %v %v in UTC", what, gotC, gotU, created.UTC(), updated.UTC())
			}
		}
		d := roundTrip(rt, controlplane.Deployment{CreatedAt: created, UpdatedAt: updated})
		check("Deployment", d.CreatedAt, d.UpdatedAt)
		r := roundTrip(rt, controlplane.Revision{CreatedAt: created, UpdatedAt: updated})
		check("Revision", r.CreatedAt, r.UpdatedAt)
		l := roundTrip(rt, controlplane.Listener{CreatedAt: created, UpdatedAt: updated})
		check("Listener", l.CreatedAt, l.UpdatedAt)
	})
}

func roundTrip[T any](t tb, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%T): %v", v, err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", b, err)
	}
	return out
}
