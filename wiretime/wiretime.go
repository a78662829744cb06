// Package wiretime is the timestamp of deployplane's wire types: a
// time.Time that encodes as fixed-width RFC 3339 in UTC with exactly six
// fractional digits (2026-11-21T10:04:05.123456Z), as wire contract section
// 1 shows and the hosted service writes.
//
// The created_at and updated_at fields of controlplane.Deployment,
// Revision and Listener and of oauthflow.Provider are a Time, so that
// json.Marshal of those types, of their pages, or of any struct of an
// embedder's that holds them, writes the wire format with no help: there is
// no MarshalJSON on the wire types and no mirror struct. Clients that parse
// with Python's datetime.fromisoformat (3 or 6 digits only before 3.11)
// read the format, and fixed-width timestamps sort as strings in time
// order.
//
// Encoding writes the time in UTC, truncated below the microsecond (the
// precision of the control plane's clock). Decoding accepts any RFC 3339
// time, with or without a fraction and with any offset, as time.Time does.
//
// Convert with New(t) (or Time(t)) and t.Time(); Add, IsZero, Equal,
// Before, After and Compare work as time.Time's do, so values compare without
// conversion (and go-cmp compares them through Equal).
package wiretime

import (
	"errors"
	"time"
)

// Layout is the wire's timestamp format, in time.Format's notation.
const Layout = "2006-01-02T15:04:05.000000Z"

// Time is a time.Time that encodes in Layout. The zero Time is time.Time's
// zero (and encodes as 0001-01-01T00:00:00.000000Z).
type Time time.Time

// ErrYearRange is returned by the encoding methods for a time whose UTC
// year is outside [0,9999], which RFC 3339 cannot write (time.Time's own
// MarshalJSON fails the same way).
var ErrYearRange = errors.New("wiretime: timestamp year outside of range [0,9999]")

// New returns t as a Time. It keeps t as it is (location and nanoseconds);
// only the encoding converts to UTC and truncates.
func New(t time.Time) Time { return Time(t) }

// Time returns t as a time.Time.
func (t Time) Time() time.Time { return time.Time(t) }

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return Time(time.Time(t).Add(d)) }

// IsZero reports whether t is the zero time.
func (t Time) IsZero() bool { return time.Time(t).IsZero() }

// Equal reports whether t and u are the same instant.
func (t Time) Equal(u Time) bool { return time.Time(t).Equal(time.Time(u)) }

// Before reports whether t is before u.
func (t Time) Before(u Time) bool { return time.Time(t).Before(time.Time(u)) }

// After reports whether t is after u.
func (t Time) After(u Time) bool { return time.Time(t).After(time.Time(u)) }

// Compare returns -1, 0 or +1 as t is before, the same instant as, or
// after u.
func (t Time) Compare(u Time) int { return time.Time(t).Compare(time.Time(u)) }

// String returns t in Layout, or as time.Time's String when its year is
// out of Layout's range.
func (t Time) String() string {
	b, err := t.AppendText(make([]byte, 0, len(Layout)))
	if err != nil {
		return time.Time(t).String()
	}
	return string(b)
}

// AppendText appends t in Layout to b: in UTC, truncated below the
// microsecond.
func (t Time) AppendText(b []byte) ([]byte, error) {
	u := time.Time(t).UTC()
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		return b, ErrYearRange
	}
	hour, minute, sec := u.Clock()
	b = appendInt(b, year, 4)
	b = append(b, '-')
	b = appendInt(b, int(month), 2)
	b = append(b, '-')
	b = appendInt(b, day, 2)
	b = append(b, 'T')
	b = appendInt(b, hour, 2)
	b = append(b, ':')
	b = appendInt(b, minute, 2)
	b = append(b, ':')
	b = appendInt(b, sec, 2)
	b = append(b, '.')
	b = appendInt(b, u.Nanosecond()/1000, 6)
	return append(b, 'Z'), nil
}

// appendInt appends the n-digit decimal form of v (0 <= v < 10^n).
func appendInt(b []byte, v, n int) []byte {
	b = append(b, "000000"[:n]...)
	for i := len(b) - 1; v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// MarshalText returns t in Layout.
func (t Time) MarshalText() ([]byte, error) {
	b, err := t.AppendText(make([]byte, 0, len(Layout)))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// MarshalJSON returns t in Layout as a JSON string.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 1, len(Layout)+2)
	b[0] = '"'
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// UnmarshalText reads an RFC 3339 time, as time.Time does.
func (t *Time) UnmarshalText(b []byte) error { return (*time.Time)(t).UnmarshalText(b) }

// UnmarshalJSON reads a JSON string holding an RFC 3339 time, as time.Time
// does (null leaves t unchanged).
func (t *Time) UnmarshalJSON(b []byte) error { return (*time.Time)(t).UnmarshalJSON(b) }
