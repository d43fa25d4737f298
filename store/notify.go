package store

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// PostgreSQL holds one lock for the whole cluster from the moment a transaction that called NOTIFY starts to commit
// until its commit record is on disk (the notification queue must be in commit order), so every transaction that
// notifies commits alone, one disk flush after another, and none of them can share a flush with another's
// (pgbench, 8 clients, insert and commit: 1,256 commits/s; the same with pg_notify in the transaction: 490/s).
// Almost every write of this product notifies (an event, a queued delivery, a queued message), so notifying inside
// the business transaction made PostgreSQL commit them one at a time.
//
// So a transaction run by this store does not notify: notifyAtCommit records what it would have announced in its
// context, and once the transaction has committed the process's notifier sends it — every transaction's
// notifications that piled up meanwhile in one statement of its own, committed without waiting for the disk
// (nothing is lost with it: a notification is a hint, and every listener also polls). Listeners are woken after
// the commit as before, a round trip later; a transaction that rolls back notifies nobody, and one rolled back to
// a savepoint (a group commit's failed call) may wake a listener that then finds nothing, which costs a read.

// notification is one NOTIFY: a channel and its payload.
type notification struct{ channel, payload string }

// txState is what a transaction's context carries (under txKey): the notifications to send once it commits.
type txState struct {
	mu    sync.Mutex
	notes []notification
}

func (s *txState) add(channel string, payloads []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range payloads {
		s.notes = append(s.notes, notification{channel, p})
	}
}

// taken returns the notifications recorded so far and forgets them.
func (s *txState) taken() []notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	notes := s.notes
	s.notes = nil
	return notes
}

// notifyAtCommit announces, on PostgreSQL, a notification on channel for each payload once tx commits (see above).
// ctx must be the context the transaction handed its function; with another (code that kept the caller's context)
// the notifications go inside tx, as NOTIFY itself would, which is correct and only slower.
func (db *DB) notifyAtCommit(ctx context.Context, tx bun.IDB, channel string, payloads ...string) error {
	if db.dialect != Postgres || len(payloads) == 0 {
		return nil
	}
	if st, ok := ctx.Value(txKey{db}).(*txState); ok {
		st.add(channel, payloads)
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_notify(?, k) FROM unnest(?::text[]) AS k", channel,
		pgdialect.Array(payloads))
	return err
}

// committed hands a committed transaction's notifications to the notifier.
func (db *DB) committed(tctx context.Context) {
	st, ok := tctx.Value(txKey{db}).(*txState)
	if !ok {
		return
	}
	if notes := st.taken(); len(notes) > 0 {
		db.notes.send(db, notes)
	}
}

// notifier sends the notifications of committed transactions, several transactions' in one statement: while one
// statement is on its way, what commits meanwhile waits for the next, and repeated notifications go once.
type notifier struct {
	mu      sync.Mutex
	pending []notification
	running bool
	// idle is closed (and replaced) whenever the notifier has sent everything; see flush.
	idle chan struct{}
}

// notifyTimeout bounds one statement of the notifier.
const notifyTimeout = 5 * time.Second

// send queues notes and makes sure a sender runs. It never waits for the database.
func (n *notifier) send(db *DB, notes []notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pending = append(n.pending, notes...)
	if !n.running {
		n.running = true
		if n.idle == nil {
			n.idle = make(chan struct{})
		}
		go n.run(db)
	}
}

// run sends what is pending until nothing is.
func (n *notifier) run(db *DB) {
	for {
		n.mu.Lock()
		notes := n.pending
		n.pending = nil
		if len(notes) == 0 {
			n.running = false
			close(n.idle)
			n.idle = nil
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if err := db.sendNotifications(notes); err != nil {
			// Listeners poll as well, so a lost wake-up only delays them; it is not worth a retry loop that could
			// outlive the database.
			slog.Default().Warn("store: could not send notifications after a commit", "error", err)
		}
	}
}

// flush waits until every notification queued so far has been sent (or ctx ends).
func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	idle := n.idle
	n.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// sendNotifications sends notes, each distinct one once, in one statement on the writer pool, committed
// asynchronously: its commit need not wait for the disk, since nothing depends on a notification surviving a crash.
func (db *DB) sendNotifications(notes []notification) error {
	slices.SortFunc(notes, func(a, b notification) int {
		return cmp.Or(cmp.Compare(a.channel, b.channel), cmp.Compare(a.payload, b.payload))
	})
	notes = slices.Compact(notes)
	channels, payloads := make([]string, len(notes)), make([]string, len(notes))
	for i, nt := range notes {
		channels[i], payloads[i] = nt.channel, nt.payload
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	// Straight on database/sql, past Bun's query hooks: the notifier runs beside everything else, and Bun's hooks
	// may be added while it does (AddQueryHook is not safe with a query in flight).
	_, err := db.w.DB.ExecContext(ctx, "SELECT pg_notify(n.c, n.p) "+
		"FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s, unnest($1::text[], $2::text[]) AS n(c, p)",
		channels, payloads)
	return err
}
