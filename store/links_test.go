package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func newLink(ws, domain, slug string, externalID *string) *store.Link {
	return &store.Link{WorkspaceID: ws, Domain: domain, Slug: slug, DestinationURL: "https://example.com",
		ExternalID: externalID, RedirectType: 302, ForwardQuery: true, Tags: []string{"t"}}
}

// createLink creates one link with CreateMany; the refusal is the error.
func createLink(db *store.DB, tx bun.IDB, l *store.Link) error {
	refused, err := db.Links.CreateMany(ctx, tx, []*store.Link{l})
	if err != nil {
		return err
	}
	return refused[0]
}

// CreateMany refuses what breaks a uniqueness rule or a tombstone of another workspace, item by item, inside one
// transaction that stays usable.
func TestLinksCreateMany(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a, b := newWorkspace(t, db, "A"), newWorkspace(t, db, "B")
		domain := store.NewID("d")[2:14] + ".example"
		ext := "ext"
		if err := createLink(db, db.Bun(), newLink(a.ID, domain, "Taken", &ext)); err != nil {
			t.Fatal(err)
		}
		gone := newLink(a.ID, domain, "gone", nil)
		if err := createLink(db, db.Bun(), gone); err != nil {
			t.Fatal(err)
		}
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			_, err := db.Links.Delete(ctx, tx, a.ID, gone.ID, time.Now().Add(time.Hour))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ls := []*store.Link{
			newLink(b.ID, domain, "fresh", nil),
			newLink(b.ID, domain, "taken", nil), // another case of a used slug
			newLink(a.ID, domain, "x1", &ext),   // external ID used in the workspace
			newLink(b.ID, domain, "x2", &ext),   // the same external ID in another workspace is fine
			newLink(b.ID, domain, "twice", nil), // the first of two
			newLink(b.ID, domain, "TWICE", nil), // refused as if the first existed
			newLink(b.ID, domain, "gone", nil),  // tombstoned by A
			newLink(a.ID, domain, "other", nil),
		}
		var refused []error
		err = db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			var err error
			if refused, err = db.Links.CreateMany(ctx, tx, ls); err != nil {
				return err
			}
			// The transaction is still usable after refusals (PostgreSQL aborts one on a failed statement).
			return createLink(db, tx, newLink(a.ID, domain, "after", nil))
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []error{nil, store.ErrSlugTaken, store.ErrExternalIDTaken, nil, nil, store.ErrSlugTaken, store.ErrSlugTaken, nil}
		for i, w := range want {
			if !errors.Is(refused[i], w) || (w == nil) != (refused[i] == nil) {
				t.Errorf("item %d (%s): %v, want %v", i, ls[i].Slug, refused[i], w)
			}
			if w != nil && !errors.Is(refused[i], store.ErrConflict) {
				t.Errorf("item %d: %v does not wrap ErrConflict", i, refused[i])
			}
		}
		var slug *store.SlugTakenError
		if !errors.As(refused[1], &slug) || *slug != (store.SlugTakenError{Domain: domain, Slug: "taken"}) {
			t.Errorf("item 1: %#v does not name the taken slug", refused[1])
		}
		var external *store.ExternalIDTakenError
		if !errors.As(refused[2], &external) || external.ExternalID != ext {
			t.Errorf("item 2: %#v does not name the taken external ID", refused[2])
		}
		n, err := db.Bun().NewSelect().Table("link_tags").Where("workspace_id = ?", b.ID).Count(ctx)
		if err != nil || n != 3 {
			t.Errorf("%d tag rows of B's created links, want 3 (%v)", n, err)
		}
		if _, err := db.Links.Get(ctx, b.ID, ls[6].ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the link refused by a tombstone was kept: %v", err)
		}
		back := newLink(a.ID, domain, "GONE", nil)
		if err := createLink(db, db.Bun(), back); err != nil {
			t.Errorf("the tombstone's workspace takes its slug back: %v", err)
		}
		got, err := db.Links.ByKey(ctx, a.ID, store.LinkKey{Domain: domain, SlugKey: "gone"})
		if err != nil || got.ID != back.ID {
			t.Errorf("ByKey: %v %v", got.ID, err)
		}
		wantTime(t, "created_at", got.CreatedAt, back.CreatedAt)
	})
}

// Update tells the two uniqueness rules apart by the violation itself (PostgreSQL names the index; SQLite's
// transaction can still ask), also for a link that keeps an external ID of its own.
func TestLinksUpdateConflicts(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "update conflicts")
		domain := store.NewID("d")[2:14] + ".example"
		mine, theirs := "mine", "theirs"
		for _, l := range []*store.Link{newLink(ws.ID, domain, "busy", &theirs), newLink(ws.ID, domain, "free", &mine)} {
			if err := createLink(db, db.Bun(), l); err != nil {
				t.Fatal(err)
			}
		}
		l, err := db.Links.ByKey(ctx, ws.ID, store.LinkKey{Domain: domain, SlugKey: "free"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			edit func(*store.Link)
			want error
		}{
			{func(l *store.Link) { l.Slug = "BUSY" }, store.ErrSlugTaken},
			{func(l *store.Link) { l.ExternalID = &theirs }, store.ErrExternalIDTaken},
		} {
			changed := l
			tc.edit(&changed)
			err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				old, err := db.Links.Lock(ctx, tx, ws.ID, l.ID)
				if err != nil {
					return err
				}
				return db.Links.Update(ctx, tx, &changed, old, time.Now().Add(time.Hour))
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("Update to slug %s, external_id %s = %v, want %v", changed.Slug, *changed.ExternalID, err, tc.want)
			}
		}
	})
}
