package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/store"
	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// model is the reference the Model check compares a store with: collection
// -> key -> value. Its methods implement store.Tx from the contract alone.
type model map[string]map[string]string

func (m model) clone() model {
	out := make(model, len(m))
	for c, recs := range m {
		out[c] = maps.Clone(recs)
	}
	return out
}

func (m model) Get(collection, key string) ([]byte, error) {
	if err := store.CheckKey(collection, key); err != nil {
		return nil, err
	}
	v, ok := m[collection][key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return []byte(v), nil
}

func (m model) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	if err := store.CheckCollection(collection); err != nil {
		return err
	}
	var o store.ScanOptions
	if opts != nil {
		o = *opts
	}
	var keys []string
	for k := range m[collection] {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if o.Start != "" && (!o.Reverse && k < o.Start || o.Reverse && k > o.Start) {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if o.Reverse {
			return cmp.Compare(b, a)
		}
		return cmp.Compare(a, b)
	})
	for _, k := range keys {
		more, err := fn(k, []byte(m[collection][k]))
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (m model) Create(collection, key string, value []byte) error {
	if _, err := m.Get(collection, key); !errors.Is(err, store.ErrNotFound) {
		if err == nil {
			return store.ErrAlreadyExists
		}
		return err
	}
	return m.Put(collection, key, value)
}

func (m model) Put(collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	if m[collection] == nil {
		m[collection] = map[string]string{}
	}
	m[collection][key] = string(value)
	return nil
}

func (m model) Delete(collection, key string) error {
	if _, err := m.Get(collection, key); err != nil {
		return err
	}
	delete(m[collection], key)
	return nil
}

// op is one random operation of the Model check.
type op struct {
	Kind       string // get, scan, create, put, delete
	Collection string
	Key        string // also the scan's prefix
	Value      []byte
	Opts       store.ScanOptions
	Limit      int // scan: stop after Limit records; 0 means no limit
}

func (o op) String() string {
	switch o.Kind {
	case "get", "delete":
		return fmt.Sprintf("%s(%q, %q)", o.Kind, o.Collection, o.Key)
	case "scan":
		return fmt.Sprintf("scan(%q, prefix %q, start %q, reverse %v, limit %d)", o.Collection, o.Key, o.Opts.Start, o.Opts.Reverse, o.Limit)
	default:
		return fmt.Sprintf("%s(%q, %q, %q)", o.Kind, o.Collection, o.Key, o.Value)
	}
}

// outcome is what one op observed; the store's must equal the model's.
type outcome struct {
	Op      string
	Err     string
	Value   string
	Entries []entry
}

// errClass names the sentinel err wraps, so that outcomes compare across
// stores whose messages differ.
func errClass(err error) string {
	for _, s := range []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrInvalidKey, store.ErrClosed} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return ""
}

// apply runs o against r (a store.Tx for writes) and records what it saw.
func (o op) apply(r store.Reader) outcome {
	out := outcome{Op: o.String()}
	var err error
	switch o.Kind {
	case "get":
		var v []byte
		v, err = r.Get(o.Collection, o.Key)
		out.Value = string(v)
	case "scan":
		opts := o.Opts
		err = r.Scan(o.Collection, o.Key, &opts, func(k string, v []byte) (bool, error) {
			out.Entries = append(out.Entries, entry{k, string(v)})
			return o.Limit == 0 || len(out.Entries) < o.Limit, nil
		})
	case "create":
		err = r.(store.Tx).Create(o.Collection, o.Key, o.Value)
	case "put":
		err = r.(store.Tx).Put(o.Collection, o.Key, o.Value)
	case "delete":
		err = r.(store.Tx).Delete(o.Collection, o.Key)
	}
	out.Err = errClass(err)
	return out
}

var (
	modelCollections = []string{"c", "c2", "\xff"}
	// A small alphabet makes keys collide, share prefixes and straddle 0x7f.
	modelAlphabet = []byte{0x00, 'a', 'b', 0x7f, 0x80, 0xff}
)

func modelString(minLen, maxLen int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(rapid.SampledFrom(modelAlphabet), minLen, maxLen).Draw(t, "bytes"))
	})
}

