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

// isCanonical reports whether s is a UUID in the lowercase canonical form.
func isCanonical(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
