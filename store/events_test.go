package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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

func emit(t *testing.T, db *store.DB, workspaceID, eventType string) store.Event {
	t.Helper()
	var ev store.Event
	err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		var err error
		ev, err = db.Events.Emit(ctx, tx, store.NewEvent{WorkspaceID: workspaceID, Type: eventType, Data: map[string]any{"n": 1}})
		return err
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

func TestSubscribed(t *testing.T) {
	tests := []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{[]string{"link.created"}, "link.created", true},
		{[]string{"link.created"}, "link.deleted", false},
		{[]string{"link.*"}, "link.max_clicks_reached", true},
		{[]string{"link.*"}, "linked.created", false},
		{[]string{"link.*"}, "link.clicked", true},
		{[]string{"*"}, "message.received", true},
		{[]string{"*"}, "link.clicked", false},
		{[]string{"*"}, "link.listed", false},
		{[]string{"*", "link.clicked"}, "link.clicked", true},
		{nil, "link.created", false},
	}
	for _, tt := range tests {
		if got := store.Subscribed(tt.patterns, tt.typ); got != tt.want {
			t.Errorf("Subscribed(%v, %s) = %v", tt.patterns, tt.typ, got)
		}
	}
	if got := store.OptInEventTypes(); !slices.Equal(got, []string{"link.clicked", "link.listed"}) {
		t.Errorf("OptInEventTypes() = %v", got)
	}
}

// EmitMany records events of several workspaces with their deliveries, in order, as Emit would one by one.
func TestEmitMany(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, b, quiet := newWorkspace(t, db, "many A"), newWorkspace(t, db, "many B"), newWorkspace(t, db, "many quiet")
		aAll, aLinks := newEndpoint(t, db, a.ID, "*"), newEndpoint(t, db, a.ID, "link.*")
		bClicks := newEndpoint(t, db, b.ID, "link.clicked")
		ns := []store.NewEvent{
			{WorkspaceID: a.ID, Type: "link.created", Data: map[string]int{"n": 0}},
			{WorkspaceID: b.ID, Type: "link.created", Data: map[string]int{"n": 1}},
			{WorkspaceID: a.ID, Type: "link.clicked", Data: map[string]int{"n": 2}},
			{WorkspaceID: quiet.ID, Type: "link.created", Data: map[string]int{"n": 3}},
			{WorkspaceID: b.ID, Type: "link.clicked", Data: map[string]int{"n": 4}},
		}
		var evs []store.Event
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			var err error
			evs, err = db.Events.EmitMany(ctx, tx, ns)
			return err
		})
		if err != nil || len(evs) != len(ns) {
			t.Fatalf("%d events, %v", len(evs), err)
		}
		want := [][]string{{aAll.ID, aLinks.ID}, nil, {aLinks.ID}, nil, {bClicks.ID}}
		for i, ev := range evs {
			stored, err := db.Events.Get(ctx, ns[i].WorkspaceID, ev.ID)
			var data map[string]int
			_ = json.Unmarshal(stored.Data, &data)
			if err != nil || stored.Type != ns[i].Type || data["n"] != i {
				t.Errorf("event %d: %+v %s, %v", i, stored, stored.Data, err)
			}
			if i > 0 && ev.ID <= evs[i-1].ID {
				t.Errorf("event %d: ID %s not after %s", i, ev.ID, evs[i-1].ID)
			}
			var got []string
			for _, d := range deliveriesOf(t, db, ev.ID) {
				got = append(got, d.EndpointID)
				if d.Status != store.DeliveryPending || d.EventType != ns[i].Type || d.WorkspaceID != ns[i].WorkspaceID {
					t.Errorf("event %d: delivery %+v", i, d)
				}
			}
			w := slices.Clone(want[i])
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Errorf("event %d (%s of %s): deliveries to %v, want %v", i, ns[i].Type, ns[i].WorkspaceID, got, w)
			}
		}
		if evs, err := db.Events.EmitMany(ctx, db.Bun(), nil); err != nil || len(evs) != 0 {
			t.Errorf("no events: %v, %v", evs, err)
		}
	})
}

// The change, its event and its deliveries commit together or not at all.
func TestEmitIsTransactional(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "outbox")
		newEndpoint(t, db, w.ID, "*")
		boom := errors.New("business change failed")
		var evID string
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			ev, err := db.Events.Emit(ctx, tx, store.NewEvent{WorkspaceID: w.ID, Type: "link.created", Data: map[string]string{}})
			evID = ev.ID
			if err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if _, err := db.Events.Get(ctx, w.ID, evID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the event of a rolled-back change exists: %v", err)
		}
		if ds := deliveriesOf(t, db, evID); len(ds) != 0 {
			t.Errorf("%d deliveries of a rolled-back change", len(ds))
		}
	})
}

func TestEmitFansOutBySubscription(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "fan-out")
		all := newEndpoint(t, db, w.ID, "*")
		links := newEndpoint(t, db, w.ID, "link.*")
		newEndpoint(t, db, w.ID, "message.received")
		disabled := newEndpoint(t, db, w.ID, "link.created")
		if err := db.Webhooks.SetStatus(ctx, w.ID, disabled.ID, store.EndpointDisabled, nil); err != nil {
			t.Fatal(err)
		}
		other := newWorkspace(t, db, "someone else")
		newEndpoint(t, db, other.ID, "*")

		ev := emit(t, db, w.ID, "link.created")
		ds := deliveriesOf(t, db, ev.ID)
		got := map[string]string{}
		for _, d := range ds {
			got[d.EndpointID] = d.Status
			if d.WorkspaceID != w.ID || d.EventType != "link.created" {
				t.Errorf("delivery %+v", d)
			}
		}
		want := map[string]string{all.ID: store.DeliveryPending, links.ID: store.DeliveryPending, disabled.ID: store.DeliverySkipped}
		if len(got) != len(want) {
			t.Fatalf("deliveries %v, want %v", got, want)
		}
		for id, status := range want {
			if got[id] != status {
				t.Errorf("endpoint %s: %q, want %q", id, got[id], status)
			}
		}
		clicked := emit(t, db, w.ID, "link.clicked")
		if ds := deliveriesOf(t, db, clicked.ID); len(ds) != 1 || ds[0].EndpointID != links.ID {
			t.Errorf("opt-in event reached %v, want only the link.* endpoint", ds)
		}
	})
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
		mine := func(ds []store.Delivery) (n int) {
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
