package store_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Every path that reads a time returns it in UTC on both databases, although time.Local is not UTC here (see
// TestMain): pgx would return time.Local, and modernc returns TIMESTAMPTZ columns as text that Bun parses into a
// zone of offset 0 that is not time.UTC (and that database/sql cannot scan into a time at all). The connections
// convert; no model has a hook.
func TestTimesReadBackInUTC(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "times")
		expires := time.Now().Add(time.Hour).In(time.Local)
		_, k := newKey(t, db, w.ID, func(n *store.NewAPIKey) { n.ExpiresAt = &expires })
		want := w.CreatedAt

		got, err := db.Workspaces.Get(ctx, w.ID) // a model, read pool
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "model scan (read pool)", got.CreatedAt, want)
		key, err := db.APIKeys.Get(ctx, w.ID, k.ID) // a nullable time
		if err != nil {
			t.Fatal(err)
		}
		wantTimePtr(t, "model scan of a nullable time", key.ExpiresAt, k.ExpiresAt)
		wantTimePtr(t, "model scan of NULL", key.RevokedAt, nil)

		var returned store.Workspace
		if err := db.Bun().NewUpdate().Model((*store.Workspace)(nil)).Set("name = ?", "renamed").Where("id = ?", w.ID).
			Returning("*").Scan(ctx, &returned); err != nil {
			t.Fatal(err)
		}
		wantTime(t, "RETURNING * scan", returned.CreatedAt, want)

		var times []time.Time
		if err := db.Bun().NewSelect().Table("workspaces").Column("created_at").Where("id = ?", w.ID).
			Scan(ctx, &times); err != nil || len(times) != 1 {
			t.Fatalf("column scan: %v, %v", times, err)
		}
		wantTime(t, "Bun column scan", times[0], want)

		var raw time.Time
		var rawNull sql.NullTime
		if err := db.Bun().QueryRowContext(ctx, "SELECT created_at, created_at FROM workspaces WHERE id = ?", w.ID).
			Scan(&raw, &rawNull); err != nil {
			t.Fatal(err)
		}
		wantTime(t, "database/sql scan", raw, want)
		wantTime(t, "database/sql scan into NullTime", rawNull.Time, want)

		// A statement prepared on the pool, as the click recorder's are (IDs need no quoting).
		st, err := db.Bun().DB.PrepareContext(ctx, fmt.Sprintf("SELECT created_at FROM workspaces WHERE id = '%s'", w.ID))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var prepared time.Time
		if err := st.QueryRowContext(ctx).Scan(&prepared); err != nil {
			t.Fatal(err)
		}
		wantTime(t, "prepared statement scan", prepared, want)
	})
}
