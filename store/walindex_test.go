package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The SQLite watch must run on its fast path: a mapped, valid WAL-index header that stays put while nothing is
// committed and moves on every commit. Without it every API request would pay two queries.
func TestWALIndexHintTracksCommits(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, "file:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w := db.keys.(*sqliteKeyWatch)
	if _, err := w.version(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.state.Load()
	if st == nil || w.hint == nil {
		t.Fatal("no WAL-index mapping: every request would query the database")
	}
	before := w.hint.header()
	if !before.valid() || before != st.header {
		t.Fatalf("header not valid or moving without commits: %x", before)
	}
	if _, err := db.Workspaces.Create(ctx, "commit"); err != nil {
		t.Fatal(err)
	}
	if after := w.hint.header(); after == before {
		t.Fatal("a commit did not change the WAL-index header")
	}
}

// SQLite's connections hold a shared lock on byte 128 of the -shm file (the "dead man switch") for as long as they
// are open: it tells every other process that the WAL index is in use and must not be reset. POSIX record locks
// belong to the process, so a descriptor of the file closed anywhere in it drops them. Whatever the store, its
// watches and a second store on the same file do, the lock must still be there.
func TestStoreKeepsSQLiteLockOnTheWALIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	open := func() *DB {
		db, err := Open(ctx, "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	defer db.Close()
	if !holdsDeadManSwitch(t, path) {
		t.Fatal("no lock on the WAL index right after opening: the check cannot see locks here")
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"a key check", func() {
			if _, err := db.keys.version(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"a commit watch opened, used and closed", func() {
			w := db.WatchCommits()
			w.Changed()
			w.Close()
		}},
		{"a second store opened and closed", func() {
			other := open()
			if _, err := other.keys.version(ctx); err != nil {
				t.Fatal(err)
			}
			_ = other.Close()
		}},
		{"a backup", func() {
			if err := db.BackupTo(ctx, filepath.Join(t.TempDir(), "backup.db")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		step.do()
		if !holdsDeadManSwitch(t, path) {
			t.Fatalf("after %s this process no longer holds its lock on the WAL index: another process would reset it", step.name)
		}
	}
}

// holdsDeadManSwitch reports whether this process holds a POSIX lock covering byte 128 of path's -shm file, as
// /proc/locks lists them ("1: POSIX ADVISORY READ <pid> <maj>:<min>:<inode> <start> <end>").
func holdsDeadManSwitch(t *testing.T, path string) bool {
	t.Helper()
	fi, err := os.Stat(path + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode numbers on this system")
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	defer f.Close()
	pid, inode := strconv.Itoa(os.Getpid()), fmt.Sprintf(":%d", st.Ino)
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 8 || fields[1] != "POSIX" || fields[4] != pid || !strings.HasSuffix(fields[5], inode) {
			continue
		}
		start, _ := strconv.ParseInt(fields[6], 10, 64)
		end := int64(1 << 62)
		if fields[7] != "EOF" {
			end, _ = strconv.ParseInt(fields[7], 10, 64)
		}
		if start <= 128 && 128 <= end {
			return true
		}
	}
	return false
}
