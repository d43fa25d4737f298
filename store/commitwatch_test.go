package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The commit watch sees commits of other connections (another process would be the same) and nothing else.
func TestCommitWatch(t *testing.T) {
	url := "file:" + filepath.Join(t.TempDir(), "switchboard.db")
	open := func() *store.DB {
		db, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return db
	}
	db, other := open(), open()
	w := db.WatchCommits()
	defer w.Close()
	if !w.Changed() {
		t.Error("the first look must answer true")
	}
	if w.Changed() {
		t.Error("nothing was committed since the last look")
	}
	newWorkspace(t, other, "elsewhere")
	if !w.Changed() {
		t.Error("another connection's commit was not seen")
	}
	if w.Changed() {
		t.Error("the same commit was seen twice")
	}
	if _, err := db.Workspaces.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.Changed() {
		t.Error("a read looked like a commit")
	}
	if storetest.Postgres(t).WatchCommits() != nil {
		t.Error("PostgreSQL has no commit watch (it notifies)")
	}
}
