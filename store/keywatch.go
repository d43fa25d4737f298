package store

import (
	"context"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// accessChannel is the PostgreSQL notification channel on which every change to what a key may do (a key revoked,
// a workspace's models changed) is announced.
const accessChannel = "switchboard_access"

// announceAccessChange records, in tx, that cached keys must be re-read: it bumps the access_version row (read by
// SQLite watchers) and, on PostgreSQL, notifies listeners when tx commits.
func (db *DB) announceAccessChange(ctx context.Context, tx bun.Tx) error {
	if _, err := tx.ExecContext(ctx, "UPDATE access_version SET version = version + 1 WHERE id = 1"); err != nil {
		return err
	}
	if db.dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_notify(?, '')", accessChannel)
	return err
}

// pgKeyWatch LISTENs on accessChannel on a connection of its own, started on first use. A lost connection counts as
// a change (notifications may have been missed) and the watch reconnects with backoff; while it is down no cached
// key is trusted (see counterWatch).
type pgKeyWatch struct {
	counterWatch
	url    string
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newPGKeyWatch(url string) *pgKeyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	return &pgKeyWatch{url: url, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (w *pgKeyWatch) version(ctx context.Context) (uint64, error) {
	w.once.Do(func() {
		connected := make(chan struct{})
		go w.run(connected)
		// Give the first connection a moment so that the very first requests can already use the cache.
		select {
		case <-connected:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	})
	return w.counterWatch.version(ctx)
}

func (w *pgKeyWatch) run(connected chan struct{}) {
	defer close(w.done)
	var signalled bool
	listen(w.ctx, w.url, Listener{
		Channel: accessChannel,
		Connected: func() {
			w.bump()
			w.connected.Store(true)
			if !signalled {
				close(connected)
				signalled = true
			}
		},
		Notified: func(string) { w.bump() },
		Disconnected: func() {
			w.connected.Store(false)
			w.bump()
		},
	})
}

func (w *pgKeyWatch) changed() { w.bump() }

func (w *pgKeyWatch) close() error {
	w.cancel()
	w.once.Do(func() { close(w.done) }) // never started: nothing to wait for
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
	}
	return nil
}

// KeysVersion returns a value that changes whenever a key or its workspace's access settings may have changed in the
// database, in this process or another. Callers cache verified keys together with the version and re-read a key when it differs.
func (s *APIKeys) KeysVersion(ctx context.Context) (uint64, error) {
	return s.db.keys.version(ctx)
}
