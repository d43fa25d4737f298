package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// RuntimeSlot is a place a process of the channel runtime holds exclusively while it lives: one of the numbered
// slots of its host (on SQLite, of the data directory). A process started in the place of one that died takes the
// same slot, so it can tell the leases that process left (their owner names start with the slot's name) from those
// of processes that still live, and take them at once instead of waiting for them to run out.
type RuntimeSlot struct {
	// Name is "<host>#<n>"; owner names of the slot's processes are Name followed by "/".
	Name    string
	release func() error
}

// Close gives the slot up (the process's end does as well, whatever ends it).
func (s *RuntimeSlot) Close() error { return s.release() }

// maxRuntimeSlots bounds the processes of one host (of one data directory on SQLite) that get a slot; more run
// without one.
const maxRuntimeSlots = 64

// ErrNoRuntimeSlot is LockRuntimeSlot's error when every slot of the host is held.
var ErrNoRuntimeSlot = errors.New("store: every runtime slot of this host is held")

// LockRuntimeSlot takes the first slot of host that no living process holds. On SQLite a slot is an exclusive flock
// on runtime-<n>.lock in the data directory; on PostgreSQL a transaction-level advisory lock inside a transaction
// kept open on a connection of its own (it never writes and holds no snapshot between statements, so it holds back
// no vacuum; through a pooler in transaction mode it pins one server connection, which a session lock would not).
// The operating system or the database server drops the lock when the process dies, kill -9 included. Returns
// ErrNoRuntimeSlot when every slot is held.
func (db *DB) LockRuntimeSlot(ctx context.Context, host string) (*RuntimeSlot, error) {
	for n := range maxRuntimeSlots {
		name := fmt.Sprintf("%s#%d", host, n)
		var (
			release func() error
			err     error
		)
		if db.dialect == Postgres {
			release, err = db.lockSlotPostgres(ctx, name)
		} else {
			release, err = db.lockSlotFile(filepath.Join(db.dir, fmt.Sprintf("runtime-%d.lock", n)))
		}
		if err != nil {
			return nil, err
		}
		if release != nil {
			return &RuntimeSlot{Name: name, release: release}, nil
		}
	}
	return nil, ErrNoRuntimeSlot
}

// lockSlotFile takes the flock of path; a nil release (and no error) means another process holds it.
func (db *DB) lockSlotFile(path string) (release func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	return f.Close, nil
}

// lockSlotPostgres takes the advisory lock of name; a nil release (and no error) means another process holds it.
func (db *DB) lockSlotPostgres(ctx context.Context, name string) (release func() error, err error) {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return nil, err
	}
	end := func() error { return conn.Close(context.WithoutCancel(ctx)) }
	var locked bool
	_, err = conn.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
			pgx.QueryExecModeSimpleProtocol, "switchboard runtime slot "+name).Scan(&locked)
	}
	if err != nil || !locked {
		return nil, errors.Join(err, end())
	}
	return end, nil
}
