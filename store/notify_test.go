package store_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A transaction's notifications are sent once it has committed — by whichever way it ran: RunInTx, a repeatable
// (pipelined) transaction, or with a context that is not the transaction's (sent inside it then) — and never for
// one that rolled back.
func TestNotificationsFollowTheirCommit(t *testing.T) {
	db := storetest.Postgres(t)
	inside := &notifies{}
	db.AddQueryHook(inside) // before anything runs: hooks are not to be added beside a query
	changed, connected := watchLinks(t, db)
	await.Receive(t, "the connection", connected)
	domain := store.NewID("d")[2:14] + ".example"
	key := func(slug string) store.LinkKey { return store.LinkKey{Domain: domain, SlugKey: slug} }
	heard := func(want string) {
		t.Helper()
		for {
			k := await.Receive(t, "the notification of "+want, changed)
			if k.Domain != domain { // other tests share the database
				continue
			}
			if k.SlugKey != want {
				t.Fatalf("heard %q, want %q", k.SlugKey, want)
			}
			return
		}
	}

	failed := errors.New("rolled back")
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LinkChanges.Announce(ctx, tx, key("rolled-back")); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatal(err)
	}
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(ctx, tx, key("committed"), key("committed")) // sent once
	}); err != nil {
		t.Fatal(err)
	}
	heard("committed")
	if n := inside.count.Load(); n != 0 {
		t.Errorf("%d statements with pg_notify ran on the store's handles; the notifier sends after the commit", n)
	}

	if err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		return db.LinkChanges.Announce(ctx, tx, key("repeatable"))
	}); err != nil {
		t.Fatal(err)
	}
	heard("repeatable")

	outer := ctx
	if err := db.RunInTx(ctx, func(_ context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(outer, tx, key("inside"))
	}); err != nil {
		t.Fatal(err)
	}
	heard("inside")
	if n := inside.count.Load(); n != 1 {
		t.Errorf("%d statements with pg_notify, want the one inside the transaction of a foreign context", n)
	}
}

// notifies counts the statements that call pg_notify through the store's Bun handles (the notifier's own statement
// goes past them).
type notifies struct{ count atomic.Int64 }

func (h *notifies) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if strings.Contains(e.Query, "pg_notify") {
		h.count.Add(1)
	}
	return ctx
}

func (*notifies) AfterQuery(context.Context, *bun.QueryEvent) {}
