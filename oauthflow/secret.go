package oauthflow

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/deployplane/deployplane/internal/seal"
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

// sealer encrypts secrets at rest with AES-256-GCM (package internal/seal,
// shared with controlplane): the additional data binds a ciphertext to the
// record it belongs to, so a sealed value copied under another tenant,
// provider or user fails to open.
type sealer struct {
	s *seal.Sealer
}

func newSealer(key []byte) (*sealer, error) {
	s, err := seal.New(key)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: Options.SecretKey: %w", err)
	}
	return &sealer{s: s}, nil
}

func (s *sealer) seal(plaintext []byte, aad string) []byte { return s.s.Seal(plaintext, aad) }

var errUnseal = errors.New("oauthflow: cannot decrypt a stored secret (wrong SecretKey, or a record moved between keys)")

func (s *sealer) open(sealed []byte, aad string) ([]byte, error) {
	plain, err := s.s.Open(sealed, aad)
	if err != nil {
		return nil, errUnseal
	}
	return plain, nil
}
