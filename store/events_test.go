package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func newEndpoint(t *testing.T, db *store.DB, workspaceID string, events ...string) store.WebhookEndpoint {
	t.Helper()
	e, err := db.Webhooks.Create(context.Background(), store.NewWebhookEndpoint{
		WorkspaceID: workspaceID, URL: "https://receiver.example/hook", Events: events,
		SealSecret: func(id string) string { return "sealed-for-" + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// emit writes an event of a type with a pending delivery to every endpoint of the workspace, as the outbox would
// for endpoints subscribed to "*" (which decides who receives what is package events' business, tested there).
func emit(t *testing.T, db *store.DB, workspaceID, eventType string) store.Event {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ev := store.Event{ID: store.NewID("evt"), WorkspaceID: workspaceID, Type: eventType, Data: []byte(`{"n":1}`), CreatedAt: now}
	var endpoints []store.WebhookEndpoint
	if err := db.Bun().NewSelect().Model(&endpoints).Where("e.workspace_id = ?", workspaceID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ds []store.Delivery
	for _, e := range endpoints {
		ds = append(ds, store.Delivery{ID: store.NewID("dlv"), WorkspaceID: workspaceID, EndpointID: e.ID, EventID: ev.ID,
			EventType: eventType, Status: store.DeliveryPending, NextAttemptAt: &now, CreatedAt: now, UpdatedAt: now})
	}
	err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		return db.Events.Insert(ctx, tx, []store.Event{ev}, ds)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func deliveriesOf(t *testing.T, db *store.DB, eventID string) []store.Delivery {
	t.Helper()
	var ds []store.Delivery
	if err := db.Bun().NewSelect().Model(&ds).Where("d.event_id = ?", eventID).Order("d.endpoint_id").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ds
}

// Two dispatchers claiming at once never get the same delivery; an expired lease makes it due again.
func TestClaimIsExclusiveAndLeased(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "claims")
		e := newEndpoint(t, db, w.ID, "*")
		for range 40 {
			emit(t, db, w.ID, "link.created")
		}
		now := time.Now().Add(time.Second)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ds, err := db.Deliveries.Claim(ctx, now, time.Minute, 7, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ds) == 0 {
						return
					}
					mu.Lock()
					for _, d := range ds {
						if d.LeaseUntil == nil {
							t.Errorf("claimed without a lease: %+v", d)
						}
						if d.EndpointID == e.ID { // PostgreSQL is shared with other tests' deliveries
							seen[d.ID]++
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != 40 {
			t.Fatalf("claimed %d distinct deliveries, want 40", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("delivery %s claimed %d times", id, n)
			}
		}
		mine := func(ds []store.ClaimedDelivery) (n int) {
			for _, d := range ds {
				if d.EndpointID == e.ID {
					n++
				}
			}
			return n
		}
		if ds, _ := db.Deliveries.Claim(ctx, now.Add(30*time.Second), time.Minute, 1000, nil); mine(ds) != 0 {
			t.Errorf("%d deliveries claimed again while leased", mine(ds))
		}
		again, err := db.Deliveries.Claim(ctx, now.Add(2*time.Minute), time.Minute, 1000, nil)
		if err != nil || mine(again) != 40 {
			t.Errorf("after the leases ran out: %d, %v; want all 40 due again", mine(again), err)
		}
		if ds, _ := db.Deliveries.Claim(ctx, now.Add(10*time.Minute), time.Minute, 1000, []string{e.ID}); mine(ds) != 0 {
			t.Errorf("claimed %d deliveries of an excluded endpoint", mine(ds))
		}
	})
}

func eventIDs(evs []store.Event) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// The event log reads newest first or oldest first after an event, filtered by exact type or family.
func TestEventsList(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "event log")
		var ids []string
		// "link_x" would match the family "link." under LIKE, where "_" is a wildcard: it must not.
		for _, typ := range []string{"link.created", "message.received", "link.deleted", "linkxcreated.y", "link_x.created"} {
			ids = append(ids, emit(t, db, w.ID, typ).ID)
		}
		emit(t, db, newWorkspace(t, db, "other").ID, "link.created")

		tests := []struct {
			name string
			f    store.EventFilter
			p    store.Page
			want []string
			more bool
		}{
			{"newest first", store.EventFilter{}, store.Page{Limit: 2}, []string{ids[4], ids[3]}, true},
			{"older page", store.EventFilter{}, store.Page{Limit: 10, Before: ids[3]}, []string{ids[2], ids[1], ids[0]}, false},
			{"oldest first", store.EventFilter{Type: "*"}, store.Page{Limit: 2, After: ids[0]}, []string{ids[1], ids[2]}, true},
			{"after the last", store.EventFilter{}, store.Page{Limit: 2, After: ids[4]}, []string{}, false},
			{"family", store.EventFilter{Type: "link.*"}, store.Page{Limit: 10}, []string{ids[2], ids[0]}, false},
			{"family oldest first", store.EventFilter{Type: "link.*"}, store.Page{Limit: 1, After: ids[0]}, []string{ids[2]}, false},
			{"underscore family", store.EventFilter{Type: "link_x.*"}, store.Page{Limit: 10}, []string{ids[4]}, false},
			{"exact", store.EventFilter{Type: "message.received"}, store.Page{Limit: 10}, []string{ids[1]}, false},
			{"unknown", store.EventFilter{Type: "nothing.happened"}, store.Page{Limit: 10}, []string{}, false},
		}
		for _, tt := range tests {
			evs, more, err := db.Events.List(ctx, w.ID, tt.f, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			sameIDs(t, tt.name, eventIDs(evs), tt.want)
			if more != tt.more {
				t.Errorf("%s: more = %v", tt.name, more)
			}
			for _, ev := range evs {
				if ev.WorkspaceID != w.ID || ev.CreatedAt.Location() != time.UTC || string(ev.Data) == "" {
					t.Errorf("%s: event %+v", tt.name, ev)
				}
			}
		}
	})
}
