// Package wirejson holds what the two domains, controlplane and oauthflow,
// share of the wire's JSON shape: the timestamp format of the wire contract
// (section 1) and the joining of a wire object with a stored record's extra
// members. It knows nothing of deployments or providers, so the domains stay
// independent of each other.
package wirejson

import (
	"errors"
	"time"
)

// Layout is the wire's timestamp format: RFC 3339 in UTC, always six
// fractional digits and a Z (2026-11-21T10:04:05.123456Z), as the hosted
// service writes it. Python's datetime.fromisoformat before 3.11 accepts
// only 3 or 6 fractional digits, and fixed-width timestamps sort as strings.
const Layout = "2006-01-02T15:04:05.000000Z"

// Time is a time.Time that encodes in Layout. Wire types keep time.Time
// fields and encode through a mirror struct whose timestamps are Time.
// Decoding needs no counterpart: time.Time reads any RFC 3339 time, with or
// without a fraction.
type Time time.Time

// ErrYearRange is returned for a time whose UTC year is outside
// [0,9999], which RFC 3339 cannot write (time.Time fails the same way).
var ErrYearRange = errors.New("wirejson: timestamp year outside of range [0,9999]")

// MarshalText formats t in UTC in Layout, truncating below the microsecond.
// The receiver is a pointer so that encoding/json need not copy the value
// into an interface: mirrors are encoded through a pointer, so their fields
// are addressable.
func (t *Time) MarshalText() ([]byte, error) {
	u := time.Time(*t).UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return nil, ErrYearRange
	}
	return u.AppendFormat(make([]byte, 0, len(Layout)), Layout), nil
}

// AppendMembers returns the JSON object obj with the members of the JSON
// object more added after its own (obj's bytes may be reused). Stored
// records that embed a wire type use it: the wire type's MarshalJSON would
// otherwise be promoted to the record and drop the record's own fields.
func AppendMembers(obj, more []byte) []byte {
	if len(more) <= 2 { // {}
		return obj
	}
	if len(obj) <= 2 {
		return more
	}
	obj = append(obj[:len(obj)-1], ',')
	return append(obj, more[1:]...)
}
