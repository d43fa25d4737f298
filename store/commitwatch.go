package store

import (
	"context"
	"sync"
	"time"
)

// CommitWatch tells, for the price of a 48-byte memory compare, whether anything may have been committed to an
// SQLite database — by any connection of any process — since the last look. It lets the webhook dispatcher see
// deliveries queued by other processes, or by code of its own process that did not wake it, within milliseconds
// instead of one poll interval. It reads the WAL-index header (see walIndexHint) and is safe for concurrent use.
type CommitWatch struct {
	// hint is the store's mapping of the WAL index, retained until Close: a watch may stop after its store closed.
	hint *walIndex

	mu   sync.Mutex
	last walIndexHeader
}

// WatchCommits returns a CommitWatch of the database, or nil on PostgreSQL (which notifies instead).
func (db *DB) WatchCommits() *CommitWatch {
	if db.dialect != SQLite {
		return nil
	}
	return &CommitWatch{hint: db.wal.retain()}
}

// Changed reports whether a commit may have happened since the previous call (the first call answers true). A torn
// read answers true too: the caller then looks once for nothing. Where the WAL index cannot be mapped (not a Unix
// system) it answers false, and the caller's polling is all there is.
func (w *CommitWatch) Changed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hint.header()
	if !h.valid() {
		w.hint.refresh() // SQLite makes the -shm file on a connection's first read
		if h = w.hint.header(); !h.valid() {
			return false
		}
	}
	changed := h != w.last
	w.last = h
	return changed
}

// Close gives up the watch's use of the WAL-index mapping; the last of the store and its watches to let go of it
// unmaps it (see walIndexHint for why the store's descriptor outlives its connections).
func (w *CommitWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hint.release()
	w.hint = nil
}

// Watch calls changed each time a look every interval finds that a commit may have happened, until ctx ends; then it
// closes the watch.
func (w *CommitWatch) Watch(ctx context.Context, interval time.Duration, changed func()) {
	defer w.Close()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if w.Changed() {
				changed()
			}
		}
	}
}
