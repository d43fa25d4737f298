package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// SaveMany writes the status, history, failure and network ID of several messages in one statement, each its own.
func TestMessagesSaveMany(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		ws, err := db.Workspaces.Create(c, "messages")
		if err != nil {
			t.Fatal(err)
		}
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "i", Provider: "sandbox", Status: "connected", StatusReason: "test"}
		var ms []store.Message
		err = db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			if err := db.Instances.Create(ctx, tx, &inst); err != nil {
				return err
			}
			chat := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: "+15550100001"}
			if err := db.Chats.Create(ctx, tx, &chat); err != nil {
				return err
			}
			for range 3 {
				m := store.Message{ID: store.NewID("msg"), WorkspaceID: ws.ID, InstanceID: inst.ID, ChatID: chat.ID,
					Direction: "outbound", Type: "text", Status: "sending",
					StatusHistory: []store.StatusChange{{Status: "queued", At: time.Now().UTC().Truncate(time.Microsecond)}}}
				if err := db.Messages.Create(ctx, tx, &m); err != nil {
					return err
				}
				ms = append(ms, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Truncate(time.Microsecond)
		pid := "net-1"
		ms[0].Status, ms[0].ProviderMessageID = "sent", &pid
		ms[0].StatusHistory = append(ms[0].StatusHistory, store.StatusChange{Status: "sent", At: at})
		ms[1].Status, ms[1].Failure = "failed", &store.Failure{Code: "network_error", Detail: "refused"}
		ms[1].StatusHistory = append(ms[1].StatusHistory, store.StatusChange{Status: "failed", At: at, Detail: "network_error"})
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Messages.SaveMany(ctx, tx, ms) }); err != nil {
			t.Fatal(err)
		}
		for i, want := range ms {
			got, err := db.Messages.ByID(c, db.Reader(), want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != want.Status || len(got.StatusHistory) != len(want.StatusHistory) ||
				(got.Failure == nil) != (want.Failure == nil) || (got.ProviderMessageID == nil) != (want.ProviderMessageID == nil) {
				t.Errorf("message %d: got %s %+v %+v %v, want %s %+v %+v %v", i, got.Status, got.StatusHistory, got.Failure,
					got.ProviderMessageID, want.Status, want.StatusHistory, want.Failure, want.ProviderMessageID)
			}
		}
		gone := ms[2]
		gone.ID = store.NewID("msg")
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			return db.Messages.SaveMany(ctx, tx, []store.Message{ms[0], gone})
		}); err != store.ErrNotFound {
			t.Errorf("SaveMany of a message that is not there: %v, want ErrNotFound", err)
		}
	})
}
