// Package seal encrypts secrets at rest with AES-256-GCM, for the domain
// packages that store them (oauthflow's client secrets, verifiers and
// tokens; controlplane's deployment and revision secrets). One 32-byte key
// serves both.
//
// A sealed value is a version byte (Version), a fresh random 96-bit nonce,
// then the ciphertext and tag. The additional data binds a sealed value to
// the record it belongs to (its tenant and identity), so a value copied
// under another record fails to open. The version byte lets a later build
// tell a value sealed under a second key (key rotation) from one sealed
// under the first.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
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
