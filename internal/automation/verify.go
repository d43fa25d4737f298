package automation

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // HMAC-SHA1 is what some senders sign with; HMAC stays sound with SHA-1
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/store"
)

// Verification schemes.
const (
	SchemeNone             = "none"
	SchemeHMAC             = "hmac"
	SchemeStandardWebhooks = "standard_webhooks"
	SchemeGitHub           = "github"
	SchemeStripe           = "stripe"
	SchemeShopify          = "shopify"
	SchemeSlack            = "slack"
	SchemeBasic            = "basic"
	SchemeAPIKey           = "api_key"
)

// DefaultTolerance is how old (or how far ahead) a signed timestamp may be when the source sets no tolerance.
const DefaultTolerance = 5 * time.Minute

// Reasons a request is refused, as the request log shows them.
const (
	ReasonMissingSignature   = "missing_signature"
	ReasonInvalidSignature   = "invalid_signature"
	ReasonStaleTimestamp     = "stale_timestamp"
	ReasonInvalidCredentials = "invalid_credentials"
	ReasonTooLarge           = "too_large"
	ReasonUnsupportedMedia   = "unsupported_media_type"
	ReasonMalformedBody      = "malformed_body"
	ReasonInvalidText        = "invalid_text"
	ReasonRateLimited        = "rate_limited"
	ReasonTypeArchived       = "event_type_archived"
	ReasonDataInvalid        = "event_data_invalid"
	ReasonSchemaTooComplex   = "schema_too_complex"
)

// refusal is why a request did not verify: a reason of the log and a detail for the sender.
type refusal struct{ reason, detail string }

func (r *refusal) Error() string { return r.reason + ": " + r.detail }

// verifier checks requests with one source's scheme; secret is the opened shared secret.
type verifier struct {
	store.SourceVerification
	secret []byte
}

// presets completes a scheme that is a preset of the general HMAC check with its fixed settings.
func presets(v store.SourceVerification) store.SourceVerification {
	switch v.Scheme {
	case SchemeGitHub:
		v.Algorithm, v.Header, v.Encoding, v.Prefix = "sha256", "X-Hub-Signature-256", "hex", "sha256="
	case SchemeShopify:
		v.Algorithm, v.Header, v.Encoding, v.Prefix = "sha256", "X-Shopify-Hmac-Sha256", "base64", ""
	case SchemeSlack:
		v.Algorithm, v.Header, v.Encoding, v.Prefix = "sha256", "X-Slack-Signature", "hex", "v0="
	case SchemeStripe:
		v.Algorithm, v.Header, v.Encoding = "sha256", "Stripe-Signature", "hex"
	case SchemeStandardWebhooks:
		v.Algorithm, v.Header, v.Encoding = "sha256", "webhook-signature", "base64"
	case SchemeAPIKey:
		if v.Header == "" {
			v.Header = "X-API-Key"
		}
	}
	if v.Scheme == SchemeStripe || v.Scheme == SchemeSlack || v.Scheme == SchemeStandardWebhooks {
		if v.ToleranceSeconds == 0 {
			v.ToleranceSeconds = int(DefaultTolerance / time.Second)
		}
	}
	return v
}

// verify checks a request (its headers and raw body) at time now. Anything it does not recognise refuses the
// request: an unknown scheme, a missing or malformed header, an unknown algorithm.
func (v verifier) verify(h http.Header, body []byte, now time.Time) *refusal {
	switch v.Scheme {
	case SchemeNone:
		return nil
	case SchemeHMAC, SchemeGitHub, SchemeShopify:
		return v.checkHMAC(h.Get(v.Header), body)
	case SchemeSlack:
		ts := h.Get("X-Slack-Request-Timestamp")
		if ts == "" || h.Get(v.Header) == "" {
			return &refusal{ReasonMissingSignature, "The X-Slack-Signature and X-Slack-Request-Timestamp headers are required."}
		}
		if r := v.fresh(ts, now); r != nil {
			return r
		}
		return v.checkHMAC(h.Get(v.Header), []byte("v0:"+ts+":"+string(body)))
	case SchemeStripe:
		return v.checkStripe(h.Get(v.Header), body, now)
	case SchemeStandardWebhooks:
		return v.checkStandard(h, body, now)
	case SchemeBasic:
		user, pass, ok := basicAuth(h.Get("Authorization"))
		if !ok {
			return &refusal{ReasonMissingSignature, "HTTP Basic credentials (Authorization: Basic …) are required."}
		}
		// Both compares always run, so the answer's timing does not tell which of the two was wrong.
		okUser := equalHashed([]byte(user), []byte(v.Username))
		okPass := equalHashed([]byte(pass), v.secret)
		if !okUser || !okPass {
			return &refusal{ReasonInvalidCredentials, "The HTTP Basic credentials are not this source's."}
		}
		return nil
	case SchemeAPIKey:
		got := h.Get(v.Header)
		if got == "" {
			return &refusal{ReasonMissingSignature, fmt.Sprintf("The %s header is required.", v.Header)}
		}
		if !equalHashed([]byte(got), v.secret) {
			return &refusal{ReasonInvalidCredentials, fmt.Sprintf("The %s header does not hold this source's key.", v.Header)}
		}
		return nil
	}
	return &refusal{ReasonInvalidSignature, "The source's verification scheme is not known to this server."}
}

