package webhook_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/internal/webhook"
)

// secretShape is "whsec_" and the padded standard base64 of 32 bytes.
var secretShape = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := webhook.ParseSecret(s)
	if err != nil {
		t.Fatalf("ParseSecret(NewSecret()) = %v", err)
	}
	return s, key
}

// verifier is the official Standard Webhooks verifier that receivers use, built from the secret as they are given it.
func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, key := newSecret(t)
		if !secretShape.MatchString(s) {
			t.Fatalf("NewSecret() = %q, want a match of %s", s, secretShape)
		}
		if len(key) != 32 {
			t.Fatalf("ParseSecret(NewSecret()) is %d bytes, want 32", len(key))
		}
		if seen[s] {
			t.Fatalf("NewSecret() returned %q twice", s)
		}
		seen[s] = true
	}
}

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n))) }
	tests := []struct {
		name    string
		in      string
		wantLen int // 0: want ErrMalformedSecret
	}{
		{"32 bytes, as generated", "whsec_" + b64(32), 32},
		{"24 bytes, the Standard Webhooks minimum (Svix's size)", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 24},
		{"64 bytes, the Standard Webhooks maximum", "whsec_" + b64(64), 64},
		{"23 bytes", "whsec_" + b64(23), 0},
		{"65 bytes", "whsec_" + b64(65), 0},
		{"no prefix", b64(32), 0},
		{"asymmetric prefix", "whsk_" + b64(32), 0},
		{"upper-case prefix", "WHSEC_" + b64(32), 0},
		{"prefix only", "whsec_", 0},
		{"empty", "", 0},
		{"unpadded", "whsec_" + strings.TrimRight(b64(32), "="), 0},
		{"URL alphabet", "whsec_" + base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16))), 0},
		{"trailing newline", "whsec_" + b64(32) + "\n", 0},
		{"line break inside", "whsec_" + b64(32)[:20] + "\r\n" + b64(32)[20:], 0},
		{"non-canonical padding bits", "whsec_a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2t=", 0},
		{"not base64", "whsec_" + strings.Repeat("!", 44), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := webhook.ParseSecret(tt.in)
			if tt.wantLen == 0 {
				if !errors.Is(err, webhook.ErrMalformedSecret) {
					t.Fatalf("ParseSecret() error = %v, want ErrMalformedSecret", err)
				}
				if len(tt.in) > len("whsec_") && strings.Contains(err.Error(), tt.in[len("whsec_"):]) {
					t.Errorf("error %q echoes the secret", err)
				}
				return
			}
			if err != nil || len(key) != tt.wantLen {
				t.Fatalf("ParseSecret() = %d bytes, %v; want %d bytes", len(key), err, tt.wantLen)
			}
		})
	}
}

// TestSignKnownAnswer checks the signature against the test vector of the official library.
func TestSignKnownAnswer(t *testing.T) {
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign() = %q, want %q", got, want)
	}
}

func TestSignVerifiesWithTheOfficialLibrary(t *testing.T) {
	oldSecret, oldKey := newSecret(t)
	newSecretText, newKey := newSecret(t)
	strangerSecret, _ := newSecret(t)
	const msgID = "evt_01JDW8Q6X4M6Z3V0H8B1N2C3D4"
	body := []byte(`{"id":"evt_01JDW8Q6X4M6Z3V0H8B1N2C3D4","type":"link.clicked","data":{"n":1}}`)
	now := time.Now()

	t.Run("one secret", func(t *testing.T) {
		h := webhook.Headers(msgID, now, webhook.Sign([][]byte{newKey}, msgID, now, body))
		if err := verifier(t, newSecretText).Verify(body, h); err != nil {
			t.Errorf("Verify() = %v", err)
		}
		if err := verifier(t, strangerSecret).Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("Verify() with another endpoint's secret = %v, want ErrNoMatchingSignature", err)
		}
	})

	t.Run("rotation: both secrets verify", func(t *testing.T) {
		sig := webhook.Sign([][]byte{newKey, oldKey}, msgID, now, body)
		if n := len(strings.Fields(sig)); n != 2 {
			t.Fatalf("Sign() with two keys = %q, want two signatures", sig)
		}
		h := webhook.Headers(msgID, now, sig)
		for name, secret := range map[string]string{"new": newSecretText, "old": oldSecret} {
			if err := verifier(t, secret).Verify(body, h); err != nil {
				t.Errorf("Verify() with the %s secret = %v", name, err)
			}
		}
		if err := verifier(t, strangerSecret).Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("Verify() with another endpoint's secret = %v, want ErrNoMatchingSignature", err)
		}
	})

	t.Run("tampering fails", func(t *testing.T) {
		sig := webhook.Sign([][]byte{newKey}, msgID, now, body)
		tampered := []struct {
			name string
			edit func(h http.Header) (body []byte)
		}{
			{"body", func(http.Header) []byte { return bytes.Replace(body, []byte(`"n":1`), []byte(`"n":2`), 1) }},
			{"id", func(h http.Header) []byte { h.Set(webhook.HeaderID, msgID+"X"); return body }},
			{"timestamp", func(h http.Header) []byte {
				h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix()-1, 10))
				return body
			}},
		}
		for _, tc := range tampered {
			t.Run(tc.name, func(t *testing.T) {
				h := webhook.Headers(msgID, now, sig)
				if err := verifier(t, newSecretText).Verify(tc.edit(h), h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
					t.Errorf("Verify() = %v, want ErrNoMatchingSignature", err)
				}
			})
		}
	})

	t.Run("old timestamp fails the tolerance", func(t *testing.T) {
		then := now.Add(-10 * time.Minute)
		h := webhook.Headers(msgID, then, webhook.Sign([][]byte{newKey}, msgID, then, body))
		wh := verifier(t, newSecretText)
		if err := wh.Verify(body, h); !errors.Is(err, standardwebhooks.ErrMessageTooOld) {
			t.Errorf("Verify() = %v, want ErrMessageTooOld", err)
		}
		// The signature itself is right: only the age rejects it.
		if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
			t.Errorf("VerifyIgnoringTimestamp() = %v", err)
		}
	})
}

func TestHeaders(t *testing.T) {
	ts := time.Unix(1700000000, 999_000_000)
	h := webhook.Headers("evt_1", ts, "v1,abc")
	want := map[string]string{
		"webhook-id":        "evt_1",
		"webhook-timestamp": "1700000000",
		"webhook-signature": "v1,abc",
		"Content-Type":      "application/json",
		"User-Agent":        "Switchboard-Webhooks/1",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("Headers() = %v, want exactly %d headers", h, len(want))
	}
}
