// Package uuidtext canonicalizes UUIDs given as text (ids in paths, tenant
// ids in headers) without allocating when they are canonical already,
// which is nearly always: it is on the path of every API request.
package uuidtext

import "github.com/google/uuid"

// Canonical returns the lowercase canonical form (8-4-4-4-12 hex digits)
// of the UUID s, and whether s is one: what parsing with
// github.com/google/uuid and formatting gives, for strings of exactly 36
// characters. It returns s itself, with no copy, when s is canonical.
func Canonical(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	if isCanonical(s) {
		return s, true
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// isCanonical reports whether s, 36 bytes long, is a UUID in the
// lowercase canonical form.
func isCanonical(s string) bool {
	if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	return notHex(s[0:8])|notHex(s[9:13])|notHex(s[14:18])|notHex(s[19:23])|notHex(s[24:36]) == 0
}

// notHex is 0 when every byte of s is a lowercase hex digit.
func notHex(s string) byte {
	var bad byte
	for i := 0; i < len(s); i++ {
		bad |= notHexDigit[s[i]]
	}
	return bad
}

// notHexDigit is 1 for the bytes that are not lowercase hex digits.
var notHexDigit = func() (t [256]byte) {
	for i := range t {
		if !('0' <= i && i <= '9' || 'a' <= i && i <= 'f') {
			t[i] = 1
		}
	}
	return t
}()
