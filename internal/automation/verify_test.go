package automation

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // the hmac scheme's sha1 variant is tested
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
)

func mac(h func() hash.Hash, key, msg string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// signed is how one scheme signs a body at a time: the headers a genuine sender sets.
type signed func(secret, body string, at time.Time) http.Header

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// Every scheme accepts what its sender signs and refuses a forged signature, a replay whose timestamp is too old
// (schemes with one), a truncated signature and a truncated body.
func TestVerifySchemes(t *testing.T) {
	const secret = "s3cr3t"
	swKey := base64.StdEncoding.EncodeToString([]byte("standard-webhooks-key-32-bytes!!"))
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name       string
		v          store.SourceVerification
		secret     string
		sign       signed
		timestamps bool
	}{
		{"hmac sha256 hex with prefix", store.SourceVerification{Scheme: SchemeHMAC, Algorithm: "sha256", Header: "X-Sig", Encoding: "hex", Prefix: "sha256="}, secret,
			func(secret, b string, _ time.Time) http.Header {
				return header("X-Sig", "sha256="+hex.EncodeToString(mac(sha256.New, secret, b)))
			}, false},
		{"hmac sha1 base64", store.SourceVerification{Scheme: SchemeHMAC, Algorithm: "sha1", Header: "X-Sig", Encoding: "base64"}, secret,
			func(secret, b string, _ time.Time) http.Header {
				return header("X-Sig", base64.StdEncoding.EncodeToString(mac(sha1.New, secret, b)))
			}, false},
		{"hmac sha512 hex", store.SourceVerification{Scheme: SchemeHMAC, Algorithm: "sha512", Header: "X-Sig", Encoding: "hex"}, secret,
			func(secret, b string, _ time.Time) http.Header {
				return header("X-Sig", hex.EncodeToString(mac(sha512.New, secret, b)))
			}, false},
		{"github", store.SourceVerification{Scheme: SchemeGitHub}, secret,
			func(secret, b string, _ time.Time) http.Header {
				return header("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac(sha256.New, secret, b)))
			}, false},
		{"shopify", store.SourceVerification{Scheme: SchemeShopify}, secret,
			func(secret, b string, _ time.Time) http.Header {
				return header("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac(sha256.New, secret, b)))
			}, false},
		{"stripe", store.SourceVerification{Scheme: SchemeStripe}, "whsec_stripe",
			func(secret, b string, at time.Time) http.Header {
				ts := strconv.FormatInt(at.Unix(), 10)
				return header("Stripe-Signature", "t="+ts+",v0=abc,v1="+hex.EncodeToString(mac(sha256.New, secret, ts+"."+b)))
			}, true},
		{"slack", store.SourceVerification{Scheme: SchemeSlack}, secret,
			func(secret, b string, at time.Time) http.Header {
				ts := strconv.FormatInt(at.Unix(), 10)
				return header("X-Slack-Request-Timestamp", ts,
					"X-Slack-Signature", "v0="+hex.EncodeToString(mac(sha256.New, secret, "v0:"+ts+":"+b)))
			}, true},
		{"standard webhooks", store.SourceVerification{Scheme: SchemeStandardWebhooks}, "whsec_" + swKey,
			func(secret, b string, at time.Time) http.Header {
				ts := strconv.FormatInt(at.Unix(), 10)
				key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
				sig := base64.StdEncoding.EncodeToString(mac(sha256.New, string(key), "msg_1."+ts+"."+b))
				return header("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", "v1,bogus v1,"+sig)
			}, true},
		{"basic", store.SourceVerification{Scheme: SchemeBasic, Username: "form"}, secret,
			func(secret, _ string, _ time.Time) http.Header {
				return header("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("form:"+secret)))
			}, false},
		{"api key", store.SourceVerification{Scheme: SchemeAPIKey}, secret,
			func(secret, _ string, _ time.Time) http.Header { return header("X-API-Key", secret) }, false},
	}
	const body = `{"id":"evt_1","amount":1200}`
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := verifier{SourceVerification: presets(c.v), secret: []byte(c.secret)}
			if r := v.verify(c.sign(c.secret, body, now), []byte(body), now); r != nil {
				t.Fatalf("valid request refused: %v", r)
			}
			if r := v.verify(http.Header{}, []byte(body), now); r == nil || r.reason != ReasonMissingSignature {
				t.Errorf("unsigned request: %v, want %s", r, ReasonMissingSignature)
			}
			forgedSecret := "not-" + c.secret
			if c.v.Scheme == SchemeStandardWebhooks {
				forgedSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("another-key"))
			}
			if r := v.verify(c.sign(forgedSecret, body, now), []byte(body), now); r == nil {
				t.Error("forged request accepted")
			}
			if c.timestamps {
				stale := now.Add(-DefaultTolerance - time.Second)
				if r := v.verify(c.sign(c.secret, body, stale), []byte(body), now); r == nil || r.reason != ReasonStaleTimestamp {
					t.Errorf("replayed request: %v, want %s", r, ReasonStaleTimestamp)
				}
				future := now.Add(DefaultTolerance + time.Second)
				if r := v.verify(c.sign(c.secret, body, future), []byte(body), now); r == nil || r.reason != ReasonStaleTimestamp {
					t.Errorf("request from the future: %v, want %s", r, ReasonStaleTimestamp)
				}
			}
			if c.v.Scheme != SchemeBasic && c.v.Scheme != SchemeAPIKey {
				if r := v.verify(c.sign(c.secret, body, now), []byte(body[:len(body)-1]), now); r == nil || r.reason != ReasonInvalidSignature {
					t.Errorf("truncated body: %v, want %s", r, ReasonInvalidSignature)
				}
			}
			h := c.sign(c.secret, body, now)
			for name := range h {
				if name == "X-Slack-Request-Timestamp" || name == "Webhook-Timestamp" || name == "Webhook-Id" {
					continue
				}
				val := h.Get(name)
				h.Set(name, val[:len(val)-2])
			}
			if r := v.verify(h, []byte(body), now); r == nil {
				t.Error("truncated signature accepted")
			}
		})
	}
}

func TestVerifyUnknownSchemeFailsClosed(t *testing.T) {
	v := verifier{SourceVerification: store.SourceVerification{Scheme: "rot13"}}
	if r := v.verify(http.Header{}, nil, time.Now()); r == nil {
		t.Fatal("an unknown scheme accepted a request")
	}
	v = verifier{SourceVerification: store.SourceVerification{Scheme: SchemeHMAC, Algorithm: "md5", Header: "X-Sig"}, secret: []byte("k")}
	if r := v.verify(header("X-Sig", "00"), nil, time.Now()); r == nil {
		t.Fatal("an unknown algorithm accepted a request")
	}
}
