package eventlog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzEventRecord: decode never panics, and what encode writes decodes to
// the same event.
func FuzzEventRecord(f *testing.F) {
	f.Add([]byte("1\ndeployment\ncreated\nd\n\n5\n{\"v\":1}"), "revision", "status", "d", "r", int64(-3), []byte("{}\n\nx"))
	f.Add([]byte("2\n\n\n\n\n\n"), "", "", "", "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, raw []byte, kind, change, dep, rev string, at int64, payload []byte) {
		_, _ = decode(raw)
		for _, s := range []string{kind, change, dep, rev} {
			if strings.Contains(s, "\n") {
				return // fields never hold a line end (kinds, changes, ids)
			}
		}
		e := Event{Kind: kind, Change: change, Deployment: dep, Revision: rev, At: time.UnixMicro(at), Payload: payload}
		got, err := decode(encode(&e))
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != kind || got.Change != change || got.Deployment != dep || got.Revision != rev || got.At.UnixMicro() != at ||
			!bytes.Equal(got.Payload, payload) {
			t.Fatalf("round trip: %+v, want %+v", got, e)
		}
	})
}
