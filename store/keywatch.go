package store

import (
	"context"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// accessChannel is the PostgreSQL notification channel on which every change to what a key may do (a key revoked,
// a workspace's models changed) is announced, for whoever listens (an operator's tooling, a test's barrier).
const accessChannel = "switchboard_access"

// announceAccessChange records, in tx, that cached keys must be re-read: it bumps the access_version row (what
// KeysVersion reads, on both databases) and, on PostgreSQL, notifies listeners when tx commits.
func (db *DB) announceAccessChange(ctx context.Context, tx bun.Tx) error {
	if _, err := tx.ExecContext(ctx, "UPDATE access_version SET version = version + 1 WHERE id = 1"); err != nil {
		return err
	}
	return db.notifyAtCommit(ctx, tx, accessChannel, "")
}

// pgKeyWatch answers KeysVersion on PostgreSQL by reading the access_version row, with a read that started after
// the call did. That is what makes a revocation committed by another process (the CLI, another replica) refuse the
// key from the very next request: a notification cannot. NOTIFY is delivered asynchronously — after the revoker's
// commit has returned, the notification may still be in the listener's socket, in its backend's queue, or lost with
// a connection nobody has seen fail yet — so a counter bumped by notifications answers "unchanged" for a while after
// the commit, and a request in that window is served from a cache the revocation should have emptied.
//
// The read costs a round trip, which is the price of the guarantee on a database that cannot tell a process about a
// commit synchronously. Concurrent callers share it: a call joins the read that starts next (one starting after the
// call arrived, so it sees every commit that came before) rather than starting one of its own, so under load there
// is at most one read in flight and one waiting per process, whatever the request rate.
type pgKeyWatch struct {
	db *bun.DB

	mu sync.Mutex
	// reading is true while a read is in flight.
	reading bool
	// next is the read that starts when the one in flight ends; the calls that arrive meanwhile wait for it.
	next *versionRead
}

// versionRead is one read of the access_version row; done is closed once v and err are set.
type versionRead struct {
	done chan struct{}
	v    uint64
	err  error
}

// versionReadTimeout bounds one read. The read is shared, so no single caller's context may end it; it reads a
// one-row table, which an MVCC read never waits on a lock for.
const versionReadTimeout = 10 * time.Second

func newPGKeyWatch(db *bun.DB) *pgKeyWatch { return &pgKeyWatch{db: db} }

func (w *pgKeyWatch) version(ctx context.Context) (uint64, error) {
	w.mu.Lock()
	var r *versionRead
	if w.reading {
		if w.next == nil {
			w.next = &versionRead{done: make(chan struct{})}
		}
		r = w.next
	} else {
		w.reading = true
		r = &versionRead{done: make(chan struct{})}
		go w.read(r)
	}
	w.mu.Unlock()
	select {
	case <-r.done:
		return r.v, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// read runs r, then the read the calls that arrived meanwhile wait for, if any.
func (w *pgKeyWatch) read(r *versionRead) {
	for r != nil {
		ctx, cancel := context.WithTimeout(context.Background(), versionReadTimeout)
		r.err = mapErr(w.db.NewSelect().Table("access_version").Column("version").Where("id = 1").Scan(ctx, &r.v))
		cancel()
		close(r.done)
		w.mu.Lock()
		r, w.next = w.next, nil
		w.reading = r != nil
		w.mu.Unlock()
	}
}

// changed needs nothing: the next read sees this process's commit.
func (w *pgKeyWatch) changed() {}

// watch needs nothing: every read asks the database.
func (w *pgKeyWatch) watch(context.Context) {}

func (w *pgKeyWatch) close() error { return nil }

// KeysVersion returns a value that changes whenever a key or its workspace's access settings may have changed in the
// database, in this process or another, and does so from the first call after the change committed. Callers cache
// verified keys together with the version and re-read a key when it differs.
func (s *APIKeys) KeysVersion(ctx context.Context) (uint64, error) {
	return s.db.keys.version(ctx)
}

// Watch follows the access changes other processes make until ctx ends, where the store needs to follow them. Both
// stores read the database's own record of changes instead (see pgKeyWatch for why PostgreSQL does not rely on
// notifications), so it returns at once; it stays so that a store which must follow announcements can.
func (s *APIKeys) Watch(ctx context.Context) {
	s.db.keys.watch(ctx)
}