// opGen draws ops; writes selects whether Create, Put and Delete are drawn.
func opGen(writes bool) *rapid.Generator[op] {
	kinds := []string{"get", "scan"}
	if writes {
		kinds = append(kinds, "create", "put", "put", "delete")
	}
	return rapid.Custom(func(t *rapid.T) op {
		o := op{
			Kind:       rapid.SampledFrom(kinds).Draw(t, "kind"),
			Collection: rapid.SampledFrom(modelCollections).Draw(t, "collection"),
		}
		switch o.Kind {
		case "scan":
			o.Key = modelString(0, 2).Draw(t, "prefix")
			o.Opts.Start = modelString(0, 3).Draw(t, "start")
			o.Opts.Reverse = rapid.Bool().Draw(t, "reverse")
			o.Limit = rapid.IntRange(0, 4).Draw(t, "limit")
		default:
			o.Key = modelString(1, 3).Draw(t, "key")
			o.Value = rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "value")
		}
		return o
	})
}

// rollbackPanic is the value the Model check's closures panic with.
var rollbackPanic = &panicValue{"model: roll back by panic"}

func testModel(t *testing.T, h Harness) {
	errRollback := &customError{"model: roll back"}
	rapid.Check(t, func(rt *rapid.T) {
		s := h.Open(t)
		if s == nil {
			rt.Fatal("storetest: Harness.Open returned nil")
		}
		defer func() {
			if err := s.Close(); err != nil {
				rt.Errorf("Close: %v", err)
			}
		}()
		m := model{}
		actions := map[string]func(*rapid.T){
			// update runs random ops in one Update that commits, returns an
			// error after some of them, or panics after some of them.
			"update": func(rt *rapid.T) {
				ops := rapid.SliceOfN(opGen(true), 1, 8).Draw(rt, "ops")
				end := rapid.SampledFrom([]string{"commit", "commit", "error", "panic"}).Draw(rt, "end")
				n := len(ops)
				if end != "commit" {
					n = rapid.IntRange(0, len(ops)).Draw(rt, "stop after")
				}
				work := m.clone()
				var want []outcome
				for _, o := range ops[:n] {
					want = append(want, o.apply(work))
				}
				var got []outcome
				fn := func(tx store.Tx) error {
					got = nil // the closure may run more than once
					for _, o := range ops[:n] {
						got = append(got, o.apply(tx))
					}
					switch end {
					case "error":
						return errRollback
					case "panic":
						panic(rollbackPanic)
					}
					return nil
				}
				recovered, err := updatePanics(s, t, fn)
				switch {
				case end == "commit" && (err != nil || recovered != nil):
					rt.Fatalf("Update = %v, panic %v; want nil", err, recovered)
				case end == "error" && (err != errRollback || recovered != nil):
					rt.Fatalf("Update = %v, panic %v; want the closure's error", err, recovered)
				case end == "panic" && recovered != rollbackPanic:
					rt.Fatalf("Update re-raised %v (error %v); want the closure's panic", recovered, err)
				}
				if diff := gocmp.Diff(want, got); diff != "" {
					rt.Fatalf("ops inside the Update (-model +store):\n%s", diff)
				}
				if end == "commit" {
					m = work
				}
			},
			// view runs random reads in one View.
			"view": func(rt *rapid.T) {
				ops := rapid.SliceOfN(opGen(false), 1, 4).Draw(rt, "ops")
				var want, got []outcome
				for _, o := range ops {
					want = append(want, o.apply(m))
				}
				if err := s.View(t.Context(), func(r store.Reader) error {
					got = nil
					for _, o := range ops {
						got = append(got, o.apply(r))
					}
					return nil
				}); err != nil {
					rt.Fatalf("View: %v", err)
				}
				if diff := gocmp.Diff(want, got); diff != "" {
					rt.Fatalf("ops inside the View (-model +store):\n%s", diff)
				}
			},
			// "" runs after every action: every collection matches the model.
			"": func(rt *rapid.T) {
				for _, c := range modelCollections {
					var want []entry
					for _, k := range slices.Sorted(maps.Keys(m[c])) {
						want = append(want, entry{k, m[c][k]})
					}
					var got []entry
					if err := s.View(t.Context(), func(r store.Reader) error {
						got = nil
						return r.Scan(c, "", nil, func(k string, v []byte) (bool, error) {
							got = append(got, entry{k, string(v)})
							return true, nil
						})
					}); err != nil {
						rt.Fatalf("View: %v", err)
					}
					if diff := gocmp.Diff(want, got); diff != "" {
						rt.Fatalf("collection %q (-model +store):\n%s", c, diff)
					}
				}
			},
		}
		if h.Reopen != nil {
			actions["reopen"] = func(rt *rapid.T) {
				if err := s.Close(); err != nil {
					rt.Fatalf("Close: %v", err)
				}
				s = h.Reopen(t, s)
				if s == nil {
					rt.Fatal("storetest: Harness.Reopen returned nil")
				}
			}
		}
		rt.Repeat(actions)
	})
}
