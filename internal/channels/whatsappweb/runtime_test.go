//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	sbevents "github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// engine is the messaging service and the channel runtime over db, as serve wires them, with the provider built
// over newClient; the runtime runs until the test ends.
type engine struct {
	db  *store.DB
	svc *channels.Service
	p   *Provider
	ws  string
}

func newEngine(t *testing.T, db *store.DB, newClient NewClient, budget int) *engine {
	t.Helper()
	ctx := context.Background()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := New(db, Options{NewClient: newClient})
	rec, err := channels.NewRecorder(db, sbevents.NewOutbox(db, sbevents.Builtin()), channels.Config{Sealer: box, Logger: quiet,
		Media: channels.DatabaseMedia{DB: db}, Providers: []channels.Provider{p}})
	if err != nil {
		t.Fatal(err)
	}
	rt := hub.New(db, rec, hub.Options{Owner: "whatsapp-test", Lease: 6 * time.Second, Rate: -1,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Budget: budget, Logger: quiet})
	svc, err := channels.New(rec, rt)
	if err != nil {
		t.Fatal(err)
	}
	run, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(run) }()
	t.Cleanup(func() { cancel(); <-done })
	ws, err := db.Workspaces.Create(ctx, "whatsapp")
	if err != nil {
		t.Fatal(err)
	}
	return &engine{db: db, svc: svc, p: p, ws: ws.ID}
}

