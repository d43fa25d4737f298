package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// One person is one contact: addresses reported together join one contact, and when an address reveals that two
// contacts are the same person they are merged into the older, chats included.
func TestContactsResolveMerges(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		ws, err := db.Workspaces.Create(c, "contacts")
		if err != nil {
			t.Fatal(err)
		}
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "i", Provider: "p", Status: "created",
			StatusReason: "created"}
		resolve := func(addresses ...string) (store.Contact, bool) {
			var got store.Contact
			var changed bool
			err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
				var err error
				got, changed, err = db.Contacts.Resolve(ctx, tx, ws.ID, inst.ID, addresses)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return got, changed
		}
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Instances.Create(ctx, tx, &inst) }); err != nil {
			t.Fatal(err)
		}
		phone, changed := resolve("+15550100002")
		if !changed || !slices.Equal(phone.Addresses, []string{"+15550100002"}) {
			t.Fatalf("phone = %+v, %v", phone, changed)
		}
		if again, changed := resolve("+15550100002"); changed || again.ID != phone.ID {
			t.Fatalf("again = %+v, %v", again, changed)
		}
		user, _ := resolve("bob@example")
		chat := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: "bob@example", ContactID: &user.ID}
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Chats.Create(ctx, tx, &chat) }); err != nil {
			t.Fatal(err)
		}
		merged, changed := resolve("+15550100002", "bob@example", "sbx:bob")
		if !changed || merged.ID != phone.ID || !slices.Equal(merged.Addresses, []string{"+15550100002", "bob@example", "sbx:bob"}) {
			t.Fatalf("merged = %+v, %v", merged, changed)
		}
		if _, err := db.Contacts.Get(c, ws.ID, inst.ID, user.ID); err != store.ErrNotFound {
			t.Fatalf("the merged-away contact: %v", err)
		}
		got, err := db.Chats.Get(c, ws.ID, inst.ID, chat.ID)
		if err != nil || got.ContactID == nil || *got.ContactID != phone.ID {
			t.Fatalf("chat = %+v, %v", got, err)
		}
	})
}
