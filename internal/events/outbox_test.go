package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

func newWorkspace(t *testing.T, db *store.DB, name string) store.Workspace {
	t.Helper()
	w, err := db.Workspaces.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func newEndpoint(t *testing.T, db *store.DB, workspaceID string, patterns ...string) store.WebhookEndpoint {
	t.Helper()
	e, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: workspaceID, URL: "https://receiver.example/hook",
		Events: patterns, SealSecret: func(id string) string { return "sealed-for-" + id }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func deliveriesOf(t *testing.T, db *store.DB, eventID string) []store.Delivery {
	t.Helper()
	var ds []store.Delivery
	if err := db.Bun().NewSelect().Model(&ds).Where("d.event_id = ?", eventID).Order("d.endpoint_id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	return ds
}

func link(id string) gen.Link { return gen.Link{Id: id, Object: "link", Tags: []string{}} }

// EmitMany records events of several workspaces with their deliveries, in order, each named after its payload's
// type, delivered to the endpoints that receive it ("*" leaves out opt-in types).
func TestEmitMany(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		o := events.NewOutbox(db, events.Builtin())
		a, b, quiet := newWorkspace(t, db, "many A"), newWorkspace(t, db, "many B"), newWorkspace(t, db, "many quiet")
		aAll, aLinks := newEndpoint(t, db, a.ID, "*"), newEndpoint(t, db, a.ID, "link.*")
		bClicks := newEndpoint(t, db, b.ID, "link.clicked")
		clicked := gen.LinkClickedEvent{Click: gen.Click{Id: "clk_1", Object: "click", Class: "human", Device: "desktop"}}
		ps := []events.Pending{
			{WorkspaceID: a.ID, Payload: gen.LinkCreatedEvent{Link: link("lnk_0")}},
			{WorkspaceID: b.ID, Payload: gen.LinkCreatedEvent{Link: link("lnk_1")}},
			{WorkspaceID: a.ID, Payload: clicked},
			{WorkspaceID: quiet.ID, Payload: gen.LinkCreatedEvent{Link: link("lnk_3")}},
			{WorkspaceID: b.ID, Payload: &clicked},
		}
		types := []string{"link.created", "link.created", "link.clicked", "link.created", "link.clicked"}
		var evs []store.Event
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			var err error
			evs, err = o.EmitMany(ctx, tx, ps)
			return err
		})
		if err != nil || len(evs) != len(ps) {
			t.Fatalf("%d events, %v", len(evs), err)
		}
		want := [][]string{{aAll.ID, aLinks.ID}, nil, {aLinks.ID}, nil, {bClicks.ID}}
		for i, ev := range evs {
			stored, err := db.Events.Get(ctx, ps[i].WorkspaceID, ev.ID)
			want, _ := json.Marshal(ps[i].Payload)
			if err != nil || stored.Type != types[i] || !jsonEqual(stored.Data, want) {
				t.Errorf("event %d: %+v %s, %v", i, stored, stored.Data, err)
			}
			if i > 0 && ev.ID <= evs[i-1].ID {
				t.Errorf("event %d: ID %s not after %s", i, ev.ID, evs[i-1].ID)
			}
		}
		for i, ev := range evs {
			var got []string
			for _, d := range deliveriesOf(t, db, ev.ID) {
				got = append(got, d.EndpointID)
				if d.Status != store.DeliveryPending || d.EventType != types[i] || d.WorkspaceID != ps[i].WorkspaceID {
					t.Errorf("event %d: delivery %+v", i, d)
				}
			}
			w := slices.Clone(want[i])
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Errorf("event %d (%s of %s): deliveries to %v, want %v", i, types[i], ps[i].WorkspaceID, got, w)
			}
		}
		if evs, err := o.EmitMany(ctx, db.Bun(), nil); err != nil || len(evs) != 0 {
			t.Errorf("no events: %v, %v", evs, err)
		}
		if _, err := o.Emit(ctx, db.Bun(), a.ID, map[string]string{"not": "a payload"}); err == nil {
			t.Error("a value of no registered payload type was emitted")
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// The change, its event and its deliveries commit together or not at all.
func TestEmitIsTransactional(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		o := events.NewOutbox(db, events.Builtin())
		w := newWorkspace(t, db, "outbox")
		newEndpoint(t, db, w.ID, "*")
		boom := errors.New("business change failed")
		var evID string
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			ev, err := o.Emit(ctx, tx, w.ID, gen.LinkCreatedEvent{Link: link("lnk_1")})
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

// An event reaches the endpoints of its workspace that receive it; a disabled one gets a skipped (recoverable)
// delivery, another workspace's endpoints nothing.
func TestEmitFansOutBySubscription(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		o := events.NewOutbox(db, events.Builtin())
		w := newWorkspace(t, db, "fan-out")
		all := newEndpoint(t, db, w.ID, "*")
		links := newEndpoint(t, db, w.ID, "link.*")
		newEndpoint(t, db, w.ID, "webhook.ping")
		disabled := newEndpoint(t, db, w.ID, "link.created")
		if err := db.Webhooks.SetStatus(ctx, w.ID, disabled.ID, store.EndpointDisabled, nil); err != nil {
			t.Fatal(err)
		}
		other := newWorkspace(t, db, "someone else")
		newEndpoint(t, db, other.ID, "*")

		ev, err := o.Emit(ctx, db.Bun(), w.ID, gen.LinkCreatedEvent{Link: link("lnk_1")})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, d := range deliveriesOf(t, db, ev.ID) {
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
		clicked, err := o.Emit(ctx, db.Bun(), w.ID, gen.LinkClickedEvent{})
		if err != nil {
			t.Fatal(err)
		}
		if ds := deliveriesOf(t, db, clicked.ID); len(ds) != 1 || ds[0].EndpointID != links.ID {
			t.Errorf("opt-in event reached %v, want only the link.* endpoint", ds)
		}
	})
}

// Subscribers names the workspaces where an endpoint receives a type: by name or family for an opt-in type, never
// through "*".
func TestSubscribers(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		o := events.NewOutbox(db, events.Builtin())
		named, family, star := newWorkspace(t, db, "by name"), newWorkspace(t, db, "by family"), newWorkspace(t, db, "star")
		none := newWorkspace(t, db, "no endpoint")
		newEndpoint(t, db, named.ID, "link.clicked")
		newEndpoint(t, db, family.ID, "link.*")
		newEndpoint(t, db, star.ID, "*")
		got, err := o.Subscribers(ctx, db.Reader(), gen.LinkClickedEvent{}, named.ID, family.ID, star.ID, none.ID, named.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !got[named.ID] || !got[family.ID] {
			t.Errorf("subscribers of link.clicked: %v", got)
		}
		got, _ = o.Subscribers(ctx, db.Reader(), gen.LinkCreatedEvent{}, named.ID, family.ID, star.ID, none.ID)
		if len(got) != 2 || !got[family.ID] || !got[star.ID] {
			t.Errorf("subscribers of link.created: %v", got)
		}
	})
}

// A type defined at run time is published with EmitJSON, to the endpoints of its workspace that subscribe to it.
func TestEmitJSON(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		types := events.Builtin()
		o := events.NewOutbox(db, types)
		w := newWorkspace(t, db, "custom")
		e := newEndpoint(t, db, w.ID, "order.*")
		if _, err := o.EmitJSON(ctx, db.Bun(), w.ID, "order.paid", []byte(`{}`)); err == nil {
			t.Fatal("an undefined type was published")
		}
		if err := types.Define(events.Type{WorkspaceID: w.ID, Name: "order.paid", Schema: map[string]any{"type": "object"}}); err != nil {
			t.Fatal(err)
		}
		ev, err := o.EmitJSON(ctx, db.Bun(), w.ID, "order.paid", []byte(`{"total":12}`))
		if err != nil {
			t.Fatal(err)
		}
		if ds := deliveriesOf(t, db, ev.ID); len(ds) != 1 || ds[0].EndpointID != e.ID || string(ev.Data) != `{"total":12}` {
			t.Errorf("event %+v, deliveries %+v", ev, ds)
		}
		if time.Since(ev.CreatedAt) > time.Minute || ev.CreatedAt.Location() != time.UTC {
			t.Errorf("created_at %v", ev.CreatedAt)
		}
	})
}