// connect creates an instance and connects it.
func (e *engine) connect(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	inst, err := e.svc.Create(ctx, e.ws, channels.NewInstance{Name: "wa", Provider: Name, Config: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Connect(ctx, e.ws, inst.ID); err != nil {
		t.Fatal(err)
	}
	return inst.ID
}

// connected waits until the instance is connected.
func (e *engine) connected(t *testing.T, id string) store.Instance {
	t.Helper()
	return await.Until(t, "the instance to connect", func() store.Instance { return e.instance(t, id) },
		func(i store.Instance) bool { return i.Status == string(channels.StatusConnected) })
}

// pairedEngine is an engine over a network of "me" and a peer whose instance scans as me at once, connected.
func pairedEngine(t *testing.T, db *store.DB) (n *network, me, peer *account, e *engine, id string) {
	t.Helper()
	n = newNetwork()
	me = n.add("15550100001", "Me")
	peer = n.add("4915112345678", "Peer")
	n.scanning = append(n.scanning, me)
	e = newEngine(t, db, n.NewClient, 0)
	id = e.connect(t)
	e.connected(t, id)
	return n, me, peer, e, id
}

func (e *engine) instance(t *testing.T, id string) store.Instance {
	t.Helper()
	i, err := e.db.Instances.ByID(context.Background(), e.db.Reader(), id)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// events are the data of the workspace's events of a type, oldest first.
func (e *engine) events(t *testing.T, typ string) []map[string]any {
	t.Helper()
	evs, _, err := e.db.Events.List(context.Background(), e.ws, store.EventFilter{Type: typ}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(evs))
	for i, ev := range evs {
		if err := json.Unmarshal(ev.Data, &out[len(evs)-1-i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// An instance whose real client cannot reach WhatsApp is shown reconnecting, with the cause as its reason and the
// attempt counted, while the channel runtime backs off; past the runtime's failure budget it fails. Each change
// is an instance.status_changed event, which webhooks deliver.
func TestOfflineInstanceReconnectsUnderTheRuntimeBackoff(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		var dials atomic.Int64
		e := newEngine(t, db, offline(&dials), 4)
		id := e.connect(t)
		state := func() store.Instance { return e.instance(t, id) }
		seen := await.Until(t, "the instance to reconnect with the cause", state, func(i store.Instance) bool {
			return i.Status == string(channels.StatusReconnecting) && i.ReconnectAttempt >= 2
		})
		if !strings.Contains(seen.StatusReason, "server_unreachable") || !strings.Contains(seen.StatusReason, errOffline.Error()) {
			t.Errorf("reconnecting because %q, want the unreachable server and its cause", seen.StatusReason)
		}
		final := await.Until(t, "the instance to fail past the budget", state, func(i store.Instance) bool {
			return i.Status == string(channels.StatusFailed)
		})
		if !strings.Contains(final.StatusReason, "gave up after 4 failed attempts") {
			t.Errorf("failed because %q", final.StatusReason)
		}
		var statuses []string
		for _, d := range e.events(t, "instance.status_changed") {
			statuses = append(statuses, d["status"].(string))
		}
		got := strings.Join(statuses, " ")
		if !strings.Contains(got, "reconnecting") || !strings.Contains(got, "failed") {
			t.Errorf("instance.status_changed events: %v, want reconnecting then failed", statuses)
		}
	})
}

// Through the service: the QR code is an instance.qr_updated event and the instance's QR; the paired account is
// the instance's; a photo from a person addressed by LID is a message.received whose attachment is in the media
// store; the person is one contact with both addresses however WhatsApp names them.
func TestWhatReachesTheAPI(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n := newNetwork()
		me := n.add("15550100001", "Me")
		peer := n.add("4915112345678", "Peer")
		e := newEngine(t, db, n.NewClient, 0)
		id := e.connect(t)
		await.Until(t, "the QR code", func() store.Instance { return e.instance(t, id) }, func(i store.Instance) bool {
			return i.Status == string(channels.StatusAwaitingAuth) && i.QRCode != nil
		})
		qr := e.events(t, "instance.qr_updated")
		if len(qr) == 0 || !strings.HasPrefix(qr[0]["code"].(string), "2@fake-qr-") {
			t.Fatalf("instance.qr_updated events %v", qr)
		}
		// The phone scans the code the API shows.
		var c *fakeClient
		await.Until(t, "the device waiting for a scan", func() *fakeClient {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.waiting
		}, func(w *fakeClient) bool { c = w; return w != nil })
		if err := c.pair(ctx, me); err != nil {
			t.Fatal(err)
		}
		inst := e.connected(t, id)
		if inst.Account == nil || inst.Account.Address != "+15550100001" {
			t.Errorf("account %+v", inst.Account)
		}

		media.Lock()
		media.byPath["/v/api-photo"] = []byte("the photo's bytes")
		media.Unlock()
		photo := &events.Message{Info: types.MessageInfo{ID: "3AAPIPHOTO", PushName: "Peer", Timestamp: time.Now(),
			MessageSource: types.MessageSource{Chat: peer.jid(), Sender: peer.jid(), SenderAlt: peer.pn()}},
			Message: &waE2E.Message{ImageMessage: &waE2E.ImageMessage{DirectPath: proto.String("/v/api-photo"),
				Mimetype: proto.String("image/jpeg"), Caption: proto.String("look"), FileLength: proto.Uint64(17)}}}
		n.deliver(me, photo)
		later := &events.Message{Info: types.MessageInfo{ID: "3AAPILID", Timestamp: time.Now(),
			MessageSource: types.MessageSource{Chat: peer.jid(), Sender: peer.jid()}},
			Message: &waE2E.Message{Conversation: proto.String("by LID alone")}}
		n.deliver(me, later)
		received := await.Until(t, "both messages", func() []map[string]any { return e.events(t, "message.received") },
			func(ms []map[string]any) bool { return len(ms) == 2 })
		first := received[0]["message"].(map[string]any)
		m, ok := first["media"].(map[string]any)
		if !ok || m["kind"] != "image" || m["caption"] != "look" || m["media_id"] == nil {
			t.Fatalf("message.received %v", first)
		}
		stored, bytes, err := e.svc.MediaContent(ctx, e.ws, m["media_id"].(string))
		if err != nil || string(bytes) != "the photo's bytes" || stored.MIMEType != "image/jpeg" {
			t.Errorf("the attachment in the media store: %q, %v", bytes, err)
		}
		from1 := first["from"].(map[string]any)
		from2 := received[1]["message"].(map[string]any)["from"].(map[string]any)
		if from1["contact_id"] == nil || from1["contact_id"] != from2["contact_id"] || from1["address"] != "+4915112345678" {
			t.Errorf("the person is two contacts or not by number: %v and %v", from1, from2)
		}
		contacts, _, err := e.svc.ListContacts(ctx, e.ws, id, nil, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(contacts) != 1 || !slices.Contains(contacts[0].Addresses, "+4915112345678") ||
			!slices.Contains(contacts[0].Addresses, peer.lid+"@lid") {
			t.Errorf("contacts %+v, want one with the number and the LID", contacts)
		}
	})
}

// Deleting an instance whose session is not live (disconnected) does not reach its session; its device is deleted
// when the next session of the provider starts.
func TestDeletedOfflineInstanceLosesItsDevice(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n := newNetwork()
		first, second := n.add("15550100001", "First"), n.add("15550100002", "Second")
		n.scanning = append(n.scanning, first, second)
		e := newEngine(t, db, n.NewClient, 0)
		connected := func(id string) store.Instance { return e.connected(t, id) }
		id := e.connect(t)
		connected(id)
		var jid types.JID
		for j := range first.devices {
			jid, _ = types.ParseJID(j)
		}
		if _, err := e.svc.Disconnect(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Delete(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.p.devices.Paired(ctx, jid); err != nil || !ok {
			t.Fatalf("the disconnected instance's device is not in the store before any session started (%v)", err)
		}
		connected(e.connect(t))
		if ok, err := e.p.devices.Paired(ctx, jid); err != nil || ok {
			t.Errorf("the deleted instance's device is still in the store after the next session started (%v)", err)
		}
	})
}
