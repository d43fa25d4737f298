package store

import "sync"

// CommitWatch tells, for the price of a 48-byte memory compare, whether anything may have been committed to an
// SQLite database — by any connection of any process — since the last look. It lets the webhook dispatcher see
// deliveries queued by other processes, or by code of its own process that did not wake it, within milliseconds
// instead of one poll interval. It reads the WAL-index header (see walIndexHint) and is safe for concurrent use.
type CommitWatch struct {
	path string

	mu   sync.Mutex
	hint *walIndexHint
	last walIndexHeader
}

// WatchCommits returns a CommitWatch of the database, or nil on PostgreSQL (which notifies instead).
func (db *DB) WatchCommits() *CommitWatch {
	if db.dialect != SQLite {
		return nil
	}
	return &CommitWatch{path: db.sqlitePath}
}

// Changed reports whether a commit may have happened since the previous call (the first call answers true). A torn
// read answers true too: the caller then looks once for nothing. Where the WAL index cannot be mapped (not a Unix
// system) it answers false, and the caller's polling is all there is.
func (w *CommitWatch) Changed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hint == nil {
		if w.hint = openWALIndexHint(w.path); w.hint == nil {
			return false
		}
	}
	h := w.hint.header()
	changed := h != w.last
	w.last = h
	return changed
}

// Close unmaps the WAL index; call it before the database is closed.
func (w *CommitWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hint.close()
	w.hint = nil
}
