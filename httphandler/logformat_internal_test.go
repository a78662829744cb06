package httphandler

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// logString draws strings of the bytes and runes that quoting treats
// apart: spaces, '=', quotes, backslashes, control bytes, invalid UTF-8,
// U+2028, U+FFFD, non-printing and non-ASCII runes.
func logString() *rapid.Generator[string] {
	pieces := []string{"a", "Z", "0", "/", "-", "_", ".", " ", "=", `"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
		"<", ">", "&", "\xff", "\xc3", "é", "µ", "\u2028", "\u2029", "\ufffd", "\u00a0", "\u200b", "日本", "%20", "?"}
	return rapid.Custom(func(t *rapid.T) string {
		var b []byte
		for _, p := range rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 12).Draw(t, "pieces") {
			b = append(b, p...)
		}
		return string(b)
	})
}

// TestRequestLineIsSlogs: the request log's own encoders write the very
// line slog.NewJSONHandler and slog.NewTextHandler write of the same
// record, for any method, path, id and tenant, status, duration, and time
// of the years 1970 to 9998 in any zone (slog writes an error for years
// beyond 9999, which the clock of a request does not reach).
func TestRequestLineIsSlogs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		zones := []*time.Location{time.UTC, time.FixedZone("", -5*3600-30*60), time.FixedZone("X", 14*3600)}
		r := requestRecord{
			time: time.Unix(rapid.Int64Range(0, 253370764799).Draw(rt, "unix"), rapid.Int64Range(0, 999999999).Draw(rt, "nanos")).
				In(rapid.SampledFrom(zones).Draw(rt, "zone")),
			duration: time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "duration")),
			status:   rapid.IntRange(0, 599).Draw(rt, "status"),
			method:   rapid.OneOf(rapid.SampledFrom([]string{"GET", "POST", "PATCH"}), logString()).Draw(rt, "method"),
			path:     logString().Draw(rt, "path"),
			id:       logString().Draw(rt, "id"),
			tenant:   logString().Draw(rt, "tenant"),
		}
		for _, c := range []struct {
			name string
			mine []byte
			h    func(*bytes.Buffer) slog.Handler
		}{
			{"json", r.appendJSON(nil), func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
			{"text", r.appendText(nil), func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		} {
			var want bytes.Buffer
			if err := c.h(&want).Handle(context.Background(), r.slogRecord()); err != nil {
				rt.Fatal(err)
			}
			if !bytes.Equal(c.mine, want.Bytes()) {
				rt.Fatalf("%s:\n got %q\nwant %q", c.name, c.mine, want.Bytes())
			}
		}
	})
}

// BenchmarkRequestLine: the request log's JSON line against slog's JSON
// handler writing the same record.
func BenchmarkRequestLine(b *testing.B) {
	r := requestRecord{time: time.Now(), duration: 12345 * time.Nanosecond, status: 200, method: "GET",
		path: "/v2/deployments/0194f0a2-1c3b-7e3d-9a1b-2b3c4d5e6f70", id: "a1b2c3d4e5f6-12345",
		tenant: "0194f0a2-1c3b-7e3d-9a1b-2b3c4d5e6f70"}
	b.Run("slog", func(b *testing.B) {
		var buf bytes.Buffer
		h := slog.NewJSONHandler(&buf, nil)
		for b.Loop() {
			buf.Reset()
			_ = h.Handle(context.Background(), r.slogRecord())
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		var line []byte
		for b.Loop() {
			line = r.appendJSON(line[:0])
		}
	})
}
