package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/api"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// webhookID is the webhook-id header of a request a receiver got.
func webhookID(r receivertest.Request) string { return r.Header.Get("webhook-id") }

// harness is one workspace on one database, with a server key and the egress policy of the tests (http and
// loopback allowed).
type harness struct {
	t     *testing.T
	db    *store.DB
	box   *sealbox.Box
	guard *egress.Guard
	ws    store.Workspace
}

func newHarness(t *testing.T, db *store.DB) *harness {
	t.Helper()
	box := newBox(t)
	ws, err := db.Workspaces.Create(context.Background(), "hooks")
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL is shared by the tests of this binary: take this test's deliveries away from the next test's
	// dispatchers. Registered first, so it runs after the dispatchers have stopped.
	t.Cleanup(func() {
		_, _ = db.Bun().NewDelete().TableExpr("workspaces").Where("id = ?", ws.ID).Exec(context.Background())
	})
	return &harness{t: t, db: db, box: box, ws: ws,
		guard: egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})}
}

// endpoint registers an endpoint for url subscribed to every event, with a fresh secret it returns; edit may
// change the registration.
func (h *harness) endpoint(url string, edit func(*store.NewWebhookEndpoint)) (store.WebhookEndpoint, string) {
	h.t.Helper()
	secret, err := webhook.NewSecret()
	if err != nil {
		h.t.Fatal(err)
	}
	n := store.NewWebhookEndpoint{WorkspaceID: h.ws.ID, URL: url, Events: []string{"*"},
		SealSecret: func(id string) string { return h.box.Seal([]byte(secret), []byte(id)) }}
	if edit != nil {
		edit(&n)
	}
	e, err := h.db.Webhooks.Create(context.Background(), n)
	if err != nil {
		h.t.Fatal(err)
	}
	return e, secret
}

// quiet is the dispatcher configuration of the tests: short waits, no logs.
func quiet(cfg webhook.Config) webhook.Config {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.ThrottledWait == 0 {
		cfg.ThrottledWait = 100 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	return cfg
}

// start runs a dispatcher with the harness's key and guard until the test ends.
func (h *harness) start(cfg webhook.Config) *webhook.Dispatcher {
	return h.startWith(h.guard, cfg)
}

func (h *harness) startWith(guard *egress.Guard, cfg webhook.Config) *webhook.Dispatcher {
	d := webhook.NewDispatcher(h.db, h.box, guard, quiet(cfg))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	h.t.Cleanup(func() { stop(); <-done })
	return d
}

// emit queues an event of the harness's workspace the way areas do, in a transaction of their own.
func (h *harness) emit(typ string) store.Event {
	h.t.Helper()
	var ev store.Event
	if err := h.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		var err error
		ev, err = events.NewOutbox(h.db, events.Builtin()).EmitJSON(ctx, tx, h.ws.ID, typ, []byte(`{"link_id":"lnk_1"}`))
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// delivery returns the delivery of an event to an endpoint.
func (h *harness) delivery(eventID, endpointID string) store.Delivery {
	h.t.Helper()
	var d store.Delivery
	if err := h.db.Bun().NewSelect().Model(&d).Where("d.event_id = ? AND d.endpoint_id = ?", eventID, endpointID).
		Scan(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// status reports a delivery's status ("" while it cannot be read).
func (h *harness) status(eventID, endpointID string) string {
	var d store.Delivery
	if err := h.db.Bun().NewSelect().Model(&d).Where("d.event_id = ? AND d.endpoint_id = ?", eventID, endpointID).
		Scan(context.Background()); err != nil {
		return ""
	}
	return d.Status
}

func (h *harness) attempts(deliveryID string) []store.Attempt {
	h.t.Helper()
	as, err := h.db.Deliveries.Attempts(context.Background(), deliveryID)
	if err != nil {
		h.t.Fatal(err)
	}
	return as
}

// events returns the workspace's events of a type, oldest first.
func (h *harness) events(typ string) []store.Event {
	h.t.Helper()
	var evs []store.Event
	if err := h.db.Bun().NewSelect().Model(&evs).Where("ev.workspace_id = ? AND ev.type = ?", h.ws.ID, typ).
		Order("ev.id").Scan(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// set changes columns of an endpoint directly, as the API (written separately) would.
func (h *harness) set(endpointID string, columns map[string]any) {
	h.t.Helper()
	q := h.db.Bun().NewUpdate().Table("webhook_endpoints").Where("id = ?", endpointID)
	for c, v := range columns {
		q = q.Set("? = ?", bun.Ident(c), v)
	}
	if _, err := q.Exec(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// verify checks a request's signature with the official Standard Webhooks library and one secret.
func verify(t *testing.T, secret string, r receivertest.Request) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh.Verify(r.Body, r.Header)
}

var spec struct {
	once sync.Once
	doc  *openapi3.T
	err  error
}

// conformsTo checks an event's data against a component schema of the API contract, as SDKs generated from it
// would parse it.
func conformsTo(t *testing.T, ev store.Event, schema string) {
	t.Helper()
	spec.once.Do(func() { spec.doc, spec.err = openapi3.NewLoader().LoadFromData(api.Spec) })
	if spec.err != nil {
		t.Fatal(spec.err)
	}
	ref := spec.doc.Components.Schemas[schema]
	if ref == nil || ref.Value == nil {
		t.Fatalf("no component schema %s in the spec", schema)
	}
	var data any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if err := ref.Value.VisitJSON(data); err != nil {
		t.Errorf("%s data %s does not match %s: %v", ev.Type, ev.Data, schema, err)
	}
}

// newBox returns a Box over a fresh random key.
func newBox(t *testing.T) *sealbox.Box {
	t.Helper()
	key := make([]byte, sealbox.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	box, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}
