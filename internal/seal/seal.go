// Package seal encrypts secrets at rest with AES-256-GCM, for the domain
// packages that store them (oauthflow's client secrets, verifiers and
// tokens; controlplane's deployment and revision secrets). One 32-byte key
// serves both.
//
// A sealed value is a version byte (Version), a fresh random 96-bit nonce,
// then the ciphertext and tag. The additional data binds a sealed value to
// the record it belongs to (its tenant and identity), so a value copied
// under another record fails to open. The version byte leaves room to
// tell a value sealed under a second key (key rotation) from one sealed
// under the first.
package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/store"
)

// Version prefixes every sealed value.
const Version = 1

// KeySize is the key length New takes: AES-256.
const KeySize = 32

// ErrOpen is the error of Open for a value that does not open: sealed
// under another key, bound to another record, or damaged.
var ErrOpen = errors.New("cannot decrypt a stored secret (wrong secret key, or a record moved between keys)")

// Sealer seals and opens values with one key. It is safe for concurrent
// use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key must be %d bytes (AES-256), got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext bound to aad, the identity of the record that
// holds it.
func (s *Sealer) Seal(plaintext []byte, aad string) []byte {
	out := make([]byte, 1, 1+len(plaintext)+s.aead.Overhead())
	out[0] = Version
	return s.aead.Seal(out, nil, plaintext, []byte(aad))
}

// Open decrypts a value Seal gave for the same aad, or returns ErrOpen.
func (s *Sealer) Open(sealed []byte, aad string) ([]byte, error) {
	if len(sealed) < 1 || sealed[0] != Version {
		return nil, ErrOpen
	}
	plain, err := s.aead.Open(nil, nil, sealed[1:], []byte(aad))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// The record that tells which key sealed a store's secrets: a fixed text
// sealed under that key, written by the first Verify with a key.
const (
	checkCollection = "secretkey"
	checkKey        = "check"
	checkText       = "deployplane secret key check"
	checkAAD        = "secretkey/check"
)

// ErrWrongKey is returned by Verify when the store's secrets were sealed
// under another key.
var ErrWrongKey = errors.New("the secret key is not the one that sealed this store's secrets")

// ErrNoKey is returned by Verify when the store's secrets are sealed and
// no key was given.
var ErrNoKey = errors.New("this store's secrets are sealed, and no secret key was given")

// Verify checks key against the check value kept in st: nil when it opens
// it, ErrWrongKey when it does not, ErrNoKey for a nil key and a store
// that has one. A store without a check value gets one sealed under key
// (none for a nil key), so the first key used with a store is the one
// every later start is held to. Several processes starting at once with
// different keys agree: one writes the value, the others check theirs
// against it.
func Verify(ctx context.Context, st store.Store, key []byte) error {
	var s *Sealer
	if len(key) > 0 {
		var err error
		if s, err = New(key); err != nil {
			return err
		}
	}
	return st.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Get(checkCollection, checkKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if s == nil {
				return nil
			}
			return tx.Create(checkCollection, checkKey, s.Seal([]byte(checkText), checkAAD))
		case err != nil:
			return err
		case s == nil:
			return ErrNoKey
		}
		if plain, err := s.Open(b, checkAAD); err != nil || string(plain) != checkText {
			return ErrWrongKey
		}
		return nil
	})
}
