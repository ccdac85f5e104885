package webhook

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every signing secret, as the Standard Webhooks
// specification writes them.
const SecretPrefix = "whsec_"

// secretBytes is the length of a signing key (the spec allows 24 to 64).
const secretBytes = 32

// newSecret returns a fresh signing key and the secret shown to the admin:
// "whsec_" and the key in standard base64.
func newSecret() (key []byte, secret string, err error) {
	key = make([]byte, secretBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("webhook: new secret: %w", err)
	}
	return key, SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// KeyBytes is the length of the key that seals signing secrets at rest.
const KeyBytes = 32

// ParseKey decodes a sealing key given in base64 (standard or URL
// alphabet, padded or not): 32 bytes, e.g. from `openssl rand -base64 32`.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeyBytes {
				return nil, fmt.Errorf("want %d bytes in base64 (openssl rand -base64 32), got %d bytes", KeyBytes, len(k))
			}
			return k, nil
		}
	}
	return nil, errors.New("want 32 bytes in base64 (openssl rand -base64 32)")
}

// The first byte of a stored secret says its format, so that a later one
// (another cipher, a key id) can be told apart: sealVersion is sealed with
// AES-256-GCM, clearVersion is the key itself, stored by a server that had
// no sealing key.
const (
	clearVersion = 0
	sealVersion  = 1
)

// ErrNoKey means no sealing key is configured: a sealed secret cannot be
// opened.
var ErrNoKey = errors.New("webhook: no WEBHOOK_SECRET_KEY is configured")

// Sealer protects signing secrets at rest with AES-256-GCM. Each secret is
// sealed with a random nonce and the webhook's id as additional data, so a
// sealed secret opens only for its own webhook. The zero Sealer (no key)
// stores secrets in clear, and opens only those.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer with a 32-byte key; an empty key gives a
// Sealer that keeps secrets in clear.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) == 0 {
		return &Sealer{}, nil
	}
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("webhook: the sealing key must be %d bytes, got %d", KeyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Keyed reports whether the Sealer has a key: whether it seals.
func (s *Sealer) Keyed() bool { return s.aead != nil }

// Seal returns the stored form of the webhook's key: version ‖ nonce ‖
// ciphertext, or, without a sealing key, clearVersion ‖ key.
func (s *Sealer) Seal(webhookID string, key []byte) ([]byte, error) {
	if s.aead == nil {
		return append([]byte{clearVersion}, key...), nil
	}
	nonce := make([]byte, s.aead.NonceSize(), 1+s.aead.NonceSize()+len(key)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("webhook: seal: %w", err)
	}
	out := append([]byte{sealVersion}, nonce...)
	return s.aead.Seal(out, nonce, key, []byte(webhookID)), nil
}

// inClear reports whether a stored secret is kept in clear.
func inClear(stored []byte) bool {
	return len(stored) == 1+secretBytes && stored[0] == clearVersion
}

// Open returns the key of a stored secret, sealed for the webhook or kept
// in clear.
func (s *Sealer) Open(webhookID string, stored []byte) ([]byte, error) {
	if inClear(stored) {
		return bytes.Clone(stored[1:]), nil
	}
	if s.aead == nil {
		return nil, ErrNoKey
	}
	n := s.aead.NonceSize()
	if len(stored) < 1+n || stored[0] != sealVersion {
		return nil, errors.New("webhook: the stored secret is not in a known format")
	}
	key, err := s.aead.Open(nil, stored[1:1+n], stored[1+n:], []byte(webhookID))
	if err != nil {
		return nil, errors.New("webhook: the stored secret does not open with WEBHOOK_SECRET_KEY (was the key changed?)")
	}
	return key, nil
}
