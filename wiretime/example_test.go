package wiretime_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/wiretime"
)

// A wire type's timestamp field encodes in the wire format with a plain
// json.Marshal, and decodes from any RFC 3339 time.
func Example() {
	type event struct {
		Name      string        `json:"name"`
		CreatedAt wiretime.Time `json:"created_at"`
	}
	at := time.Date(2026, 11, 21, 12, 4, 5, 120_000_000, time.FixedZone("UTC+2", 2*3600))
	b, _ := json.Marshal(event{Name: "deployed", CreatedAt: wiretime.New(at)})
	fmt.Println(string(b))

	var e event
	_ = json.Unmarshal([]byte(`{"name":"old","created_at":"2026-11-21T10:04:05Z"}`), &e)
	fmt.Println(e.CreatedAt, e.CreatedAt.Time().Before(at))
	// Output:
	// {"name":"deployed","created_at":"2026-11-21T10:04:05.120000Z"}
	// 2026-11-21T10:04:05.000000Z true
}
