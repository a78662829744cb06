package controlplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/store"
)

// The compact key encoding of the per-deployment collections (records.go
// describes the layout). Keys are bytes, which every store accepts
// (storepg keeps them as bytea); each part delimits itself, so no
// separator is needed and no part's encoding is a prefix of another's:
//
//   - a tenant is its tenant prefix: the number cp_tenants assigned it,
//     in one byte 0x01..0x17 (numbers 1-23) or a byte 0x18..0x1f saying how
//     many big-endian bytes (1-8) of number follow. A key that starts
//     with a printable byte (>= '-') is of the text layout (the tenant's
//     name first): CheckLayout refuses a store that holds one. Tenant prefix "\x00" is never assigned and names an empty
//     tenant.
//   - an id is 0x01 and its 16 bytes when it is a canonical lowercase UUID
//     (what Options.NewID returns), else 0x02, its length as a uvarint and
//     its bytes.
//   - a time is 8 big-endian bytes of its Unix microseconds with the sign
//     bit flipped, so byte order is time order.
const (
	idUUID  = 0x01
	idOther = 0x02

	// tenantNone is the prefix of a tenant that has none yet: it names
	// nothing, so reads of a tenant never written find nothing.
	tenantNone = "\x00"
)

// colTenants holds the tenant prefixes: "t"+tenant -> prefix, "p"+prefix ->
// tenant, and "#" -> the last number assigned. A prefix is assigned once,
// in the Update that first writes the tenant's keys, and never changes.
const colTenants = "cp_tenants"

// encTenantNum encodes tenant number n (>= 1) as a tenant prefix.
func encTenantNum(n uint64) string {
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

// decTenantNum decodes a tenant prefix.
func decTenantNum(p string) uint64 {
	if len(p) == 1 {
		return uint64(p[0])
	}
	var b [8]byte
	copy(b[8-(len(p)-1):], p[1:])
	return binary.BigEndian.Uint64(b[:])
}

// encID encodes an id as a key part.
func encID(id string) string {
	if len(id) == 36 {
		if u, err := uuid.Parse(id); err == nil && u.String() == id {
			return string(append([]byte{idUUID}, u[:]...))
		}
	}
	b := binary.AppendUvarint([]byte{idOther}, uint64(len(id)))
	return string(append(b, id...))
}

// decID decodes the id key part at the start of k and returns it with the
// rest of k.
func decID(k string) (id, rest string, ok bool) {
	if k == "" {
		return "", "", false
	}
	switch k[0] {
	case idUUID:
		if len(k) < 17 {
			return "", "", false
		}
		u, _ := uuid.FromBytes([]byte(k[1:17]))
		return u.String(), k[17:], true
	case idOther:
		n, w := binary.Uvarint([]byte(k[1:min(len(k), 11)]))
		if w <= 0 || uint64(len(k)-1-w) < n {
			return "", "", false
		}
		return k[1+w : 1+w+int(n)], k[1+w+int(n):], true
	}
	return "", "", false
}

// encStr encodes a free-form string (an index value) as a key part: its
// length as a uvarint and its bytes.
func encStr(s string) string {
	return string(append(binary.AppendUvarint(nil, uint64(len(s))), s...))
}

// timeKey encodes t so that byte order is time order, in 8 bytes.
func timeKey(t time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMicro())^(1<<63))
	return string(b[:])
}

// tenantCache remembers tenant prefixes read from committed state (a View,
// or an Update once it has committed): the mapping never changes once
// assigned, so any replica may keep it. Prefixes read inside an Update are
// cached only after the Update has committed (eventStore), since a store
// may run the closure in a transaction that later rolls back; until then
// the Update's eventTx remembers them, so that an Update reads a tenant's
// prefix once. (Under PostgreSQL's serializable transactions, every read
// is a possible conflict: a create that reads nothing but what no other
// create writes commits without a retry.)
type tenantCache struct {
	byName   sync.Map // tenant -> prefix
	byPrefix sync.Map // prefix -> tenant
}

func (c *tenantCache) put(tenant, prefix string) {
	if c != nil {
		c.byName.Store(tenant, prefix)
		c.byPrefix.Store(prefix, tenant)
	}
}

// tenantPrefix returns the tenant's prefix, or tenantNone when it has
// none. r is a View's Reader when committed is true (what it reads may be
// cached).
func (c *tenantCache) tenantPrefix(r store.Reader, tenant string, committed bool) (string, error) {
	if c != nil {
		if p, ok := c.byName.Load(tenant); ok {
			return p.(string), nil
		}
	}
	b, err := r.Get(colTenants, "t"+tenant)
	if errors.Is(err, store.ErrNotFound) {
		return tenantNone, nil
	}
	if err != nil {
		return "", err
	}
	if committed {
		c.put(tenant, string(b))
	}
	return string(b), nil
}

// assignTenant returns the tenant's prefix, assigning the next one in tx
// when it has none.
func (c *tenantCache) assignTenant(tx store.Tx, tenant string) (string, error) {
	et, _ := tx.(*eventTx)
	if p, ok := et.prefix(tenant); ok {
		return p, nil
	}
	p, err := c.tenantPrefix(tx, tenant, false)
	if err != nil {
		return p, err
	}
	if p != tenantNone {
		et.notePrefix(tenant, p)
		return p, nil
	}
	var n uint64
	last, err := tx.Get(colTenants, "#")
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return "", err
	default:
		if n, err = strconv.ParseUint(string(last), 10, 64); err != nil {
			return "", fmt.Errorf("controlplane: malformed tenant counter %q", last)
		}
	}
	n++
	p = encTenantNum(n)
	if err := tx.Put(colTenants, "#", []byte(strconv.FormatUint(n, 10))); err != nil {
		return "", err
	}
	if err := tx.Create(colTenants, "t"+tenant, []byte(p)); err != nil {
		return "", err
	}
	if err := tx.Create(colTenants, "p"+p, []byte(tenant)); err != nil {
		return "", err
	}
	et.notePrefix(tenant, p)
	return p, nil
}

// tenantOf returns the tenant whose prefix is p.
func (c *tenantCache) tenantOf(r store.Reader, p string, committed bool) (string, error) {
	if c != nil {
		if t, ok := c.byPrefix.Load(p); ok {
			return t.(string), nil
		}
	}
	b, err := r.Get(colTenants, "p"+p)
	if err != nil {
		return "", fmt.Errorf("controlplane: tenant prefix %q: %w", p, err)
	}
	if committed {
		c.put(string(b), p)
	}
	return string(b), nil
}

// readTenant is tenantPrefix for a Reader that may be a View's or an
// Update's: it caches only what a View read.
func (cp *ControlPlane) readTenant(r store.Reader, tenant string) (string, error) {
	_, committed := r.(viewReader)
	return cp.tenants.tenantPrefix(r, tenant, committed)
}

// viewStore is the ControlPlane's store: it marks the Readers of Views,
// which read committed state, so that readTenant may cache what they read
// (some stores pass a View the same type as an Update's Tx).
type viewStore struct{ store.Store }

// viewReader is the Reader of a View.
type viewReader struct{ store.Reader }

func (s viewStore) View(ctx context.Context, fn func(store.Reader) error) error {
	return s.Store.View(ctx, func(r store.Reader) error { return fn(viewReader{r}) })
}

// writeTenant is assignTenant.
func (cp *ControlPlane) writeTenant(tx store.Tx, tenant string) (string, error) {
	return cp.tenants.assignTenant(tx, tenant)
}
