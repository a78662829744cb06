package oauthflow

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// Secret is a string that must not be logged: client secrets and OAuth
// tokens. Every fmt verb prints it as [REDACTED], and so does log/slog.
// JSON encoding keeps the value, because the token in an Authenticate
// answer is meant for the client; string(s) reads it.
type Secret string

const redacted = "[REDACTED]"

// String returns [REDACTED].
func (Secret) String() string { return redacted }

// GoString returns [REDACTED] (for %#v).
func (Secret) GoString() string { return redacted }

// Format prints [REDACTED] for every verb.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// LogValue redacts the secret in log/slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// sealer encrypts secrets at rest with AES-256-GCM. Each Seal draws a fresh
// random 96-bit nonce, prepended to the ciphertext; the additional data
// binds a ciphertext to the record it belongs to, so a sealed value copied
// under another tenant, provider or user fails to open.
type sealer struct {
	aead cipher.AEAD
}

// sealVersion prefixes every sealed value so that a later key rotation can
// tell formats apart.
const sealVersion = 1

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("oauthflow: Options.SecretKey must be 32 bytes (AES-256), got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plaintext []byte, aad string) []byte {
	out := make([]byte, 1, 1+len(plaintext)+s.aead.Overhead())
	out[0] = sealVersion
	return s.aead.Seal(out, nil, plaintext, []byte(aad))
}

var errUnseal = errors.New("oauthflow: cannot decrypt a stored secret (wrong SecretKey, or a record moved between keys)")

func (s *sealer) open(sealed []byte, aad string) ([]byte, error) {
	if len(sealed) < 1 || sealed[0] != sealVersion {
		return nil, errUnseal
	}
	plain, err := s.aead.Open(nil, nil, sealed[1:], []byte(aad))
	if err != nil {
		return nil, errUnseal
	}
	return plain, nil
}
