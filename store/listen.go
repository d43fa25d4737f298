package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listener is what a LISTEN connection reports; nil functions are skipped.
type Listener struct {
	// Connected is called each time the connection is (re)established and listening. Notifications may have been
	// missed while it was down: whatever they would have announced must be assumed.
	Connected func()
	// Notified is called with the payload of each notification.
	Notified func(payload string)
	// Disconnected is called when a listening connection is lost: until the next Connected, notifications can go
	// unheard.
	Disconnected func()
}

// Backoff between attempts to (re)connect a listener.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen LISTENs on channel on a PostgreSQL connection of its own until ctx ends, reconnecting with backoff (100 ms
// doubling to 5 s, reset once listening), and reports to l. On SQLite, which has no notifications, it returns at
// once and reports nothing.
func (db *DB) Listen(ctx context.Context, channel string, l Listener) {
	if db.dialect != Postgres {
		return
	}
	listen(ctx, db.url, channel, l)
}

// listen is Listen on the PostgreSQL database at url.
func listen(ctx context.Context, url, channel string, l Listener) {
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+channel); err == nil {
				backoff = listenBackoffMin
				callIfSet(l.Connected)
				for err == nil {
					var n *pgconn.Notification
					if n, err = conn.WaitForNotification(ctx); err == nil && l.Notified != nil {
						l.Notified(n.Payload)
					}
				}
				callIfSet(l.Disconnected)
			}
			_ = conn.Close(context.Background())
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
		backoff = min(2*backoff, listenBackoffMax)
	}
}

func callIfSet(f func()) {
	if f != nil {
		f()
	}
}