// An endpoint with an instance filter receives the events of its instances and the events of no instance; an
// endpoint without one receives every instance's.
func TestEmitInstanceFilter(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		o := events.NewOutbox(db, events.Builtin())
		w := newWorkspace(t, db, "instance filter")
		all := newEndpoint(t, db, w.ID, "*")
		one, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: w.ID, URL: "https://receiver.example/one",
			Events: []string{"*"}, InstanceIDs: []string{"ins_A"}, SealSecret: func(id string) string { return "s-" + id }})
		if err != nil {
			t.Fatal(err)
		}
		ps := []events.Pending{
			{WorkspaceID: w.ID, InstanceID: "ins_A", Payload: gen.InstanceDeletedEvent{Instance: gen.Instance{Id: "ins_A"}, InstanceId: "ins_A", Sequence: 1}},
			{WorkspaceID: w.ID, InstanceID: "ins_B", Payload: gen.InstanceDeletedEvent{Instance: gen.Instance{Id: "ins_B"}, InstanceId: "ins_B", Sequence: 1}},
			{WorkspaceID: w.ID, Payload: gen.LinkCreatedEvent{Link: link("lnk_0")}},
		}
		var evs []store.Event
		err = db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			evs, err = o.EmitMany(ctx, tx, ps)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{{all.ID, one.ID}, {all.ID}, {all.ID, one.ID}}
		for i, ev := range evs {
			var got []string
			for _, d := range deliveriesOf(t, db, ev.ID) {
				got = append(got, d.EndpointID)
			}
			slices.Sort(want[i])
			if !slices.Equal(got, want[i]) {
				t.Errorf("event %d delivered to %v, want %v", i, got, want[i])
			}
		}
	})
}
