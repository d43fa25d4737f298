package hub

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A staggered start marks, in one transaction, every instance that will connect later: those that can show
// reconnecting do so with the start's reason and their own turn (attempt 0, pairing dropped), each with one
// instance.status_changed numbered next in its own sequence; one already reconnecting takes the new reason and
// turn without an event; offline instances, one restricted beyond its turn and IDs that no longer exist are left
// as they are.
func TestStaggeredMarksEachInstanceOnce(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.serve(New(db, e.rec, Options{Owner: "a", Logger: quiet()})) // not running: nothing else moves the instances
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		qr, expires := "qr-data", later
		states := map[string]func(i *store.Instance){
			"connected": func(i *store.Instance) { i.Status = string(channels.StatusConnected) },
			"pairing": func(i *store.Instance) {
				i.Status, i.QRCode, i.QRExpiresAt = string(channels.StatusAwaitingAuth), &qr, &expires
			},
			"reconnecting": func(i *store.Instance) {
				i.Status, i.StatusReason, i.ReconnectAttempt = string(channels.StatusReconnecting), "network down", 3
			},
			"restricted-long": func(i *store.Instance) {
				i.Status, i.ReconnectNextAt = string(channels.StatusRestricted), &later
			},
			"disconnected": func(i *store.Instance) { i.Status = string(channels.StatusDisconnected) },
		}
		ids := map[string]string{}
		before := map[string]store.Instance{}
		for name, set := range states {
			inst := e.instance(name)
			ids[name] = inst.ID
			e.setState(inst.ID, set)
			before[name] = e.get(inst.ID)
		}
		start := time.Now()
		next := map[string]time.Time{store.NewID("inst"): start} // deleted meanwhile
		for _, id := range ids {
			next[id] = start.Add(time.Duration(len(next)) * time.Second)
		}
		const reason = "reconnecting after the server started"
		if err := e.rec.Staggered(ctx, next, reason); err != nil {
			t.Fatalf("Staggered: %v", err)
		}

		for _, name := range []string{"connected", "pairing", "reconnecting"} {
			i := e.get(ids[name])
			turn := next[ids[name]].UTC().Truncate(time.Microsecond)
			if channels.Status(i.Status) != channels.StatusReconnecting || i.StatusReason != reason ||
				i.ReconnectAttempt != 0 || i.ReconnectNextAt == nil || !i.ReconnectNextAt.Equal(turn) {
				t.Errorf("%s: %s %q attempt %d at %v; want reconnecting %q attempt 0 at %v", name, i.Status,
					i.StatusReason, i.ReconnectAttempt, i.ReconnectNextAt, reason, turn)
			}
			if i.QRCode != nil || i.QRExpiresAt != nil {
				t.Errorf("%s kept its pairing code", name)
			}
			if !i.UpdatedAt.After(before[name].UpdatedAt) {
				t.Errorf("%s: updated_at %v not after %v", name, i.UpdatedAt, before[name].UpdatedAt)
			}
		}
		if i := e.get(ids["reconnecting"]); !i.StatusSince.Equal(before["reconnecting"].StatusSince) {
			t.Errorf("an instance already reconnecting moved its since from %v to %v", before["reconnecting"].StatusSince, i.StatusSince)
		}
		for _, name := range []string{"restricted-long", "disconnected"} {
			i, b := e.get(ids[name]), before[name]
			if i.Status != b.Status || !i.UpdatedAt.Equal(b.UpdatedAt) || i.EventSequence != b.EventSequence {
				t.Errorf("%s changed: %s (seq %d), was %s (seq %d)", name, i.Status, i.EventSequence, b.Status, b.EventSequence)
			}
		}

		// One event for each instance that moved, numbered right after what it had; none for the others.
		got := map[string][]int64{}
		for _, ev := range e.statusEvents() {
			if ev.Status == string(channels.StatusReconnecting) && ev.Reason == reason {
				got[ev.instanceID] = append(got[ev.instanceID], ev.Sequence)
			}
		}
		for name, id := range ids {
			want := 0
			if name == "connected" || name == "pairing" {
				want = 1
			}
			if len(got[id]) != want {
				t.Errorf("%s: %d reconnecting events, want %d", name, len(got[id]), want)
				continue
			}
			if want == 1 {
				if i := e.get(id); got[id][0] != before[name].EventSequence+1 || i.EventSequence != got[id][0] {
					t.Errorf("%s: event numbered %d, instance at %d; want both %d", name, got[id][0], i.EventSequence,
						before[name].EventSequence+1)
				}
			}
		}
	})
}

