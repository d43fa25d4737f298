package eventstream_test

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
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

// fixture is a running hub over a database, and an outbox to emit with.
type fixture struct {
	t      *testing.T
	db     *store.DB
	outbox *events.Outbox
	hub    *eventstream.Hub
	stop   func()
}

func newFixture(t *testing.T, db *store.DB, cfg eventstream.Config) *fixture {
	t.Helper()
	f := &fixture{t: t, db: db, outbox: events.NewOutbox(db, events.Builtin())}
	f.hub = eventstream.NewHub(db, f.outbox.Types(), cfg)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.hub.Run(runCtx) }()
	f.stop = func() { cancel(); <-done }
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) workspace(name string) string {
	f.t.Helper()
	w, err := f.db.Workspaces.Create(ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return w.ID
}

// emit records events in one transaction and returns their IDs.
func (f *fixture) emit(ps ...events.Pending) []string {
	f.t.Helper()
	var evs []store.Event
	err := f.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		evs, err = f.outbox.EmitMany(ctx, tx, ps)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func created(workspaceID, linkID string) events.Pending {
	return events.Pending{WorkspaceID: workspaceID, Payload: gen.LinkCreatedEvent{Link: gen.Link{Id: linkID, Object: "link",
		Tags: []string{}}}}
}

func deleted(workspaceID, linkID string) events.Pending {
	return events.Pending{WorkspaceID: workspaceID, Payload: gen.LinkDeletedEvent{Link: gen.Link{Id: linkID, Object: "link",
		Tags: []string{}}}}
}

// take reads n events from a subscription, waiting for them as a subscriber does.
func take(t *testing.T, s *eventstream.Subscription, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		evs, err := s.Take(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, e := range evs {
			env, err := e.Envelope()
			if err != nil {
				t.Fatal(err)
			}
			var decoded struct{ ID string }
			if err := json.Unmarshal(env, &decoded); err != nil || decoded.ID != e.ID {
				t.Fatalf("envelope %s of %s: %v", env, e.ID, err)
			}
			got = append(got, e.ID)
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-s.Ready():
		case <-s.Done():
		case <-deadline:
			t.Fatalf("waited for %d events, got %v", n, got)
		}
	}
	return got
}

// nothingMore checks that a subscription has nothing waiting once the hub has read everything committed so far.
func nothingMore(t *testing.T, f *fixture, s *eventstream.Subscription, workspaceID string) {
	t.Helper()
	marker := f.emit(created(workspaceID, "lnk_marker"))[0]
	if got := take(t, s, 1); got[0] != marker {
		t.Fatalf("got %v before the marker %s", got, marker)
	}
}

func TestSubscriptions(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, eventstream.Config{})
		ws, other := f.workspace("stream"), f.workspace("stream other")

		t.Run("live events of the workspace, in order", func(t *testing.T) {
			s, err := f.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f.emit(created(other, "lnk_other"))
			want := f.emit(created(ws, "lnk_1"), deleted(ws, "lnk_1"))
			want = append(want, f.emit(created(ws, "lnk_2"))...)
			if got := take(t, s, 3); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			nothingMore(t, f, s, ws)
		})

		t.Run("types, instances and payload filters", func(t *testing.T) {
			s, err := f.hub.Subscribe(ctx, ws, eventstream.Filter{Types: []string{"link.created", "instance.*"},
				InstanceIDs: []string{"ins_a"},
				Filters:     []store.WebhookFilter{{Pointer: "/link/id", Op: "prefix", Value: "lnk_keep"}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			keep := created(ws, "lnk_keep_1")
			otherInstance := created(ws, "lnk_keep_2")
			otherInstance.InstanceID = "ins_b"
			sameInstance := created(ws, "lnk_keep_3")
			sameInstance.InstanceID = "ins_a"
			ids := f.emit(keep, deleted(ws, "lnk_keep_1"), created(ws, "lnk_drop"), otherInstance, sameInstance)
			got := take(t, s, 2)
			if !slices.Equal(got, []string{ids[0], ids[4]}) {
				t.Fatalf("got %v, want %v", got, []string{ids[0], ids[4]})
			}
		})

		t.Run("replay after a cursor, then live, with no gap and no repeat", func(t *testing.T) {
			ids := f.emit(created(ws, "lnk_r1"), created(ws, "lnk_r2"), created(ws, "lnk_r3"))
			pos, err := db.Events.PositionOf(ctx, ws, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.hub.Subscribe(ctx, ws, eventstream.Filter{}, &pos)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			more := f.emit(created(ws, "lnk_r4"))
			got := take(t, s, 3)
			if want := append(ids[1:], more...); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			nothingMore(t, f, s, ws)
		})

		t.Run("a subscriber too slow is closed", func(t *testing.T) {
			slow := newFixture(t, db, eventstream.Config{Buffer: 3})
			s, err := slow.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			slow.emit(created(ws, "a"), created(ws, "b"), created(ws, "c"), created(ws, "d"))
			select {
			case <-s.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the subscription was not closed")
			}
			if _, err := s.Take(ctx); !errors.Is(err, eventstream.ErrOverflow) {
				t.Fatalf("Take = %v, want ErrOverflow", err)
			}
			if n := slow.hub.Subscribers(); n != 0 {
				t.Fatalf("%d subscribers left", n)
			}
		})

		t.Run("a stopping hub closes its subscriptions", func(t *testing.T) {
			stopping := newFixture(t, db, eventstream.Config{})
			s, err := stopping.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			stopping.stop()
			<-s.Done()
			if _, err := s.Take(ctx); !errors.Is(err, eventstream.ErrClosed) {
				t.Fatalf("Take = %v, want ErrClosed", err)
			}
			if _, err := stopping.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil); !errors.Is(err, eventstream.ErrClosed) {
				t.Fatalf("Subscribe on a stopped hub = %v", err)
			}
		})
	})
}

// On PostgreSQL an event whose transaction began first and committed last still reaches a live subscriber before
// the events committed meanwhile, so that a subscriber resuming after the last event it saw cannot miss it.
func TestLateCommitArrivesInCommitOrder(t *testing.T) {
	db := storetest.Postgres(t)
	f := newFixture(t, db, eventstream.Config{})
	ws := f.workspace("late")
	s, err := f.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inserted, release, done := make(chan string), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
			ev, err := f.outbox.Emit(ctx, tx, ws, gen.LinkCreatedEvent{Link: gen.Link{Id: "lnk_slow", Object: "link", Tags: []string{}}})
			if err != nil {
				return err
			}
			inserted <- ev.ID
			<-release
			return nil
		})
	}()
	slow := <-inserted
	fast := f.emit(created(ws, "lnk_fast"))[0]
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := take(t, s, 2); !slices.Equal(got, []string{slow, fast}) {
		t.Fatalf("got %v, want [%s %s]", got, slow, fast)
	}
}

// TestOneReadIsTakenTogether: the events the hub reads together are handed to a subscription at once, so that the
// first Take after Ready has all of them, in commit order (its stream writes and flushes them once), and events of
// another workspace in the same read are left out.
func TestOneReadIsTakenTogether(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, eventstream.Config{})
		ws, other := f.workspace("Batch"), f.workspace("Other")
		s, err := f.hub.Subscribe(ctx, ws, eventstream.Filter{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ids := f.emit(created(ws, "lnk_1"), created(other, "lnk_x"), created(ws, "lnk_2"), deleted(ws, "lnk_1"))
		want := []string{ids[0], ids[2], ids[3]}
		select {
		case <-s.Ready():
		case <-time.After(20 * time.Second):
			t.Fatal("no event")
		}
		evs, err := s.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("first Take got %v, want %v", got, want)
		}
		nothingMore(t, f, s, ws)
	})
}
