package keyenc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/deployplane/deployplane/store"
)

// ColTenants is the store collection of the tenant prefixes.
const ColTenants = "cp_tenants"

// Tenants assigns tenant prefixes and caches those read from committed
// state. Its zero value is ready to use; a nil *Tenants caches nothing
// (every call reads the store).
type Tenants struct {
	byName   sync.Map // tenant -> prefix
	byPrefix sync.Map // prefix -> tenant
}

func (c *Tenants) put(tenant, prefix string) {
	if c != nil {
		c.byName.Store(tenant, prefix)
		c.byPrefix.Store(prefix, tenant)
	}
}

// Pending is the tenant prefixes one Update read or assigned through
// Assign, which answers them again without a read; Commit caches them
// once the Update has committed. Its zero value is empty; a nil *Pending
// remembers nothing. Start each run of an Update's closure with a new one.
type Pending struct {
	m map[string]string // tenant -> prefix
}

func (p *Pending) get(tenant string) (string, bool) {
	if p == nil {
		return "", false
	}
	prefix, ok := p.m[tenant]
	return prefix, ok
}

func (p *Pending) note(tenant, prefix string) {
	if p == nil {
		return
	}
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[tenant] = prefix
}

// Commit caches the prefixes of p, whose Update has committed.
func (c *Tenants) Commit(p *Pending) {
	if p == nil {
		return
	}
	for t, prefix := range p.m {
		c.put(t, prefix)
	}
}

// Views returns st with the Readers of its Views marked as reading
// committed state, so that Prefix caches what they read (some stores pass
// a View the same type as an Update's Tx).
func Views(st store.Store) store.Store { return viewStore{st} }

type viewStore struct{ store.Store }

// viewReader is the Reader of a View of a viewStore.
type viewReader struct{ store.Reader }

func (s viewStore) View(ctx context.Context, fn func(store.Reader) error) error {
	return s.Store.View(ctx, func(r store.Reader) error { return fn(viewReader{r}) })
}

// Cached returns the tenant's prefix when it is cached, without a read.
func (c *Tenants) Cached(tenant string) (string, bool) {
	if c == nil {
		return "", false
	}
	p, ok := c.byName.Load(tenant)
	if !ok {
		return "", false
	}
	return p.(string), true
}

// Prefix returns the tenant's prefix, or NoTenant when it has none. What
// it reads is cached when r is the Reader of a View of a store Views
// made.
func (c *Tenants) Prefix(r store.Reader, tenant string) (string, error) {
	if c != nil {
		if p, ok := c.byName.Load(tenant); ok {
			return p.(string), nil
		}
	}
	b, err := r.Get(ColTenants, "t"+tenant)
	if errors.Is(err, store.ErrNotFound) {
		return NoTenant, nil
	}
	if err != nil {
		return "", err
	}
	if _, committed := r.(viewReader); committed {
		c.put(tenant, string(b))
	}
	return string(b), nil
}

// Assign returns the tenant's prefix, assigning the next number in tx
// when it has none. The prefix is kept in p, the Update's (nil: none).
func (c *Tenants) Assign(tx store.Tx, p *Pending, tenant string) (string, error) {
	if prefix, ok := p.get(tenant); ok {
		return prefix, nil
	}
	prefix, err := c.Prefix(tx, tenant)
	if err != nil {
		return prefix, err
	}
	if prefix != NoTenant {
		p.note(tenant, prefix)
		return prefix, nil
	}
	var n uint64
	last, err := tx.Get(ColTenants, "#")
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
	prefix = TenantPrefix(n)
	if err := tx.Put(ColTenants, "#", []byte(strconv.FormatUint(n, 10))); err != nil {
		return "", err
	}
	if err := tx.Create(ColTenants, "t"+tenant, []byte(prefix)); err != nil {
		return "", err
	}
	if err := tx.Create(ColTenants, "p"+prefix, []byte(tenant)); err != nil {
		return "", err
	}
	p.note(tenant, prefix)
	return prefix, nil
}

// Tenant returns the tenant whose prefix is p, read in a View of st when
// it is not cached.
func (c *Tenants) Tenant(ctx context.Context, st store.Store, p string) (string, error) {
	if c != nil {
		if t, ok := c.byPrefix.Load(p); ok {
			return t.(string), nil
		}
	}
	var t string
	err := st.View(ctx, func(r store.Reader) error {
		b, err := r.Get(ColTenants, "p"+p)
		if err != nil {
			return fmt.Errorf("controlplane: tenant prefix %q: %w", p, err)
		}
		t = string(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	c.put(t, p)
	return t, nil
}
