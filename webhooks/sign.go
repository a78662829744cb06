package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"        // the delivery's id, the same on every attempt
	HeaderTimestamp = "webhook-timestamp" // the attempt's time, Unix seconds
	HeaderSignature = "webhook-signature" // "v1," and the base64 HMAC-SHA256 of "id.timestamp.body"
)

// errSecret is the error of a secret that is not "whsec_" and the base64
// of 24 to 64 bytes.
var errSecret = errors.New("webhooks: a secret is \"whsec_\" and the base64 of 24 to 64 bytes")

// secretKey is the HMAC key of a secret: the bytes its base64 encodes.
func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, errSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header of a delivery as the Standard
// Webhooks specification signs it: "v1," and the base64 of the
// HMAC-SHA256, keyed with the bytes of the secret after "whsec_", of
// id, ".", the timestamp in Unix seconds, ".", and body. It fails on a
// malformed secret.
func Sign(secret, id string, at time.Time, body []byte) (string, error) {
	key, err := signingKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// signingKey is secretKey without the length bounds (the specification's
// own test secrets are shorter).
func signingKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || !strings.HasPrefix(secret, SecretPrefix) {
		return nil, errSecret
	}
	return key, nil
}
