package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// cluster routes a command to the runtime of the process that holds the instance, as the real runtime does across
// processes.
type cluster []*sessions

func (c cluster) Do(ctx context.Context, id string, cmd channels.Command) (json.RawMessage, error) {
	for _, rt := range c {
		rt.mu.Lock()
		sess := rt.live[id]
		rt.mu.Unlock()
		if sess != nil {
			return rt.Do(ctx, id, cmd)
		}
	}
	return nil, channels.ErrNotConnected
}

func (c cluster) Start(context.Context, string) error { return nil }
func (c cluster) Stop(context.Context, string) error  { return nil }

// TestTwoProcesses runs two providers over two connections to one PostgreSQL database, as two serve processes: they
// form one network. Wake-ups cross between them through the runtime; without them, mail is found by polling.
func TestTwoProcesses(t *testing.T) {
	url := storetest.PostgresURL(t)
	open := func() *store.DB {
		db, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	storetest.Postgres(t) // migrated
	for _, c := range []struct {
		name  string
		cross bool
	}{{"woken through the runtime", true}, {"found by polling", false}} {
		t.Run(c.name, func(t *testing.T) {
			one := &sessions{live: map[string]*session{}, done: map[string]int{}}
			two := &sessions{live: map[string]*session{}, done: map[string]int{}}
			var reach1, reach2 channels.Sessions = one, two
			if c.cross {
				reach1, reach2 = cluster{one, two}, cluster{one, two}
			}
			// A long poll when wake-ups cross, so that only a wake-up can deliver within the test's time.
			poll := 20 * time.Millisecond
			if c.cross {
				poll = time.Hour
			}
			n1 := &network{t: t, db: open(), sessions: one, reach: reach1}
			n1.p = New(n1.db.Sandbox, Options{Poll: poll})
			n2 := &network{t: t, db: open(), sessions: two, reach: reach2}
			n2.p = New(n2.db.Sandbox, Options{Poll: poll})

			a := n1.connected(nil)
			b := n2.connected(nil)
			id := a.send(t, b.number, "across")
			await.Equal(t, "B's message", func() string { return strings.Join(b.sink.texts(), ",") }, "across")
			await.Equal(t, "A's receipts", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
				"delivered,read")

			g, err := b.sess.CreateGroup(context.Background(), "both", []string{a.number})
			if err != nil {
				t.Fatal(err)
			}
			a.sink.waitFor(t, "A told of the group", func(e event) bool {
				return e.kind == "group" && e.group.Address == g.Address && e.change == channels.GroupCreated
			})
		})
	}
}
