package whatsappcloud

import (
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud/cloudtest"
)

// A push verifies only with the app secret's HMAC over the exact bytes: another secret, another body (one byte
// changed), a missing prefix or a missing header all fail.
func TestSignature(t *testing.T) {
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	good := cloudtest.Sign(body, "app-secret")
	changed := []byte(string(body[:len(body)-1]) + " ")
	for _, tc := range []struct {
		name string
		body []byte
		sig  string
		want bool
	}{
		{"signed", body, good, true},
		{"another secret", body, cloudtest.Sign(body, "other-secret"), false},
		{"another body", changed, good, false},
		{"no prefix", body, good[len("sha256="):], false},
		{"not hex", body, "sha256=zz", false},
		{"none", body, "", false},
	} {
		h := http.Header{}
		if tc.sig != "" {
			h.Set("X-Hub-Signature-256", tc.sig)
		}
		if got := signed(channels.Push{Header: h, Body: tc.body}, "app-secret"); got != tc.want {
			t.Errorf("%s: signed = %v", tc.name, got)
		}
	}
	if signed(channels.Push{Header: http.Header{"X-Hub-Signature-256": {cloudtest.Sign(body, "")}}, Body: body}, "") {
		t.Error("an empty app secret verifies")
	}
}

func TestNormalizeAddress(t *testing.T) {
	p := New(Options{})
	for in, want := range map[string]string{"+1 (555) 010-0002": "+15550100002", "15550100002": "+15550100002", "+49 30 1234567": "+49301234567"} {
		if got, err := p.NormalizeAddress(in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "+0123456789", "12345", "+1555abc0100", "+1234567890123456"} {
		if got, err := p.NormalizeAddress(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

// A failed status keeps Meta's code and maps it; retryable codes arriving as a final status are final.
func TestFailedStatus(t *testing.T) {
	r, ok := receipt(waStatus{ID: "wamid.1", Status: "failed", Timestamp: "1700000000", Errors: []waError{{Code: 130429, Title: "Rate limit hit"}}})
	if !ok || r.Failure == nil || r.Failure.Code != "rate_limited" || r.Failure.Retryable {
		t.Errorf("receipt = %+v, failure %+v", r, r.Failure)
	}
	if _, ok := receipt(waStatus{ID: "wamid.1", Status: "sent"}); ok {
		t.Error("a sent status is applied")
	}
}
