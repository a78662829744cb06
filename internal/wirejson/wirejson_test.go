package wirejson_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/deployplane/deployplane/internal/wirejson"
)

func TestTime(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*3600)
	for _, c := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), "2026-11-21T10:04:05.000000Z"},
		{time.Date(2026, 11, 21, 10, 4, 5, 400_000_000, time.UTC), "2026-11-21T10:04:05.400000Z"},
		{time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC), "2026-11-21T10:04:05.123456Z"},
		{time.Date(2026, 11, 21, 10, 4, 5, 999_999_999, time.UTC), "2026-11-21T10:04:05.999999Z"}, // truncated, not rounded
		{time.Date(2026, 11, 22, 1, 0, 0, 1_000, plus2), "2026-11-21T23:00:00.000001Z"},           // converted to UTC
		{time.Time{}, "0001-01-01T00:00:00.000000Z"},
	} {
		wt := wirejson.Time(c.in)
		b, err := json.Marshal(&struct {
			At *wirejson.Time `json:"at"`
		}{&wt})
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		if got, want := string(b), `{"at":"`+c.want+`"}`; got != want {
			t.Errorf("%v encodes as %s, want %s", c.in, got, want)
		}
		var back struct{ At time.Time }
		if err := json.Unmarshal(b, &back); err != nil || !back.At.Equal(c.in.Truncate(time.Microsecond)) {
			t.Errorf("%s decodes as %v (%v), want %v", b, back.At, err, c.in.Truncate(time.Microsecond))
		}
	}
	wt := wirejson.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := wt.MarshalText(); !errors.Is(err, wirejson.ErrYearRange) {
		t.Errorf("year 10000: err = %v, want ErrYearRange", err)
	}
}

func TestAppendMembers(t *testing.T) {
	for _, c := range []struct{ obj, more, want string }{
		{`{"a":1}`, `{"b":2,"c":3}`, `{"a":1,"b":2,"c":3}`},
		{`{"a":1}`, `{}`, `{"a":1}`},
		{`{}`, `{"b":2}`, `{"b":2}`},
		{`{}`, `{}`, `{}`},
	} {
		if got := string(wirejson.AppendMembers([]byte(c.obj), []byte(c.more))); got != c.want {
			t.Errorf("AppendMembers(%s, %s) = %s, want %s", c.obj, c.more, got, c.want)
		}
	}
}
