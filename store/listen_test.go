package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Several channels share one connection: each hears its own notifications, and losing the connection is reported to
// every channel (Disconnected, then Connected once listening again), as is the end of Listen.
func TestListenSharesOneConnection(t *testing.T) {
	db := storetest.Postgres(t)
	const a, b = "switchboard_test_a", "switchboard_test_b"
	reports := make(chan string, 64)
	listener := func(channel string) store.Listener {
		return store.Listener{
			Channel:      channel,
			Connected:    func() { reports <- channel + " connected" },
			Notified:     func(payload string) { reports <- channel + " heard " + payload },
			Disconnected: func() { reports <- channel + " disconnected" },
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		db.Listen(lctx, listener(a), listener(b))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	expect := func(what string, want ...string) {
		t.Helper()
		var got []string
		for range want {
			got = append(got, await.Receive(t, what, reports))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: reported %q, want %q", what, got, want)
		}
	}

	expect("the first connection", a+" connected", b+" connected")
	for _, n := range [][2]string{{a, "1"}, {b, "2"}} {
		if _, err := db.Bun().ExecContext(ctx, "SELECT pg_notify(?, ?)", n[0], n[1]); err != nil {
			t.Fatal(err)
		}
	}
	expect("the notifications", a+" heard 1", b+" heard 2")

	terminateListener(t, db, "switchboard_test_") // the one connection, whichever channel it listened on last
	expect("the lost connection", a+" disconnected", b+" disconnected")
	expect("the reconnection", a+" connected", b+" connected")

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return once its context ended")
	}
	expect("the end", a+" disconnected", b+" disconnected")
}
