package oauthflow_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// wireTimeRE is the timestamp format of wire contract section 1.
var wireTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// providerTimes encodes p and returns its created_at and updated_at.
func providerTimes(t interface{ Fatal(...any) }, p oauthflow.Provider) (created, updated string) {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.CreatedAt, m.UpdatedAt
}

// TestProviderWireTimeFormat: a Provider's timestamps are UTC with exactly
// six fractional digits, truncated below the microsecond.
func TestProviderWireTimeFormat(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*3600)
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"zero microseconds", time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), "2026-11-21T10:04:05.000000Z"},
		{"one digit", time.Date(2026, 11, 21, 6, 45, 30, 400_000_000, time.UTC), "2026-11-21T06:45:30.400000Z"},
		{"six digits", time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC), "2026-11-21T10:04:05.123456Z"},
		{"non-UTC to UTC", time.Date(2026, 11, 21, 12, 4, 5, 123_456_000, plus2), "2026-11-21T10:04:05.123456Z"},
		{"nanoseconds truncated", time.Date(2026, 11, 21, 10, 4, 5, 999_999_999, time.UTC), "2026-11-21T10:04:05.999999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, u := providerTimes(t, oauthflow.Provider{CreatedAt: tt.in, UpdatedAt: tt.in})
			if c != tt.want || u != tt.want {
				t.Errorf("encoded %v as %q and %q, want %q", tt.in, c, u, tt.want)
			}
		})
	}
	if b, err := json.Marshal(oauthflow.Provider{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Errorf("json.Marshal with year 10000 = %s, want an error", b)
	}
}

// TestProviderWireTimeOfClock: the Service stamps the microsecond below
// its clock's time; the stored provider keeps it, and its sealed secret.
func TestProviderWireTimeOfClock(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	now := time.Date(2026, 11, 21, 12, 4, 5, 999_999_999, time.FixedZone("UTC+2", 2*3600))
	svc, err := oauthflow.New(st, &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateProvider(ctx, tenantA, validProvider()); err != nil {
		t.Fatal(err)
	}
	p, err := svc.GetProvider(ctx, tenantA, "github")
	if err != nil {
		t.Fatal(err)
	}
	if c, u := providerTimes(t, p); c != "2026-11-21T10:04:05.999999Z" || u != c {
		t.Errorf("stored provider encodes created_at %q updated_at %q, want 2026-11-21T10:04:05.999999Z", c, u)
	}
}

// TestProviderWireTimeRoundTrip: a time truncated to the microsecond
// survives encoding and decoding exactly, in UTC, in the fixed-width form.
func TestProviderWireTimeRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		micros := rapid.Int64Range(time.Date(0, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro(),
			time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).UnixMicro()).Draw(rt, "µs")
		at := time.UnixMicro(micros).In(time.FixedZone("", rapid.IntRange(-14*3600, 14*3600).Draw(rt, "offset")))
		p := oauthflow.Provider{ID: "x", CreatedAt: at, UpdatedAt: at.Add(time.Microsecond)}
		c, u := providerTimes(rt, p)
		if !wireTimeRE.MatchString(c) || !wireTimeRE.MatchString(u) {
			rt.Fatalf("timestamps %q %q do not match %s", c, u, wireTimeRE)
		}
		b, err := json.Marshal(p)
		if err != nil {
			rt.Fatal(err)
		}
		var got oauthflow.Provider
		if err := json.Unmarshal(b, &got); err != nil {
			rt.Fatal(err)
		}
		if !got.CreatedAt.Equal(p.CreatedAt) || !got.UpdatedAt.Equal(p.UpdatedAt) || got.CreatedAt.Location() != time.UTC {
			rt.Fatalf("round trip gave %v %v, want %v %v in UTC", got.CreatedAt, got.UpdatedAt, p.CreatedAt.UTC(), p.UpdatedAt.UTC())
		}
	})
}
