//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// An instance whose real client cannot reach WhatsApp is shown reconnecting, with the cause as its reason and the
// attempt counted, while the channel runtime backs off; past the runtime's failure budget it fails. Each change
// is an instance.status_changed event, which webhooks deliver.
func TestOfflineInstanceReconnectsUnderTheRuntimeBackoff(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		box, err := sealbox.New(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		svc, err := channels.New(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		rt := hub.New(db, svc, hub.Options{Owner: "offline-test", Lease: 6 * time.Second, Rate: -1,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Budget: 4, Logger: quiet})
		svc.Attach(rt, rt)
		var dials atomic.Int64
		if err := svc.AddProvider(New(db, Options{NewClient: offline(&dials)})); err != nil {
			t.Fatal(err)
		}
		run, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = rt.Run(run) }()
		t.Cleanup(func() { cancel(); <-done })

		ws, err := db.Workspaces.Create(ctx, "whatsapp offline")
		if err != nil {
			t.Fatal(err)
		}
		inst, err := svc.Create(ctx, ws.ID, channels.NewInstance{Name: "wa", Provider: Name, Config: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Connect(ctx, ws.ID, inst.ID); err != nil {
			t.Fatal(err)
		}
		state := func() store.Instance {
			i, err := db.Instances.ByID(ctx, db.Reader(), inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			return i
		}
		seen := await.Until(t, "the instance to reconnect with the cause", state, func(i store.Instance) bool {
			return i.Status == string(channels.StatusReconnecting) && i.ReconnectAttempt >= 2
		})
		if !strings.Contains(seen.StatusReason, "server_unreachable") || !strings.Contains(seen.StatusReason, errOffline.Error()) {
			t.Errorf("reconnecting because %q, want the unreachable server and its cause", seen.StatusReason)
		}
		final := await.Until(t, "the instance to fail past the budget", state, func(i store.Instance) bool {
			return i.Status == string(channels.StatusFailed)
		})
		if !strings.Contains(final.StatusReason, "gave up after 4 failed attempts") {
			t.Errorf("failed because %q", final.StatusReason)
		}
		evs, _, err := db.Events.List(ctx, ws.ID, store.EventFilter{Type: "instance.status_changed"}, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var statuses []string
		for _, e := range evs {
			var d struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, d.Status)
		}
		got := strings.Join(statuses, " ")
		if !strings.Contains(got, "reconnecting") || !strings.Contains(got, "failed") {
			t.Errorf("instance.status_changed events: %v, want reconnecting then failed", statuses)
		}
	})
}
