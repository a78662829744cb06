package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/deployplane/deployplane/internal/seal"
	"github.com/deployplane/deployplane/storemem"
)

// TestSeal: a value opens with its key and aad only; the sealed bytes start
// with the version and do not hold the plaintext; keys must be 32 bytes.
func TestSeal(t *testing.T) {
	s, err := seal.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.New(bytes.Repeat([]byte{8}, 32))
	plain := []byte("distinctive-secret-value")
	sealed := s.Seal(plain, "t1/a")
	if sealed[0] != seal.Version || bytes.Contains(sealed, plain) {
		t.Fatalf("sealed = %x", sealed)
	}
	if got, err := s.Open(sealed, "t1/a"); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other aad":     func() ([]byte, error) { return s.Open(sealed, "t2/a") },
		"other key":     func() ([]byte, error) { return other.Open(sealed, "t1/a") },
		"other version": func() ([]byte, error) { return s.Open(append([]byte{2}, sealed[1:]...), "t1/a") },
		"empty":         func() ([]byte, error) { return s.Open(nil, "t1/a") },
	} {
		if _, err := open(); !errors.Is(err, seal.ErrOpen) {
			t.Errorf("%s: Open = %v, want ErrOpen", name, err)
		}
	}
	if _, err := seal.New(make([]byte, 16)); err == nil {
		t.Error("New accepted a 16-byte key")
	}
}

// TestVerify: the first key used with a store is the one it is held to;
// another key, or none, is refused; a store never given a key takes any.
func TestVerify(t *testing.T) {
	ctx := t.Context()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	st := storemem.New()
	defer st.Close()
	if err := seal.Verify(ctx, st, nil); err != nil {
		t.Fatalf("no key, new store: %v", err)
	}
	if err := seal.Verify(ctx, st, k1); err != nil {
		t.Fatalf("first key: %v", err)
	}
	if err := seal.Verify(ctx, st, k1); err != nil {
		t.Fatalf("same key again: %v", err)
	}
	if err := seal.Verify(ctx, st, k2); !errors.Is(err, seal.ErrWrongKey) {
		t.Fatalf("another key: %v, want ErrWrongKey", err)
	}
	if err := seal.Verify(ctx, st, nil); !errors.Is(err, seal.ErrNoKey) {
		t.Fatalf("no key, sealed store: %v, want ErrNoKey", err)
	}
	if err := seal.Verify(ctx, st, []byte("short")); err == nil || errors.Is(err, seal.ErrWrongKey) {
		t.Fatalf("a key of the wrong size: %v", err)
	}
}
