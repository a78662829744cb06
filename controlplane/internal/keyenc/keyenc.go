// Package keyenc is the compact key encoding of the control plane's
// per-deployment collections, and the tenant prefixes it starts with.
// Keys are bytes, which every store accepts (storepg keeps them as
// bytea); each part delimits itself, so no separator is needed and no
// part's encoding is a prefix of another's:
//
//   - a tenant is its tenant prefix: the number cp_tenants assigned it, in
//     one byte 0x01..0x17 (numbers 1-23) or a byte 0x18..0x1f saying how
//     many big-endian bytes (1-8) of number follow (TenantPrefix,
//     TenantLen). No prefix starts with 0x00 or with a byte from 0x20:
//     NoTenant ("\x00") names a tenant that has none yet, and a key that
//     starts with a printable byte is of another layout.
//   - an id is 0x01 and its 16 bytes when it is a canonical lowercase UUID,
//     else 0x02, its length as a uvarint and its bytes (ID, ParseID,
//     IDLen). UUIDs sort as their text.
//   - a time is 8 big-endian bytes of its Unix microseconds with the sign
//     bit flipped, so that byte order is time order (Time).
//   - a free-form string is its length as a uvarint and its bytes (Str).
//
// Tenants assigns the prefixes, in the Update that first writes a
// tenant's keys, and remembers them: a prefix never changes once
// assigned, so any replica may cache it, but only what it read from
// committed state. Views marks the Readers of a store's Views as reading
// committed state; a prefix read or assigned inside an Update is kept in
// the Update's Pending and cached by Commit once the Update has committed
// (a store may run the closure in a transaction that later rolls back).
// Under PostgreSQL's serializable transactions every read is a possible
// conflict, so an Update reads a tenant's prefix once.
//
// Storage:
//
//	cp_tenants  "t" tenant  -> prefix
//	cp_tenants  "p" prefix  -> tenant
//	cp_tenants  "#"         -> the last number assigned, in decimal
//
// What the keys of each collection are made of is the caller's.
package keyenc

import (
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/google/uuid"
)

// The first byte of an id part.
const (
	idUUID  = 0x01
	idOther = 0x02
)

// NoTenant is the prefix of a tenant that has none yet: it names nothing,
// so reads of a tenant never written find nothing.
const NoTenant = "\x00"

// TimeLen is the length of a time part.
const TimeLen = 8

// TenantPrefix encodes tenant number n (>= 1) as a tenant prefix.
func TenantPrefix(n uint64) string {
	if n < 0x18 {
		return string([]byte{byte(n)})
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	i := 0
	for i < 7 && b[i] == 0 {
		i++
	}
	return string(append([]byte{byte(0x17 + 8 - i)}, b[i:]...))
}

// TenantLen returns the length of the tenant prefix that k starts with,
// or 0 when k does not start with one.
func TenantLen(k string) int {
	if k == "" || k[0] == 0 || k[0] > 0x1f {
		return 0
	}
	if k[0] < 0x18 {
		return 1
	}
	n := 1 + int(k[0]-0x17)
	if len(k) < n {
		return 0
	}
	return n
}

// ID encodes an id as a key part.
func ID(id string) string {
	var b [40]byte // a UUID's part fits: the string is the one allocation
	return string(AppendID(b[:0], id))
}

// AppendID appends ID(id) to dst.
func AppendID(dst []byte, id string) []byte {
	if len(id) == 36 {
		if u, err := uuid.Parse(id); err == nil && isCanonical(&u, id) {
			return append(append(dst, idUUID), u[:]...)
		}
	}
	dst = binary.AppendUvarint(append(dst, idOther), uint64(len(id)))
	return append(dst, id...)
}

// isCanonical reports whether id is u's canonical text (u.String()).
func isCanonical(u *uuid.UUID, id string) bool {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:]) == id
}

// IDLen returns the length of the id part that k starts with, or 0 when
// k does not start with one.
func IDLen(k string) int {
	if k == "" {
		return 0
	}
	switch k[0] {
	case idUUID:
		if len(k) < 17 {
			return 0
		}
		return 17
	case idOther:
		n, w := binary.Uvarint([]byte(k[1:min(len(k), 11)]))
		if w <= 0 || uint64(len(k)-1-w) < n {
			return 0
		}
		return 1 + w + int(n)
	}
	return 0
}

// ParseID decodes the id part at the start of k and returns it with the
// rest of k.
func ParseID(k string) (id, rest string, ok bool) {
	n := IDLen(k)
	if n == 0 {
		return "", "", false
	}
	if k[0] == idUUID {
		u, _ := uuid.FromBytes([]byte(k[1:17]))
		return u.String(), k[17:], true
	}
	_, w := binary.Uvarint([]byte(k[1:min(len(k), 11)]))
	return k[1+w : n], k[n:], true
}

// Str encodes a free-form string (an index value) as a key part: its
// length as a uvarint and its bytes.
func Str(s string) string {
	return string(append(binary.AppendUvarint(nil, uint64(len(s))), s...))
}

// Time encodes t so that byte order is time order, in TimeLen bytes.
func Time(t time.Time) string {
	var b [TimeLen]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMicro())^(1<<63))
	return string(b[:])
}
