package store

import (
	"context"

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

// pgKeyWatch counts the changes announced on accessChannel, heard by a LISTEN connection of its own while watch runs.
// A lost connection counts as a change (notifications may have been missed) and the watch reconnects with backoff;
// while it is down, or not running, no cached key is trusted (see counterWatch).
type pgKeyWatch struct {
	counterWatch
	url string
}

func newPGKeyWatch(url string) *pgKeyWatch { return &pgKeyWatch{url: url} }

func (w *pgKeyWatch) watch(ctx context.Context) {
	listen(ctx, w.url, Listener{
		Channel: accessChannel,
		Connected: func() {
			w.bump()
			w.connected.Store(true)
		},
		Notified: func(string) { w.bump() },
		Disconnected: func() {
			w.connected.Store(false)
			w.bump()
		},
	})
	w.connected.Store(false) // however listen ended, nothing is heard any more
}

func (w *pgKeyWatch) changed() { w.bump() }

func (w *pgKeyWatch) close() error { return nil }

// KeysVersion returns a value that changes whenever a key or its workspace's access settings may have changed in the
// database, in this process or another. Callers cache verified keys together with the version and re-read a key when it differs.
func (s *APIKeys) KeysVersion(ctx context.Context) (uint64, error) {
	return s.db.keys.version(ctx)
}

// Watch follows the access changes other processes announce until ctx ends. On PostgreSQL KeysVersion trusts its
// counter only while Watch listens (without it every call answers a new version, and no cached key is trusted); on
// SQLite, where KeysVersion reads the database's own change counter, there is nothing to follow and Watch returns at
// once.
func (s *APIKeys) Watch(ctx context.Context) {
	s.db.keys.watch(ctx)
}