// equalHashed compares two secrets in constant time whatever their lengths (hmac.Equal returns early on a length
// mismatch, which would tell an attacker the length of the key).
func equalHashed(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// basicAuth parses an "Authorization: Basic …" value.
func basicAuth(v string) (user, pass string, ok bool) {
	scheme, cred, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

func (v verifier) newHash() (func() hash.Hash, bool) {
	switch v.Algorithm {
	case "", "sha256":
		return sha256.New, true
	case "sha1":
		return sha1.New, true
	case "sha512":
		return sha512.New, true
	}
	return nil, false
}

// mac is the HMAC of msg under the source's secret.
func (v verifier) mac(msg []byte) ([]byte, bool) {
	h, ok := v.newHash()
	if !ok {
		return nil, false
	}
	m := hmac.New(h, v.secret)
	m.Write(msg)
	return m.Sum(nil), true
}

// decode reads a signature in the source's encoding.
func (v verifier) decode(sig string) ([]byte, error) {
	if v.Encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(sig); err == nil {
			return b, nil
		}
		return base64.RawStdEncoding.DecodeString(sig)
	}
	return hex.DecodeString(sig)
}

// checkHMAC compares the signature header value (prefix, then the encoded MAC) with the MAC of msg.
func (v verifier) checkHMAC(value string, msg []byte) *refusal {
	value = strings.TrimSpace(value)
	if value == "" {
		return &refusal{ReasonMissingSignature, fmt.Sprintf("The %s header is required.", v.Header)}
	}
	sig, ok := strings.CutPrefix(value, v.Prefix)
	if !ok {
		return &refusal{ReasonInvalidSignature, fmt.Sprintf("The %s header does not start with %q.", v.Header, v.Prefix)}
	}
	got, err := v.decode(sig)
	want, known := v.mac(msg)
	if err != nil || !known || !hmac.Equal(got, want) {
		return &refusal{ReasonInvalidSignature, fmt.Sprintf("The %s header does not match the body.", v.Header)}
	}
	return nil
}

// fresh refuses a Unix timestamp outside the tolerance (a replay of an old request, or a forged future one).
func (v verifier) fresh(ts string, now time.Time) *refusal {
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return &refusal{ReasonInvalidSignature, "The signed timestamp is not a Unix time."}
	}
	skew := now.Sub(time.Unix(sec, 0))
	tol := time.Duration(v.ToleranceSeconds) * time.Second
	if skew > tol || skew < -tol {
		return &refusal{ReasonStaleTimestamp, fmt.Sprintf("The signed timestamp is %s away from the server's time; the source accepts %s.",
			skew.Abs().Round(time.Second), tol)}
	}
	return nil
}

// checkStripe verifies "Stripe-Signature: t=…,v1=…[,v1=…]": one v1 must be the hex HMAC-SHA256 of "t.body".
func (v verifier) checkStripe(value string, body []byte, now time.Time) *refusal {
	if value == "" {
		return &refusal{ReasonMissingSignature, "The Stripe-Signature header is required."}
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(value, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			sigs = append(sigs, val)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return &refusal{ReasonInvalidSignature, "The Stripe-Signature header has no t= and v1= members."}
	}
	if r := v.fresh(ts, now); r != nil {
		return r
	}
	want, _ := v.mac([]byte(ts + "." + string(body)))
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return &refusal{ReasonInvalidSignature, "No v1 signature of the Stripe-Signature header matches the body."}
}

// checkStandard verifies the Standard Webhooks headers: one "v1,<base64>" of webhook-signature must be the
// HMAC-SHA256 of "id.timestamp.body" under the secret (whsec_ + base64 of the key).
func (v verifier) checkStandard(h http.Header, body []byte, now time.Time) *refusal {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return &refusal{ReasonMissingSignature, "The webhook-id, webhook-timestamp and webhook-signature headers are required."}
	}
	if r := v.fresh(ts, now); r != nil {
		return r
	}
	key := v.secret
	if b64, ok := strings.CutPrefix(string(key), "whsec_"); ok {
		decoded, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return &refusal{ReasonInvalidSignature, "The source's whsec_ secret is not base64."}
		}
		key = decoded
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, _ := strings.Cut(s, ",")
		if version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(sig); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return &refusal{ReasonInvalidSignature, "No v1 signature of the webhook-signature header matches the body."}
}
