package wiretime_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/wiretime"
)

// wireRE is the timestamp format of wire contract section 1.
var wireRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestEncode: every encoding is UTC with exactly six fractional digits,
// whatever the fraction and the location; digits beyond the microsecond are
// truncated. JSON (alone, in a struct by value, in a map key) and text agree.
func TestEncode(t *testing.T) {
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
		{"nanoseconds truncated", time.Date(2026, 11, 21, 10, 4, 5, 123_456_999, time.UTC), "2026-11-21T10:04:05.123456Z"},
		{"below a microsecond", time.Date(2026, 11, 21, 10, 4, 5, 999, time.UTC), "2026-11-21T10:04:05.000000Z"},
		{"offset converted to UTC", time.Date(2026, 11, 21, 12, 4, 5, 500_000_000, plus2), "2026-11-21T10:04:05.500000Z"},
		{"local day before", time.Date(2026, 1, 1, 1, 0, 0, 0, plus2), "2025-12-31T23:00:00.000000Z"},
		{"zero time", time.Time{}, "0001-01-01T00:00:00.000000Z"},
		{"year 0", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), "0000-01-01T00:00:00.000000Z"},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), "9999-12-31T23:59:59.999999Z"},
		{"with a monotonic reading", time.Now(), ""}, // want filled in below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.in.UTC().Truncate(time.Microsecond).Format(wiretime.Layout)
			}
			w := wiretime.New(tt.in)
			text, err := w.MarshalText()
			if err != nil || string(text) != want {
				t.Errorf("MarshalText = %q, %v; want %q", text, err, want)
			}
			if s := w.String(); s != want {
				t.Errorf("String = %q, want %q", s, want)
			}
			j, err := json.Marshal(w)
			if err != nil || string(j) != `"`+want+`"` {
				t.Errorf("json.Marshal = %s, %v; want %q", j, err, want)
			}
			type wire struct { // a struct encoded by value: the fields are not addressable
				At wiretime.Time `json:"created_at"`
			}
			s, err := json.Marshal(wire{w})
			if err != nil || string(s) != `{"created_at":"`+want+`"}` {
				t.Errorf("json.Marshal of a struct = %s, %v", s, err)
			}
			m, err := json.Marshal(map[wiretime.Time]int{w: 1})
			if err != nil || string(m) != `{"`+want+`":1}` {
				t.Errorf("json.Marshal of a map key = %s, %v", m, err)
			}
			if !wireRE.MatchString(want) {
				t.Errorf("%q does not match %s", want, wireRE)
			}
		})
	}
}

// TestYearRange: years RFC 3339 cannot write fail to encode, as time.Time's
// do, instead of writing something no client reads.
func TestYearRange(t *testing.T) {
	for _, in := range []time.Time{
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("UTC-2", -2*3600)), // year 10000 in UTC
	} {
		w := wiretime.New(in)
		if b, err := w.MarshalText(); err != wiretime.ErrYearRange {
			t.Errorf("MarshalText(%v) = %q, %v; want ErrYearRange", in, b, err)
		}
		if b, err := json.Marshal(w); err == nil {
			t.Errorf("json.Marshal(%v) = %s, want an error", in, b)
		}
		if s := w.String(); s != in.String() {
			t.Errorf("String = %q, want time.Time's %q", s, in.String())
		}
	}
}

// TestDecode: any RFC 3339 time decodes, with or without a fraction, with
// any number of digits and any offset (a stored value may have its
// trailing zeros trimmed); null leaves the value as it was; anything else
// fails.
func TestDecode(t *testing.T) {
	want := time.Date(2026, 11, 21, 6, 45, 29, 677_250_000, time.UTC)
	for _, in := range []string{
		`"2026-11-21T06:45:29.677250Z"`,
		`"2026-11-21T06:45:29.67725Z"`,
		`"2026-11-21T06:45:29.677250000Z"`,
		`"2026-11-21T08:45:29.67725+02:00"`,
	} {
		var w wiretime.Time
		if err := json.Unmarshal([]byte(in), &w); err != nil || !w.Time().Equal(want) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", in, w, err, want)
		}
		var u wiretime.Time
		if err := u.UnmarshalText([]byte(in[1 : len(in)-1])); err != nil || !u.Equal(wiretime.New(want)) {
			t.Errorf("UnmarshalText(%s) = %v, %v; want %v", in, u, err, want)
		}
	}
	var v struct {
		At wiretime.Time `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(`{"created_at":"2026-11-21T10:04:05Z"}`), &v); err != nil ||
		!v.At.Equal(wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC))) {
		t.Errorf("no fraction: %v, %v", v.At, err)
	}
	if err := json.Unmarshal([]byte(`{"created_at":null}`), &v); err != nil || v.At.IsZero() {
		t.Errorf("null: %v, %v; want the value unchanged", v.At, err)
	}
	for _, in := range []string{`"2026-11-21"`, `"yesterday"`, `1763719445`, `"2026-11-21 10:04:05Z"`} {
		var w wiretime.Time
		if err := json.Unmarshal([]byte(in), &w); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", in, w)
		}
	}
}

// TestProperties: for any time of years 0 to 9999 in any location, the
// encoding matches the format, decodes to the time in UTC truncated to the
// microsecond, agrees with time.Format's, and string order is time order;
// the comparisons agree with time.Time's.
func TestProperties(t *testing.T) {
	genTime := rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()+14*3600,
			time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()-14*3600).Draw(t, "sec")
		ns := rapid.Int64Range(0, 999_999_999).Draw(t, "ns")
		off := rapid.IntRange(-14*60, 14*60).Draw(t, "offset minutes")
		return time.Unix(sec, ns).In(time.FixedZone("", off*60))
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := genTime.Draw(t, "a"), genTime.Draw(t, "b")
		wa, wb := wiretime.New(a), wiretime.New(b)
		ta, err := wa.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if !wireRE.Match(ta) {
			t.Fatalf("%v encodes as %q", a, ta)
		}
		if want := a.UTC().Format(wiretime.Layout); string(ta) != want {
			t.Fatalf("%v encodes as %q, time.Format gives %q", a, ta, want)
		}
		var back wiretime.Time
		if err := json.Unmarshal([]byte(`"`+string(ta)+`"`), &back); err != nil {
			t.Fatal(err)
		}
		if want := a.Truncate(time.Microsecond); !back.Time().Equal(want) {
			t.Fatalf("%q decodes to %v, want %v", ta, back, want)
		}
		tb, _ := wb.MarshalText()
		am, bm := a.Truncate(time.Microsecond), b.Truncate(time.Microsecond)
		if c := compareStrings(string(ta), string(tb)); c != am.Compare(bm) {
			t.Fatalf("%q vs %q: string order %d, time order %d", ta, tb, c, am.Compare(bm))
		}
		if wa.Compare(wb) != a.Compare(b) || wa.Before(wb) != a.Before(b) || wa.After(wb) != a.After(b) || wa.Equal(wb) != a.Equal(b) {
			t.Fatalf("comparisons of %v and %v disagree with time.Time's", a, b)
		}
		if !wa.Time().Equal(a) || wa.IsZero() {
			t.Fatalf("New(%v).Time() = %v", a, wa.Time())
		}
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
