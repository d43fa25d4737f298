//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	waSyncAction "go.mau.fi/whatsmeow/proto/waSyncAction"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A label is an app state patch in WhatsApp's encoding: its edit keyed by the label's ID with its name, its color
// as the palette index (Switchboard's color, unchanged) and whether it is deleted; a chat's label keyed by the label
// and the chat's JID. Each comes back as whatsmeow's event, which the session reports like a change from the phone.
func TestLabelsAreAppState(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := context.Background()
	const id = "lbl_01JDAD6A1B2C3D4E5F6G7H8J9K"
	for _, l := range []channels.NetworkLabel{{ID: id, Name: "VIP customers", Color: 7}, {ID: id, Name: "VIP", Color: 19}} {
		if err := r.sess.SaveLabel(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	peer := "+" + r.peer.phone
	for _, on := range []bool{true, false} {
		if err := r.sess.LabelChat(ctx, peer, id, on); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.sess.SaveLabel(ctx, channels.NetworkLabel{ID: id, Name: "VIP", Color: 19, Deleted: true}); err != nil {
		t.Fatal(err)
	}
	to, me := r.peer.pn().String(), r.me.phone+" appstate "
	want := []string{me + "label_edit " + id + ` "VIP customers" 7 false`, me + "label_edit " + id + ` "VIP" 19 false`,
		me + "label_jid " + id + " " + to + " true", me + "label_jid " + id + " " + to + " false",
		me + "label_edit " + id + ` "VIP" 19 true`}
	if got := r.n.presenceLog(); !slices.Equal(got, want) {
		t.Errorf("app state\n%q\nwant\n%q", got, want)
	}
	var reported []string
	for _, c := range r.sink.all() {
		switch c.kind {
		case "label":
			reported = append(reported, fmt.Sprint(c.label.ID, " ", c.label.Name, " ", c.label.Color, " ", c.label.Deleted))
		case "labelled":
			reported = append(reported, fmt.Sprint(c.reason, " ", c.label.ID, " ", c.on))
		}
	}
	wantReported := []string{id + " VIP customers 7 false", id + " VIP 19 false", peer + " " + id + " true",
		peer + " " + id + " false", id + " VIP 19 true"}
	if !slices.Equal(reported, wantReported) {
		t.Errorf("reported back\n%q\nwant\n%q", reported, wantReported)
	}
}

// Switchboard's colors are WhatsApp's palette indexes; one past the palette wraps around it.
func TestPaletteColor(t *testing.T) {
	for in, want := range map[int]int32{0: 0, 7: 7, 19: 19, 20: 0, 23: 3, -1: 19} {
		if got := paletteColor(in); got != want {
			t.Errorf("paletteColor(%d) = %d, want %d", in, got, want)
		}
	}
}

// Labels made through the API are WhatsApp's labels by Switchboard's ID: whatsmeow's report of the device's own
// change, which comes first, leaves one label, with the ID the API answered, and one chat.updated per change.
func TestLabelsThroughTheAPI(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n, me, peer, e, id := pairedEngine(t, db)
		chat := firstChat(t, e, id, n, me, peer)
		l, err := e.svc.CreateLabel(ctx, e.ws, id, "VIP", 3)
		if err != nil {
			t.Fatal(err)
		}
		labels := instanceLabels(t, e, id)
		if len(labels) != 1 || labels[0].ID != l.ID || labels[0].ExternalID == nil || *labels[0].ExternalID != l.ID ||
			labels[0].Name != "VIP" || labels[0].Color != 3 {
			t.Fatalf("labels after creating %s: %+v", l.ID, labels)
		}
		updates := len(e.events(t, "chat.updated"))
		if _, err := e.svc.LabelChat(ctx, e.ws, id, chat.ID, l.ID, true); err != nil {
			t.Fatal(err)
		}
		if got := chatLabels(t, e, chat.ID); !slices.Equal(got, []string{l.ID}) {
			t.Errorf("chat's labels %q, want %q", got, l.ID)
		}
		if got := len(e.events(t, "chat.updated")) - updates; got != 1 {
			t.Errorf("%d chat.updated for labelling the chat, want 1", got)
		}
		if err := e.svc.DeleteLabel(ctx, e.ws, id, l.ID); err != nil {
			t.Fatalf("deleting the label, whose deletion the network reported first: %v", err)
		}
		if labels := instanceLabels(t, e, id); len(labels) != 0 {
			t.Errorf("labels after the deletion: %+v", labels)
		}
		if got := chatLabels(t, e, chat.ID); len(got) != 0 {
			t.Errorf("chat's labels after the deletion: %q", got)
		}
		if got := len(e.events(t, "chat.updated")) - updates; got != 2 {
			t.Errorf("%d chat.updated for labelling the chat and deleting its label, want 2", got)
		}
	})
}

// What the phone does to labels reaches the instance through WhatsApp's app state events: a label first seen gets
// an ID of Switchboard's and keeps WhatsApp's; renaming, recoloring, labelling and deleting change the label and
// its chats, with chat.updated; a replay changes nothing; a chat's label that comes before the label is recorded
// under a name of its own until the label comes; a chat not known yet is left alone; WhatsApp's
// computed lists (unread, groups …) are no labels.
func TestLabelsFromThePhone(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n, me, peer, e, id := pairedEngine(t, db)
		chat := firstChat(t, e, id, n, me, peer)
		updates := len(e.events(t, "chat.updated"))
		edit := func(label, name string, color int32, deleted bool) *events.LabelEdit {
			return &events.LabelEdit{LabelID: label, Timestamp: time.Now(), Action: &waSyncAction.LabelEditAction{
				Name: proto.String(name), Color: proto.Int32(color), Deleted: proto.Bool(deleted)}}
		}
		labelled := func(chat types.JID, label string, on bool) *events.LabelAssociationChat {
			return &events.LabelAssociationChat{JID: chat, LabelID: label, Timestamp: time.Now(),
				Action: &waSyncAction.LabelAssociationAction{Labeled: proto.Bool(on)}}
		}
		n.deliver(me, edit("5", "Orders", 2, false))
		n.deliver(me, edit("5", "Orders", 2, false)) // replayed
		n.deliver(me, labelled(peer.jid(), "5", true))
		n.deliver(me, labelled(peer.pn(), "5", true)) // replayed, by number
		n.deliver(me, &events.LabelEdit{LabelID: "1", Action: &waSyncAction.LabelEditAction{Name: proto.String("Unread"),
			Type: waSyncAction.LabelEditAction_UNREAD.Enum()}})
		n.deliver(me, edit("5", "  Paid\norders ", 4, false))
		labels := await.Until(t, "the renamed label", func() []store.Label { return instanceLabels(t, e, id) },
			func(ls []store.Label) bool { return len(ls) > 0 && ls[0].Color == 4 })
		orders := labels[0]
		if len(labels) != 1 || orders.Name != "Paid orders" || orders.ExternalID == nil || *orders.ExternalID != "5" ||
			!strings.HasPrefix(orders.ID, "lbl_") {
			t.Fatalf("labels from the phone: %+v", labels)
		}
		if got := chatLabels(t, e, chat.ID); !slices.Equal(got, []string{orders.ID}) {
			t.Errorf("chat's labels %q, want %q", got, orders.ID)
		}
		evs := e.events(t, "chat.updated")
		if got := len(evs) - updates; got != 1 {
			t.Errorf("%d chat.updated for labelling the chat (twice), want 1", got)
		}
		if got := evs[len(evs)-1]["chat"].(map[string]any)["labels"]; !slices.Equal(anyStrings(got), []string{orders.ID}) {
			t.Errorf("chat.updated shows labels %v, want %q", got, orders.ID)
		}

		// A stranger's chat, not known, is left alone; a chat labelled with a label not reported yet carries it.
		stranger := n.add("4917600000000", "Stranger")
		n.deliver(me, labelled(stranger.pn(), "7", true))
		n.deliver(me, labelled(peer.pn(), "9", true))
		n.deliver(me, edit("9", "Later", 11, false))
		later := await.Until(t, "the later label", func() store.Label { return labelOf(t, e, id, "9") },
			func(l store.Label) bool { return l.Name == "Later" })
		if later.Color != 11 {
			t.Errorf("the later label: %+v", later)
		}
		if _, err := e.db.Chats.ByAddress(ctx, e.db.Reader(), id, "+"+stranger.phone); err != store.ErrNotFound {
			t.Errorf("the stranger's chat: %v, want none", err)
		}
		if l := labelOf(t, e, id, "7"); l.ID != "" {
			t.Errorf("the label of the stranger's chat was recorded: %+v", l)
		}
		if got := chatLabels(t, e, chat.ID); !slices.Equal(got, sorted(orders.ID, later.ID)) {
			t.Errorf("chat's labels %q, want %q and %q", got, orders.ID, later.ID)
		}

		// Unlabelled, then the label deleted: the chat loses each once.
		updates = len(e.events(t, "chat.updated"))
		n.deliver(me, labelled(peer.pn(), "5", false))
		n.deliver(me, labelled(peer.pn(), "5", false))
		n.deliver(me, edit("9", "Later", 11, true))
		n.deliver(me, edit("9", "Later", 11, true))
		await.Until(t, "the later label deleted", func() []store.Label { return instanceLabels(t, e, id) },
			func(ls []store.Label) bool { return len(ls) == 1 })
		if got := chatLabels(t, e, chat.ID); len(got) != 0 {
			t.Errorf("chat's labels after unlabelling and deleting: %q", got)
		}
		if got := len(e.events(t, "chat.updated")) - updates; got != 2 {
			t.Errorf("%d chat.updated for unlabelling the chat and deleting its other label, want 2", got)
		}
	})
}

