package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Send reports the webhook-signature it sent (what the delivery log shows as the signed request) and the receiver's
// response headers as the log keeps them: repeated values joined, long values cut, Set-Cookie left out.
func TestSendKeepsSignatureAndResponseHeaders(t *testing.T) {
	secret, _ := newSecret(t)
	var got http.Header
	var body []byte
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Add("X-Seen", "a")
		w.Header().Add("X-Seen", "b")
		w.Header().Set("X-Long", strings.Repeat("é", 200))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rx.Close()
	box := newBox(t)
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	e := store.WebhookEndpoint{ID: "whk_01JDA9M3N4P5Q6R7S8T9V0W1X2", URL: rx.URL}
	e.Secret = box.Seal([]byte(secret), []byte(e.ID))
	ev := store.Event{ID: "evt_01JDA9M3N4P5Q6R7S8T9V0W1X3", WorkspaceID: "ws_1", Type: "webhook.ping",
		Data: []byte(`{"message":"hi"}`), CreatedAt: time.Now().UTC()}
	sent, err := webhook.NewSender(box, guard, time.Second).Send(context.Background(), e, ev)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Signature == "" || got.Get(webhook.HeaderSignature) != sent.Signature {
		t.Fatalf("Sent.Signature %q, header sent %q", sent.Signature, got.Get(webhook.HeaderSignature))
	}
	if ts, _ := strconv.ParseInt(got.Get(webhook.HeaderTimestamp), 10, 64); ts != sent.StartedAt.Unix() {
		t.Fatalf("webhook-timestamp %d, started at %d", ts, sent.StartedAt.Unix())
	}
	want, err := webhook.Body(ev)
	if err != nil || string(want) != string(body) {
		t.Fatalf("Body(ev) = %s, the receiver got %s", want, body)
	}
	if err := verifier(t, secret).Verify(body, got); err != nil {
		t.Fatalf("the receiver cannot verify the request: %v", err)
	}
	h := sent.ResponseHeaders
	if _, ok := h["Set-Cookie"]; ok || h["X-Seen"] != "a, b" || len(h["X-Long"]) != 256 || h["Content-Length"] != "0" {
		t.Fatalf("response headers %q", h)
	}
}

// At most 32 response headers are kept, the first by name.
func TestResponseHeadersOfBounds(t *testing.T) {
	h := http.Header{}
	for i := range 40 {
		h.Set("X-H"+strconv.Itoa(100+i), "v")
	}
	got := webhook.ResponseHeadersOf(h)
	if len(got) != 32 || got["X-H100"] != "v" || got["X-H131"] != "v" || got["X-H132"] != "" {
		t.Fatalf("kept %d headers: %v", len(got), got)
	}
}
