package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The dispatcher prunes events past the retention period as it starts, with their deliveries, but keeps an old
// event whose delivery is still pending.
func TestDispatcherPrunesAtStart(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		paused := receivertest.New(t, nil)
		delivered := receivertest.New(t, nil)
		p, _ := h.endpoint(paused.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.deleted"} })
		d, _ := h.endpoint(delivered.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.created"} })
		h.set(p.ID, map[string]any{"status": store.EndpointPaused})
		old := h.emit("link.created")
		waiting := h.emit("link.deleted")
		recent := h.emit("link.created")
		// Delivered long ago: mark the first delivery succeeded and age both old events.
		ctx := context.Background()
		h.record(0, webhook.AttemptResult{DeliveryID: h.delivery(old.ID, d.ID).ID, StartedAt: time.Now(), Succeeded: true})
		if _, err := db.Bun().NewUpdate().Table("events").Set("created_at = ?", time.Now().Add(-2*time.Hour).UTC().Truncate(time.Microsecond)).
			Where("id IN (?, ?)", old.ID, waiting.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		h.start(webhook.Config{Retention: time.Hour})
		await.Equal(t, "the old delivered event pruned", func() error {
			_, err := db.Events.Get(ctx, h.ws.ID, old.ID)
			return err
		}, store.ErrNotFound)
		if n, _ := db.Bun().NewSelect().Table("webhook_deliveries").Where("event_id = ?", old.ID).Count(ctx); n != 0 {
			t.Errorf("%d deliveries of the pruned event remain", n)
		}
		for _, ev := range []store.Event{waiting, recent} {
			if _, err := db.Events.Get(ctx, h.ws.ID, ev.ID); err != nil {
				t.Errorf("event %s: %v; want it kept", ev.ID, err)
			}
		}
		if s := h.status(waiting.ID, p.ID); s != store.DeliveryPending {
			t.Errorf("the waiting delivery is %q", s)
		}
	})
}
