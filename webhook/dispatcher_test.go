package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/egress"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
	"github.com/switchboard/switchboard/webhook"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// receiver records what arrives and answers with the statuses it is given, then 200.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []received
	srv      *httptest.Server
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), body})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte("receiver says hi"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// setup creates a workspace and an endpoint for url with a fresh secret, and starts a dispatcher.
func setup(t *testing.T, db *store.DB, url string, schedule []time.Duration) (store.Workspace, store.WebhookEndpoint, string) {
	t.Helper()
	ctx := context.Background()
	key := make([]byte, webhook.KeySize)
	box, err := webhook.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Workspaces.Create(ctx, "hooks")
	if err != nil {
		t.Fatal(err)
	}
	e, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: w.ID, URL: url, Events: []string{"*"},
		SealSecret: func(id string) string { return box.Seal([]byte(secret), []byte(id)) },
		SealHeaders: func(id string) *string {
			return box.SealHeaders(map[string]string{"Authorization": "Bearer n8n-token", "Webhook-Signature": "forged"}, id)
		}})
	if err != nil {
		t.Fatal(err)
	}
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	d := webhook.NewDispatcher(db, box, guard, webhook.Config{Schedule: schedule, Timeout: 2 * time.Second,
		Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return w, e, secret
}

func emit(t *testing.T, db *store.DB, workspaceID, typ string) store.Event {
	t.Helper()
	var ev store.Event
	if err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		var err error
		ev, err = db.Events.Emit(ctx, tx, store.NewEvent{WorkspaceID: workspaceID, Type: typ, Data: map[string]string{"link_id": "lnk_1"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ev
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A queued event arrives signed, verifiable with the official Standard Webhooks library, in the DESIGN's envelope,
// with the endpoint's static headers but never letting them replace the signature.
func TestDeliverySignedAndVerifiable(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		rcv := newReceiver(t)
		w, _, secret := setup(t, db, rcv.srv.URL+"/hook", nil)
		ev := emit(t, db, w.ID, "link.created")
		eventually(t, "delivery", func() bool { return len(rcv.deliveries()) == 1 })
		got := rcv.deliveries()[0]
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Fatalf("the official library rejects the delivery: %v", err)
		}
		if got.header.Get("webhook-id") != ev.ID || got.header.Get("Authorization") != "Bearer n8n-token" {
			t.Errorf("headers %v", got.header)
		}
		var env map[string]any
		if err := json.Unmarshal(got.body, &env); err != nil {
			t.Fatal(err)
		}
		if env["id"] != ev.ID || env["type"] != "link.created" || env["api_version"] != "v1" || env["workspace_id"] != w.ID {
			t.Errorf("envelope %v", env)
		}
		eventually(t, "delivery recorded as succeeded", func() bool {
			var d store.Delivery
			err := db.Bun().NewSelect().Model(&d).Where("d.event_id = ?", ev.ID).Scan(context.Background())
			return err == nil && d.Status == store.DeliverySucceeded && d.Attempts == 1
		})
	})
}

// A failing receiver gets the same webhook-id on every retry until it answers 2xx; nothing is lost.
func TestRetriesUntilDelivered(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		rcv := newReceiver(t, 500, 503, 302)
		w, _, _ := setup(t, db, rcv.srv.URL, []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond})
		ev := emit(t, db, w.ID, "link.updated")
		eventually(t, "four attempts", func() bool { return len(rcv.deliveries()) == 4 })
		for _, r := range rcv.deliveries() {
			if r.header.Get("webhook-id") != ev.ID {
				t.Errorf("webhook-id %q, want %q on every attempt", r.header.Get("webhook-id"), ev.ID)
			}
		}
		var d store.Delivery
		eventually(t, "succeeded", func() bool {
			err := db.Bun().NewSelect().Model(&d).Where("d.event_id = ?", ev.ID).Scan(context.Background())
			return err == nil && d.Status == store.DeliverySucceeded
		})
		attempts, err := db.Deliveries.Attempts(context.Background(), d.ID)
		if err != nil || len(attempts) != 4 || *attempts[2].ErrorClass != "http_3xx" || *attempts[3].ResponseExcerpt != "receiver says hi" {
			t.Errorf("attempt log %+v, %v", attempts, err)
		}
	})
}

// 410 Gone disables the endpoint and tells the workspace with a webhook.endpoint.disabled event.
func TestGoneDisablesEndpoint(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		rcv := newReceiver(t, 410)
		w, e, _ := setup(t, db, rcv.srv.URL, nil)
		emit(t, db, w.ID, "link.deleted")
		eventually(t, "endpoint disabled", func() bool {
			got, err := db.Webhooks.Get(context.Background(), w.ID, e.ID)
			return err == nil && got.Status == store.EndpointDisabled
		})
		n, err := db.Bun().NewSelect().Table("events").Where("workspace_id = ? AND type = ?", w.ID, "webhook.endpoint.disabled").Count(context.Background())
		if err != nil || n != 1 {
			t.Errorf("webhook.endpoint.disabled events: %d, %v", n, err)
		}
	})
}
