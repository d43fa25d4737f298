package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestWorkspaceCreateAndGet(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		before := time.Now()
		w := newWorkspace(t, db, "Acme Support")
		if !strings.HasPrefix(w.ID, "ws_") || w.Name != "Acme Support" || w.EnabledModels != nil {
			t.Errorf("Create = %+v, want a ws_ ID, the name and every model enabled (nil)", w)
		}
		recent(t, "created_at", w.CreatedAt, before)
		wantTime(t, "updated_at", w.UpdatedAt, w.CreatedAt)

		got, err := db.Workspaces.Get(ctx, w.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.ID != w.ID || got.Name != w.Name || got.EnabledModels != nil {
			t.Errorf("Get = %+v, want %+v", got, w)
		}
		wantTime(t, "created_at read back", got.CreatedAt, w.CreatedAt)
		wantTime(t, "updated_at read back", got.UpdatedAt, w.UpdatedAt)
	})
}

// A database of its own on PostgreSQL too: the shared one holds the other tests' workspaces.
func TestWorkspacesAny(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		if has, err := db.Workspaces.Any(ctx); err != nil || has {
			t.Fatalf("Any on a new database = %v, %v; want false", has, err)
		}
		newWorkspace(t, db, "Acme")
		if has, err := db.Workspaces.Any(ctx); err != nil || !has {
			t.Fatalf("Any with a workspace = %v, %v; want true", has, err)
		}
	})
}

func TestWorkspaceGetMissing(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		for _, id := range []string{store.NewID("ws"), "", "ws_' OR 1=1 --"} {
			if _, err := db.Workspaces.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
			}
		}
	})
}

func TestWorkspaceListNewestFirst(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		var created []string
		for _, name := range []string{"first", "second", "third"} {
			created = append(created, newWorkspace(t, db, name).ID)
		}
		all, err := db.Workspaces.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The PostgreSQL database is shared with other tests: look only at this test's workspaces.
		var mine []string
		for _, w := range all {
			if slices.Contains(created, w.ID) {
				mine = append(mine, w.ID)
				if w.CreatedAt.Location() != time.UTC {
					t.Errorf("List: created_at %v not in UTC", w.CreatedAt)
				}
			}
		}
		slices.Reverse(created)
		if !slices.Equal(mine, created) {
			t.Errorf("List order of this test's workspaces = %q, want newest first %q", mine, created)
		}
	})
}

func TestSetEnabledModels(t *testing.T) {
	steps := []struct {
		name   string
		models []string
	}{
		{"a list", []string{"gpt-4o", "claude-3-5-haiku-latest"}},
		{"one model", []string{"gpt-4o-mini"}},
		{"an empty list: none enabled", []string{}},
		{"nil: every model again", nil},
		{"a list after nil", []string{"gpt-4o"}},
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "models")
		other := newWorkspace(t, db, "untouched")
		prev := w.UpdatedAt
		for _, step := range steps {
			before := time.Now()
			set, err := db.Workspaces.SetEnabledModels(ctx, w.ID, step.models)
			if err != nil {
				t.Fatalf("%s: SetEnabledModels: %v", step.name, err)
			}
			got, err := db.Workspaces.Get(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			for what, ws := range map[string]store.Workspace{"returned": set, "read back": got} {
				if (ws.EnabledModels == nil) != (step.models == nil) || !slices.Equal(ws.EnabledModels, step.models) {
					t.Errorf("%s: %s EnabledModels = %#v, want %#v (nil = all and [] = none must stay apart)",
						step.name, what, ws.EnabledModels, step.models)
				}
				wantTime(t, step.name+": "+what+" created_at", ws.CreatedAt, w.CreatedAt)
			}
			recent(t, step.name+": updated_at", got.UpdatedAt, before)
			if got.UpdatedAt.Before(prev) {
				t.Errorf("%s: updated_at went back from %v to %v", step.name, prev, got.UpdatedAt)
			}
			prev = got.UpdatedAt
		}
		if o, err := db.Workspaces.Get(ctx, other.ID); err != nil || o.EnabledModels != nil {
			t.Errorf("another workspace changed: %+v, %v", o, err)
		}
	})
}

func TestSetEnabledModelsMissingWorkspace(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		for _, models := range [][]string{nil, {}, {"gpt-4o"}} {
			if _, err := db.Workspaces.SetEnabledModels(ctx, store.NewID("ws"), models); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("SetEnabledModels(missing, %#v) = %v, want ErrNotFound", models, err)
			}
		}
	})
}

// The schema says NULL means every model. A new workspace must be stored that way too, not as the JSON value null,
// or SQL that asks for "enabled_models IS NULL" (reports, a later migration) misses every new workspace.
func TestNewWorkspaceStoresSQLNull(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		created := newWorkspace(t, db, "fresh")
		reset := newWorkspace(t, db, "reset")
		if _, err := db.Workspaces.SetEnabledModels(ctx, reset.ID, nil); err != nil {
			t.Fatal(err)
		}
		for what, id := range map[string]string{"created": created.ID, "reset to nil": reset.ID} {
			var null bool
			err := db.Bun().NewSelect().Table("workspaces").ColumnExpr("enabled_models IS NULL").
				Where("id = ?", id).Scan(ctx, &null)
			if err != nil {
				t.Fatal(err)
			}
			if !null {
				t.Errorf("%s workspace: enabled_models is not SQL NULL", what)
			}
		}
	})
}