// firstChat has the peer write to the account and returns the chat that makes.
func firstChat(t *testing.T, e *engine, id string, n *network, me, peer *account) store.Chat {
	t.Helper()
	n.deliver(me, &events.Message{Info: types.MessageInfo{ID: "3AHELLO", Timestamp: time.Now(),
		MessageSource: types.MessageSource{Chat: peer.pn(), Sender: peer.pn()}},
		Message: &waE2E.Message{Conversation: proto.String("hello")}})
	return await.Until(t, "the chat", func() []store.Chat {
		cs, _, err := e.svc.ListChats(context.Background(), e.ws, id, store.ChatFilter{}, store.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}, func(cs []store.Chat) bool { return len(cs) == 1 })[0]
}

// instanceLabels are the instance's labels.
func instanceLabels(t *testing.T, e *engine, id string) []store.Label {
	t.Helper()
	ls, _, err := e.svc.ListLabels(context.Background(), e.ws, id, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// labelOf is the instance's label with a network ID (the zero label while there is none).
func labelOf(t *testing.T, e *engine, id, networkID string) store.Label {
	t.Helper()
	for _, l := range instanceLabels(t, e, id) {
		if l.ExternalID != nil && *l.ExternalID == networkID {
			return l
		}
	}
	return store.Label{}
}

// chatLabels are the IDs of the labels a chat carries.
func chatLabels(t *testing.T, e *engine, chatID string) []string {
	t.Helper()
	m, err := e.db.Labels.OfChats(context.Background(), e.db.Reader(), []string{chatID})
	if err != nil {
		t.Fatal(err)
	}
	return m[chatID]
}

// sorted is IDs in order.
func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// anyStrings is a JSON array of strings as strings.
func anyStrings(v any) []string {
	var out []string
	a, _ := v.([]any)
	for _, s := range a {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}
