package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A JSON value holding backslashes, quotes and NUL escapes is written and read back on both databases: a client's
// text `\u0000` (six characters) stays that text and backslashes and quotes stay as they were. Bun's own writing
// turned a backslash followed by "u0000" into a NUL escape: PostgreSQL refused the statement (a 500 for a client's
// text) and SQLite stored another value. A NUL character itself is kept on SQLite and becomes the text `\u0000` on
// PostgreSQL, whose jsonb holds no NUL.
func TestJSONValuesKeepTheirEscapes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "escapes")
		values := map[string]string{
			"text":      `\u0000`,
			"backslash": `a\b\\c`,
			"quote":     `it's "quoted" \'`,
			"both":      "\\\u0000",
			"controls":  "tab\tline\nend",
		}
		data, err := json.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		ev := store.Event{ID: store.NewID("evt"), WorkspaceID: w.ID, Type: "escapes.test", Data: data, CreatedAt: now}
		if err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
			return db.Events.Insert(ctx, tx, []store.Event{ev}, nil)
		}); err != nil {
			t.Fatalf("insert: %v", err)
		}
		var got store.Event
		if err := db.Bun().NewSelect().Model(&got).Where("id = ?", ev.ID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		var back map[string]string
		if err := json.Unmarshal(got.Data, &back); err != nil {
			t.Fatalf("stored %s: %v", got.Data, err)
		}
		want := map[string]string{"text": `\u0000`, "backslash": `a\b\\c`, "quote": `it's "quoted" \'`,
			"both": "\\\u0000", "controls": "tab\tline\nend"}
		if db.Dialect() == store.Postgres {
			want["both"] = `\\u0000`
		}
		for k, v := range want {
			if back[k] != v {
				t.Errorf("%s: stored %q, want %q", k, back[k], v)
			}
		}
	})
}
