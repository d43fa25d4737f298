package store

import (
	"context"
	"path/filepath"
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
	if st == nil || st.hint == nil {
		t.Fatal("no WAL-index mapping: every request would query the database")
	}
	before := st.hint.header()
	if !before.valid() || before != st.header {
		t.Fatalf("header not valid or moving without commits: %x", before)
	}
	if _, err := db.Workspaces.Create(ctx, "commit"); err != nil {
		t.Fatal(err)
	}
	if after := st.hint.header(); after == before {
		t.Fatal("a commit did not change the WAL-index header")
	}
}
