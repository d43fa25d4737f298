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

// Messages are inserted with parameters on SQLite, their JSON columns as the text Bun writes: every column must
// read back exactly as what Bun writes, text for text, and the messages read by the parameterized reads (ByID,
// LockMany, ByProviderIDs) must equal what was written.
func TestMessagesInsertWritesWhatBunWrites(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "parameters")
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: w.ID, Name: "i", Provider: "sandbox", Status: "connected", StatusReason: "test"}
		chat := store.Chat{WorkspaceID: w.ID, InstanceID: inst.ID, Type: "direct", Address: "+15550100001"}
		text, pid := "it's \"quoted\" \\ and ünïcode", "net-1"
		at := time.Date(2026, 3, 4, 5, 6, 7, 891000, time.UTC)
		m := store.Message{ID: store.NewID("msg"), WorkspaceID: w.ID, InstanceID: inst.ID, Direction: "inbound",
			From: store.Party{Address: "+15550100001", DisplayName: "O'Brien"}, Type: "text", Text: &text,
			Location: &store.Location{Latitude: 1.5, Longitude: -2.25, Name: "a 'place'"}, ProviderMessageID: &pid,
			Status: "received", StatusHistory: []store.StatusChange{{Status: "received", At: at, Detail: "it's"}},
			Metadata: map[string]any{"k": "v'"}, CreatedAt: at}
		if err := db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := db.Instances.Create(ctx, tx, &inst); err != nil {
				return err
			}
			if err := db.Chats.Create(ctx, tx, &chat); err != nil {
				return err
			}
			m.ChatID = chat.ID
			return db.Messages.CreateMany(ctx, tx, []store.Message{m})
		}); err != nil {
			t.Fatal(err)
		}
		byBun := m
		byBun.ID, byBun.ProviderMessageID, byBun.UpdatedAt = store.NewID("msg"), nil, at
		if _, err := db.Bun().NewInsert().Model(&byBun).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		cols := []string{"from_party", "to_party", "text", "media", "location", "contact", "template", "poll",
			"status_history", "failure", "metadata", "created_at", "updated_at"}
		row := func(id string) []string {
			r := make([]string, len(cols))
			dest := make([]any, len(cols))
			sel := ""
			for i, c := range cols {
				dest[i] = &r[i]
				if i > 0 {
					sel += ", "
				}
				sel += "COALESCE(CAST(" + c + " AS TEXT), 'NULL')"
			}
			if err := db.Bun().QueryRowContext(ctx, "SELECT "+sel+" FROM messages WHERE id = ?", id).Scan(dest...); err != nil {
				t.Fatal(err)
			}
			return r
		}
		got, want := row(m.ID), row(byBun.ID)
		for i := range cols {
			if got[i] != want[i] {
				t.Errorf("%s: with parameters %q, by Bun %q", cols[i], got[i], want[i])
			}
		}
		one, err := db.Messages.ByID(ctx, db.Reader(), m.ID)
		if err != nil || *one.Text != text || one.Location.Name != "a 'place'" || one.From.DisplayName != "O'Brien" ||
			!one.CreatedAt.Equal(at) || one.StatusHistory[0].Detail != "it's" {
			t.Errorf("ByID = %+v, %v", one, err)
		}
		if _, err := db.Messages.ByID(ctx, db.Reader(), "msg_none"); err != store.ErrNotFound {
			t.Errorf("ByID of none: %v, want ErrNotFound", err)
		}
		if err := db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
			many, err := db.Messages.LockMany(ctx, tx, []string{byBun.ID, m.ID, "msg_none"})
			if err != nil || len(many) != 2 || many[0].ID > many[1].ID {
				t.Errorf("LockMany = %d messages, %v; want both in ID order", len(many), err)
			}
			known, err := db.Messages.ByProviderIDs(ctx, tx, inst.ID, []string{pid, "net-none"})
			if err != nil || len(known) != 1 || known[pid].ID != m.ID {
				t.Errorf("ByProviderIDs = %v, %v", known, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
