package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The outbox writes events with parameters on SQLite (see execParams): what it stores must read back exactly as
// what Bun writes, text for text — times are compared as text there.
func TestEventsInsertWritesWhatBunWrites(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "parameters")
		at := time.Date(2026, 3, 4, 5, 6, 7, 891000, time.FixedZone("east", 3600))
		seq := int64(7)
		params := store.Event{ID: store.NewID("evt"), WorkspaceID: w.ID, Type: "link.created",
			Data: json.RawMessage(`{"a":"it's"}`), CreatedAt: at}
		byBun := params
		byBun.ID, byBun.Seq = store.NewID("evt"), &seq
		if err := db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
			return db.Events.Insert(ctx, tx, []store.Event{params}, nil)
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().NewInsert().Model(&byBun).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		row := func(id string) [4]string {
			var r [4]string
			if err := db.Bun().QueryRowContext(ctx, "SELECT CAST(created_at AS TEXT), CAST(data AS TEXT), "+
				"COALESCE(instance_id, 'NULL'), type FROM events WHERE id = ?", id).Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
				t.Fatal(err)
			}
			return r
		}
		if got, want := row(params.ID), row(byBun.ID); got != want {
			t.Errorf("with parameters %q, by Bun %q", got, want)
		}
	})
}

// A connection keeps one prepared statement per text run with arguments; a text run again while the rows of its
// statement are still open gets a statement of its own, and both read their own rows.
func TestStatementRunAgainWhileItsRowsAreOpen(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	tx, err := db.Bun().DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	const q = "SELECT ? + 0 UNION ALL SELECT ? + 0"
	var read func(want ...int)
	read = func(want ...int) {
		t.Helper()
		rows, err := tx.QueryContext(ctx, q, want[0], want[1])
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []int
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
			if len(got) == 1 && want[0] == 1 {
				read(3, 4) // the first statement's rows are open
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("rows %v, want %v", got, want)
		}
	}
	read(1, 2)
	read(5, 6) // the cached statement again, after both closed
}
