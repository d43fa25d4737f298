// Package webhook is the webhooks capability and Switchboard's one webhook engine. The Service owns a workspace's
// endpoints, its delivery and event logs and the catalogue view; every area's events reach receivers through the
// engine, signed the Standard Webhooks way (signing, secrets, retry policy), sent by the Dispatcher, whose Recorder
// decides what each attempt changes.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every endpoint signing secret, as Standard Webhooks specifies.
const SecretPrefix = "whsec_"

// secretLen is the size of the secrets Switchboard generates: 256 bits, the security level of HMAC-SHA256.
const secretLen = 32

// Standard Webhooks recommends secrets of 24 to 64 bytes; ParseSecret accepts that range so that secrets generated
// by other Standard Webhooks senders (Svix uses 24 bytes) can be carried over unchanged.
const (
	minSecretLen = 24
	maxSecretLen = 64
)

// Header names of a Standard Webhooks delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// UserAgent identifies Switchboard's deliveries to receivers and their firewalls.
const UserAgent = "Switchboard-Webhooks/1"

// ErrMalformedSecret means a string is not a signing secret: no "whsec_" prefix, not standard base64, or a key
// outside 24–64 bytes. The error never contains the string, which may be a real secret with a typo.
var ErrMalformedSecret = errors.New(`webhook: malformed signing secret (want "whsec_" + standard base64 of 24 to 64 bytes)`)

// NewSecret returns a new endpoint signing secret: "whsec_" and the standard base64 of 32 random bytes. It returns
// an error only if the system's random source fails.
func NewSecret() (string, error) {
	key := make([]byte, secretLen)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("webhook: generating a signing secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// ParseSecret returns the HMAC key of a "whsec_…" secret. Returns ErrMalformedSecret if s is not one.
func ParseSecret(s string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrMalformedSecret
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	// Only the canonical encoding is a secret: the decoder would also accept line breaks and stray padding bits,
	// and one key must have one spelling.
	if err != nil || base64.StdEncoding.EncodeToString(key) != encoded || len(key) < minSecretLen || len(key) > maxSecretLen {
		return nil, ErrMalformedSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header value of a delivery: one "v1,<base64 HMAC-SHA256>" per key, separated
// by spaces, each over msgID + "." + ts in Unix seconds + "." + body. During a rotation's grace period keys holds
// the new and the previous key, so receivers verify with either while they switch.
func Sign(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	signed := make([]string, len(keys))
	for i, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(msgID))
		mac.Write([]byte{'.'})
		mac.Write(strconv.AppendInt(nil, ts.Unix(), 10))
		mac.Write([]byte{'.'})
		mac.Write(body)
		signed[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(signed, " ")
}

// Headers returns the headers of a delivery whose body is JSON: the three Standard Webhooks headers (ts in Unix
// seconds, the same instant Sign was given), Content-Type and User-Agent.
func Headers(msgID string, ts time.Time, signature string) http.Header {
	h := make(http.Header, 5)
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, signature)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	return h
}
