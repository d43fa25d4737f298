package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// An instance's labels: created, renamed, assigned to chats and taken off them, a filter on the chat list, kept to
// their workspace and instance, and gone from their chats when deleted.
func TestLabelsAssignAndFilter(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		tx := func(f func(ctx context.Context, tx bun.Tx) error) {
			t.Helper()
			if err := db.RunInTx(c, f); err != nil {
				t.Fatal(err)
			}
		}
		ws, err := db.Workspaces.Create(c, "labels")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.Workspaces.Create(c, "labels-other")
		if err != nil {
			t.Fatal(err)
		}
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "i", Provider: "p", Status: "created",
			StatusReason: "created"}
		second := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "j", Provider: "p", Status: "created",
			StatusReason: "created"}
		a := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: "a@example"}
		b := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: "b@example"}
		ext := "5"
		work := store.Label{WorkspaceID: ws.ID, InstanceID: inst.ID, Name: "Work", Color: 3, ExternalID: &ext}
		home := store.Label{WorkspaceID: ws.ID, InstanceID: inst.ID, Name: "Home"}
		tx(func(ctx context.Context, tx bun.Tx) error {
			for _, i := range []*store.Instance{&inst, &second} {
				if err := db.Instances.Create(ctx, tx, i); err != nil {
					return err
				}
			}
			for _, ch := range []*store.Chat{&a, &b} {
				if err := db.Chats.Create(ctx, tx, ch); err != nil {
					return err
				}
			}
			for _, l := range []*store.Label{&work, &home} {
				if err := db.Labels.Create(ctx, tx, l); err != nil {
					return err
				}
			}
			return nil
		})
		dup := store.Label{WorkspaceID: ws.ID, InstanceID: inst.ID, Name: "Again", ExternalID: &ext}
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Labels.Create(ctx, tx, &dup) }); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a second label with external ID 5: %v", err)
		}
		for id, want := range map[string]bool{work.ID: true, store.NewID("lbl"): false} {
			if taken, err := db.Labels.Taken(c, db.Reader(), id); err != nil || taken != want {
				t.Fatalf("label ID %s taken = %v, %v; want %v", id, taken, err, want)
			}
		}
		if _, err := db.Labels.Get(c, other.ID, inst.ID, work.ID); err != store.ErrNotFound {
			t.Fatalf("another workspace's label: %v", err)
		}
		if _, err := db.Labels.Get(c, ws.ID, second.ID, work.ID); err != store.ErrNotFound {
			t.Fatalf("another instance's label: %v", err)
		}
		tx(func(ctx context.Context, tx bun.Tx) error {
			got, err := db.Labels.ByExternalID(ctx, tx, inst.ID, "5")
			if err != nil || got.ID != work.ID {
				t.Fatalf("by external ID = %+v, %v", got, err)
			}
			work.Name, work.Color = "Office", 7
			return db.Labels.Save(ctx, tx, &work)
		})
		if got, err := db.Labels.Get(c, ws.ID, inst.ID, work.ID); err != nil || got.Name != "Office" || got.Color != 7 {
			t.Fatalf("renamed = %+v, %v", got, err)
		}
		if page, more, err := db.Labels.List(c, ws.ID, inst.ID, store.Page{Limit: 10}); err != nil || more || len(page) != 2 {
			t.Fatalf("list = %d, %v, %v", len(page), more, err)
		}
		if page, _, err := db.Labels.List(c, ws.ID, second.ID, store.Page{Limit: 10}); err != nil || len(page) != 0 {
			t.Fatalf("the other instance's list = %d, %v", len(page), err)
		}
		tx(func(ctx context.Context, tx bun.Tx) error {
			for _, step := range []struct {
				chat, label string
				want        bool
			}{{a.ID, work.ID, true}, {a.ID, work.ID, false}, {a.ID, home.ID, true}, {b.ID, work.ID, true}} {
				if added, err := db.Labels.Assign(ctx, tx, step.chat, step.label); err != nil || added != step.want {
					t.Fatalf("assign %s to %s = %v, %v", step.label, step.chat, added, err)
				}
			}
			return nil
		})
		of, err := db.Labels.OfChats(c, db.Reader(), []string{a.ID, b.ID})
		if err != nil || !slices.Equal(of[a.ID], sorted(work.ID, home.ID)) || !slices.Equal(of[b.ID], []string{work.ID}) {
			t.Fatalf("labels of chats = %v, %v", of, err)
		}
		chats := func(label string) []string {
			t.Helper()
			page, _, err := db.Chats.List(c, ws.ID, inst.ID, store.ChatFilter{Label: label}, store.Page{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, ch := range page {
				ids = append(ids, ch.ID)
			}
			slices.Sort(ids)
			return ids
		}
		if got := chats(work.ID); !slices.Equal(got, sorted(a.ID, b.ID)) {
			t.Fatalf("chats labelled Office = %v", got)
		}
		if got := chats(home.ID); !slices.Equal(got, []string{a.ID}) {
			t.Fatalf("chats labelled Home = %v", got)
		}
		tx(func(ctx context.Context, tx bun.Tx) error {
			if removed, err := db.Labels.Unassign(ctx, tx, b.ID, work.ID); err != nil || !removed {
				t.Fatalf("unassign = %v, %v", removed, err)
			}
			if removed, err := db.Labels.Unassign(ctx, tx, b.ID, work.ID); err != nil || removed {
				t.Fatalf("unassign again = %v, %v", removed, err)
			}
			if _, err := db.Labels.Delete(ctx, tx, other.ID, inst.ID, home.ID); err != store.ErrNotFound {
				t.Fatalf("delete from another workspace: %v", err)
			}
			_, err := db.Labels.Delete(ctx, tx, ws.ID, inst.ID, home.ID)
			return err
		})
		if got, err := db.Labels.ChatsOf(c, db.Reader(), work.ID); err != nil || !slices.Equal(got, []string{a.ID}) {
			t.Fatalf("chats of Office = %v, %v", got, err)
		}
		if got := chats(home.ID); len(got) != 0 {
			t.Fatalf("chats labelled with a deleted label = %v", got)
		}
		if of, err := db.Labels.OfChats(c, db.Reader(), []string{a.ID}); err != nil || !slices.Equal(of[a.ID], []string{work.ID}) {
			t.Fatalf("labels of a after the delete = %v, %v", of, err)
		}
	})
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
