package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/deployplane/deployplane/internal/seal"
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
