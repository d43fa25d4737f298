package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// note is a workspace-scoped model of the test's own, shaped as every workspace-scoped table is: an id primary key,
// a workspace_id foreign key, and here a uniqueness rule of its own.
type note struct {
	bun.BaseModel `bun:"table:scoped_notes,alias:n"`

	ID          string    `bun:"id,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	Title       string    `bun:"title"`
	CreatedAt   time.Time `bun:"created_at"`
}

func notes(t *testing.T, db *store.DB) store.Scoped[note] {
	t.Helper()
	if _, err := db.Bun().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS scoped_notes (
		id           TEXT PRIMARY KEY,
		workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
		title        TEXT NOT NULL,
		created_at   TIMESTAMPTZ NOT NULL,
		UNIQUE (workspace_id, title))`); err != nil {
		t.Fatal(err)
	}
	return store.NewScoped[note](db)
}

func newNote(t *testing.T, s store.Scoped[note], workspaceID, title string) note {
	t.Helper()
	n := note{ID: store.NewID("note"), WorkspaceID: workspaceID, Title: title,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := s.Create(ctx, &n); err != nil {
		t.Fatalf("create %s: %v", title, err)
	}
	return n
}

// An object of another workspace is indistinguishable from a missing one, whatever the operation; create needs no
// read to tell a missing workspace, and unique and foreign-key violations map to sentinels on both databases.
func TestWorkspaceScoped(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		s := notes(t, db)
		a, b := newWorkspace(t, db, "A"), newWorkspace(t, db, "B")
		first := newNote(t, s, a.ID, "first")
		second, third := newNote(t, s, a.ID, "second"), newNote(t, s, a.ID, "third")
		theirs := newNote(t, s, b.ID, "first") // the uniqueness rule is per workspace

		t.Run("create", func(t *testing.T) {
			for _, tc := range []struct {
				what string
				n    note
				want error
			}{
				{"a missing workspace (foreign key)", note{ID: store.NewID("note"), WorkspaceID: "ws_missing", Title: "x"}, store.ErrNotFound},
				{"a taken title (unique index)", note{ID: store.NewID("note"), WorkspaceID: a.ID, Title: "first"}, store.ErrConflict},
				{"a taken ID (primary key)", note{ID: first.ID, WorkspaceID: a.ID, Title: "other"}, store.ErrConflict},
			} {
				if err := s.Create(ctx, &tc.n); !errors.Is(err, tc.want) {
					t.Errorf("create with %s = %v, want %v", tc.what, err, tc.want)
				}
			}
		})

		t.Run("get", func(t *testing.T) {
			got, err := s.Get(ctx, a.ID, first.ID)
			if err != nil || got.Title != "first" || got.WorkspaceID != a.ID {
				t.Fatalf("Get = %+v, %v", got, err)
			}
			wantTime(t, "created_at", got.CreatedAt, first.CreatedAt)
			if _, err := s.Get(ctx, b.ID, first.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get from another workspace = %v, want ErrNotFound", err)
			}
			if ok, err := s.Exists(ctx, a.ID, first.ID); !ok || err != nil {
				t.Errorf("Exists = %v, %v", ok, err)
			}
			if ok, err := s.Exists(ctx, b.ID, first.ID); ok || err != nil {
				t.Errorf("Exists in another workspace = %v, %v", ok, err)
			}
			if _, err := s.Lock(ctx, b.ID, first.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Lock from another workspace = %v, want ErrNotFound", err)
			}
			if got, err := s.Lock(ctx, a.ID, first.ID); err != nil || got.ID != first.ID {
				t.Errorf("Lock = %+v, %v", got, err)
			}
		})

		t.Run("list", func(t *testing.T) {
			ids := func(ns []note) (out []string) {
				for _, n := range ns {
					out = append(out, n.ID)
				}
				return out
			}
			for _, tc := range []struct {
				p      store.Page
				filter func(*bun.SelectQuery) *bun.SelectQuery
				want   []string
				more   bool
			}{
				{store.Page{Limit: 2}, nil, []string{third.ID, second.ID}, true},
				{store.Page{Limit: 2, Before: second.ID}, nil, []string{first.ID}, false},
				{store.Page{Limit: 2, After: first.ID}, nil, []string{second.ID, third.ID}, false},
				{store.Page{Limit: 10}, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("n.title <> ?", "second") },
					[]string{third.ID, first.ID}, false},
			} {
				got, more, err := s.List(ctx, a.ID, tc.p, tc.filter)
				if err != nil || !slices.Equal(ids(got), tc.want) || more != tc.more {
					t.Errorf("List(%+v) = %v, %v, %v; want %v, %v", tc.p, ids(got), more, err, tc.want, tc.more)
				}
			}
			if got, _, err := s.List(ctx, b.ID, store.Page{Limit: 10}, nil); err != nil || !slices.Equal(ids(got), []string{theirs.ID}) {
				t.Errorf("List of B = %v, %v; want only B's note", ids(got), err)
			}
		})

		t.Run("delete", func(t *testing.T) {
			if _, err := s.Delete(ctx, b.ID, first.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Delete from another workspace = %v, want ErrNotFound", err)
			}
			gone, err := s.Delete(ctx, a.ID, first.ID)
			if err != nil || gone.ID != first.ID || gone.Title != "first" {
				t.Fatalf("Delete = %+v, %v", gone, err)
			}
			wantTime(t, "created_at", gone.CreatedAt, first.CreatedAt)
			if _, err := s.Get(ctx, a.ID, first.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get after Delete = %v, want ErrNotFound", err)
			}
			if _, err := s.Delete(ctx, a.ID, first.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Delete twice = %v, want ErrNotFound", err)
			}
		})
	})
}

// Violations are told by the drivers' codes (SQLSTATE, SQLite's extended result codes), never by their messages.
func TestConstraintViolations(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		notes(t, db)
		w := newWorkspace(t, db, "violations")
		id := store.NewID("note")
		insert := func(id, workspaceID, title string) error {
			_, err := db.Bun().ExecContext(ctx, "INSERT INTO scoped_notes (id, workspace_id, title, created_at) VALUES (?, ?, ?, ?)",
				id, workspaceID, title, time.Now())
			return err
		}
		if err := insert(id, w.ID, "taken"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			what              string
			err               error
			unique, reference bool
		}{
			{"primary key", insert(id, w.ID, "other"), true, false},
			{"unique index", insert(store.NewID("note"), w.ID, "taken"), true, false},
			{"foreign key", insert(store.NewID("note"), "ws_missing", "x"), false, true},
			{"wrapped", fmt.Errorf("context: %w", insert(id, w.ID, "other")), true, false},
			{"a message alike", errors.New("SQLSTATE 23505: UNIQUE constraint failed: FOREIGN KEY constraint failed"), false, false},
		} {
			if tc.err == nil {
				t.Fatalf("%s: no error", tc.what)
			}
			if got := store.IsUniqueViolation(tc.err); got != tc.unique {
				t.Errorf("%s: IsUniqueViolation(%v) = %v", tc.what, tc.err, got)
			}
			if got := store.IsForeignKeyViolation(tc.err); got != tc.reference {
				t.Errorf("%s: IsForeignKeyViolation(%v) = %v", tc.what, tc.err, got)
			}
		}
	})
}