func (e *env) get(id string) store.Instance {
	e.t.Helper()
	i, err := e.db.Instances.Get(context.Background(), e.ws, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return i
}

// setState changes an instance's row as set says, as a fixture (no event).
func (e *env) setState(id string, set func(i *store.Instance)) {
	e.t.Helper()
	if err := e.db.RunInTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
		i, err := e.db.Instances.Lock(ctx, tx, id)
		if err != nil {
			return err
		}
		set(&i)
		return e.db.Instances.Save(ctx, tx, &i)
	}); err != nil {
		e.t.Fatal(err)
	}
}

// statusEvent is what the stagger tests read of an instance.status_changed event.
type statusEvent struct {
	instanceID string
	Sequence   int64  `json:"sequence"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
}

// statusEvents lists the workspace's instance.status_changed events.
func (e *env) statusEvents() []statusEvent {
	e.t.Helper()
	evs, _, err := e.db.Events.List(context.Background(), e.ws, store.EventFilter{Type: "instance.status_changed"},
		store.Page{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]statusEvent, len(evs))
	for k, ev := range evs {
		if err := json.Unmarshal(ev.Data, &out[k]); err != nil {
			e.t.Fatal(err)
		}
		out[k].instanceID = ev.InstanceID
	}
	return out
}

// A session of a staggered start reports connecting over an instance that shows reconnecting already: nothing
// changes and no event is written. Its connected report moves it with one event, numbered next; a later report of
// connecting (the session lost its network) moves it back to reconnecting with the attempt counted.
func TestConnectingOverStaggeredChangesNothing(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.serve(New(db, e.rec, Options{Owner: "a", Logger: quiet()})) // not running: nothing else moves the instance
		inst := e.instance("one")
		e.setState(inst.ID, func(i *store.Instance) { i.Status = string(channels.StatusConnected) })
		if err := e.rec.Staggered(ctx, map[string]time.Time{inst.ID: time.Now()}, "reconnecting after the server started"); err != nil {
			t.Fatal(err)
		}
		marked := e.get(inst.ID)
		sink := e.rec.SinkFor(inst.ID)
		if err := sink.State(ctx, channels.StatusConnecting, "dialling"); err != nil {
			t.Fatal(err)
		}
		if i := e.get(inst.ID); i.Status != marked.Status || i.StatusReason != marked.StatusReason ||
			!i.UpdatedAt.Equal(marked.UpdatedAt) || i.EventSequence != marked.EventSequence || i.ReconnectAttempt != 0 {
			t.Fatalf("connecting over reconnecting changed the instance: %s %q seq %d attempt %d", i.Status,
				i.StatusReason, i.EventSequence, i.ReconnectAttempt)
		}
		if err := sink.Connected(ctx, channels.Party{Address: "me"}, nil); err != nil {
			t.Fatal(err)
		}
		if i := e.get(inst.ID); channels.Status(i.Status) != channels.StatusConnected || i.EventSequence != marked.EventSequence+1 {
			t.Fatalf("after Connected: %s seq %d, want connected seq %d", i.Status, i.EventSequence, marked.EventSequence+1)
		}
		if err := sink.State(ctx, channels.StatusConnecting, "network lost"); err != nil {
			t.Fatal(err)
		}
		if i := e.get(inst.ID); channels.Status(i.Status) != channels.StatusReconnecting || i.ReconnectAttempt != 1 ||
			i.EventSequence != marked.EventSequence+2 {
			t.Fatalf("connecting over connected: %s attempt %d seq %d, want reconnecting attempt 1 seq %d", i.Status,
				i.ReconnectAttempt, i.EventSequence, marked.EventSequence+2)
		}
		var seqs []int64
		for _, ev := range e.statusEvents() {
			if ev.instanceID == inst.ID && ev.Sequence > marked.EventSequence {
				seqs = append(seqs, ev.Sequence)
			}
		}
		slices.Sort(seqs)
		if !slices.Equal(seqs, []int64{marked.EventSequence + 1, marked.EventSequence + 2}) {
			t.Errorf("status events after the stagger numbered %v, want %d and %d", seqs, marked.EventSequence+1, marked.EventSequence+2)
		}
	})
}
