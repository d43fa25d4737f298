package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// newSandboxEnv is a server whose messaging service has the sandbox network (receipts at once) and the bare
// provider, over a runtime in this process.
func newSandboxEnv(t *testing.T, db *store.DB) *msgEnv {
	t.Helper()
	return newSandboxEnvWith(t, db, sandbox.Options{})
}

// newSandboxEnvWith is newSandboxEnv with the sandbox network configured by opts.
func newSandboxEnvWith(t *testing.T, db *store.DB, opts sandbox.Options) *msgEnv {
	t.Helper()
	return newSandboxServer(t, db, opts, handlers.Config{}, nil)
}

// newSandboxServer is newSandboxEnvWith over cfg: the messaging service, the outbox, the Box, the logger and
// generous rate limits are set here, and webhooks reach their targets through guard (nil: the default policy); the
// rest is cfg's.
func newSandboxServer(t *testing.T, db *store.DB, opts sandbox.Options, cfg handlers.Config, guard *egress.Guard) *msgEnv {
	t.Helper()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	outbox := events.NewOutbox(db, events.Builtin())
	rec, err := channels.NewRecorder(db, outbox, channels.Config{Sealer: box,
		Providers: []channels.Provider{bareProvider{}, sandbox.New(db.Sandbox, opts)}})
	if err != nil {
		t.Fatal(err)
	}
	// The real runtime, unpaced (pacing has its own tests), with a short lease so that a test's end frees it.
	rt := hub.New(db, rec, hub.Options{Rate: -1, Lease: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))})
	svc, err := channels.New(rec, rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	// The route worker has a context of its own, so that a test can stop it (stopRoutes) as a replica's ends.
	routesCtx, stopRoutes := context.WithCancel(ctx)
	stopped, routesStopped := make(chan struct{}, 1), make(chan struct{})
	go func() { _ = rt.Run(ctx); stopped <- struct{}{} }()
	go func() { _ = svc.RunRoutes(routesCtx); close(routesStopped) }()
	t.Cleanup(func() { stop(); <-stopped; <-routesStopped })
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg.Events, cfg.Channels, cfg.Logger, cfg.Box = outbox, svc, log, box
	cfg.KeyRateLimit, cfg.WorkspaceRateLimit = 1<<20, 1<<20
	a := apptest.New(t, db, app.Config{Logger: log, BaseURL: cfg.BaseURL, Events: outbox, Guard: guard, LLM: cfg.LLM})
	e := &msgEnv{env: newAppEnv(t, a, cfg), channels: svc, stopRoutes: func() { stopRoutes(); <-routesStopped }}
	e.ws = e.workspace("Sandbox")
	e.apiKey, _ = e.key(e.ws.ID, "messaging:write")
	return e
}

func (e *msgEnv) post(path, body string) *response {
	return e.do(request{method: http.MethodPost, path: path, key: e.apiKey, body: body})
}

func (e *msgEnv) get(path string, v any) *response {
	e.t.Helper()
	res := e.do(request{path: path, key: e.apiKey})
	if res.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.body)
	}
	if v != nil {
		res.json(e.t, v)
	}
	return res
}

// instance creates an instance and returns it.
func (e *msgEnv) instance(provider, config string) gen.Instance {
	e.t.Helper()
	res := e.post("/api/v1/instances", fmt.Sprintf(`{"name":"i","provider":%q,"config":%s}`, provider, config))
	if res.StatusCode != 201 {
		e.t.Fatalf("create instance: %d %s", res.StatusCode, res.body)
	}
	var inst gen.Instance
	res.json(e.t, &inst)
	return inst
}

// status polls an instance until it reaches a status.
func (e *msgEnv) status(id string, want gen.InstanceStatus) gen.Instance {
	e.t.Helper()
	return await.Until(e.t, "instance "+id+" "+string(want), func() gen.Instance {
		var inst gen.Instance
		e.get("/api/v1/instances/"+id, &inst)
		return inst
	}, func(i gen.Instance) bool { return i.Status == want })
}

// connected creates a sandbox instance that pairs at once and waits until it is connected.
func (e *msgEnv) connected(name string) gen.Instance {
	e.t.Helper()
	inst := e.instance("sandbox", fmt.Sprintf(`{"auto_pair":true,"display_name":%q}`, name))
	if res := e.post("/api/v1/instances/"+inst.Id+"/connect", ""); res.StatusCode != 200 {
		e.t.Fatalf("connect: %d %s", res.StatusCode, res.body)
	}
	return e.status(inst.Id, "connected")
}

func TestSandboxEndToEnd(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)

		// Pair by QR: connect, read the code, scan it.
		alice := e.instance("sandbox", `{"display_name":"Alice"}`)
		if res := e.post("/api/v1/instances/"+alice.Id+"/connect", ""); res.StatusCode != 200 {
			t.Fatalf("connect: %d %s", res.StatusCode, res.body)
		}
		waiting := e.status(alice.Id, "awaiting_auth")
		if waiting.AuthMethod == nil || *waiting.AuthMethod != "qr" {
			t.Fatalf("awaiting = %+v", waiting)
		}
		var qr gen.InstanceQR
		e.get("/api/v1/instances/"+alice.Id+"/qr", &qr)
		if qr.Code == "" || !strings.HasPrefix(qr.Image, "data:image/png;base64,") {
			t.Fatalf("qr = %+v", qr)
		}
		if res := e.post("/api/v1/instances/"+alice.Id+"/sandbox/scan", ""); res.StatusCode != 200 {
			t.Fatalf("scan: %d %s", res.StatusCode, res.body)
		}
		alice = e.status(alice.Id, "connected")
		if alice.Account == nil || !strings.HasPrefix(alice.Account.Address, "+999") {
			t.Fatalf("alice = %+v", alice)
		}
		bob, carol := e.connected("Bob"), e.connected("Carol")

		// Send: queued at once, then sent, delivered and read, never backwards.
		res := e.post("/api/v1/instances/"+alice.Id+"/messages",
			fmt.Sprintf(`{"to":%q,"type":"text","text":"hello Bob","client_message_id":"c-1"}`, bob.Account.Address))
		if res.StatusCode != 202 {
			t.Fatalf("send: %d %s", res.StatusCode, res.body)
		}
		var queued gen.Message
		res.json(t, &queued)
		if queued.Status != "queued" || queued.To.Address != bob.Account.Address || queued.To.ContactId == nil {
			t.Fatalf("queued = %+v", queued)
		}
		read := await.Until(t, "message read", func() gen.Message {
			var m gen.Message
			e.get("/api/v1/instances/"+alice.Id+"/messages/"+queued.Id, &m)
			return m
		}, func(m gen.Message) bool { return m.Status == "read" })
		var steps []string
		for _, h := range read.StatusHistory {
			steps = append(steps, string(h.Status))
		}
		if strings.Join(steps, " ") != "queued sending sent delivered read" || read.ProviderMessageId == nil {
			t.Errorf("history = %v, provider id %v", steps, read.ProviderMessageId)
		}
		// The same client_message_id answers the first message; canceling a sent message is refused.
		res = e.post("/api/v1/instances/"+alice.Id+"/messages",
			fmt.Sprintf(`{"to":%q,"type":"text","text":"hello again","client_message_id":"c-1"}`, bob.Account.Address))
		var again gen.Message
		if res.json(t, &again); res.StatusCode != 200 || again.Id != queued.Id {
			t.Fatalf("resend: %d %s", res.StatusCode, res.body)
		}
		e.post("/api/v1/instances/"+alice.Id+"/messages/"+queued.Id+"/cancel", "").problem(t, 409, "message_not_cancelable")

		// Bob received it, from Alice's contact, in a chat with one unread message.
		var inbox gen.MessageList
		await.Until(t, "bob's inbox", func() gen.MessageList {
			e.get("/api/v1/instances/"+bob.Id+"/messages?direction=inbound", &inbox)
			return inbox
		}, func(l gen.MessageList) bool { return len(l.Data) == 1 })
		in := inbox.Data[0]
		if in.Text == nil || *in.Text != "hello Bob" || in.From.Address != alice.Account.Address || in.From.ContactId == nil {
			t.Fatalf("inbound = %+v", in)
		}
		var chats gen.ChatList
		e.get("/api/v1/instances/"+bob.Id+"/chats", &chats)
		if len(chats.Data) != 1 || chats.Data[0].UnreadCount != 1 || chats.Data[0].LastMessage == nil {
			t.Fatalf("chats = %+v", chats)
		}
		var chat gen.Chat
		if res := e.post("/api/v1/instances/"+bob.Id+"/chats/"+chats.Data[0].Id+"/read", ""); res.StatusCode != 200 {
			t.Fatalf("read: %d %s", res.StatusCode, res.body)
		} else {
			res.json(t, &chat)
		}
		if chat.UnreadCount != 0 {
			t.Fatalf("chat after read = %+v", chat)
		}

		// A group with Bob, then Carol added: one result per participant.
		res = e.post("/api/v1/instances/"+alice.Id+"/groups",
			fmt.Sprintf(`{"subject":"Launch","participants":[%q]}`, bob.Account.Address))
		if res.StatusCode != 201 {
			t.Fatalf("group: %d %s", res.StatusCode, res.body)
		}
		var group gen.GroupCreated
		res.json(t, &group)
		if group.Subject != "Launch" || len(group.Participants) != 2 || len(group.Rejected) != 0 {
			t.Fatalf("group = %+v", group)
		}
		var change gen.ParticipantsChangeResult
		res = e.post("/api/v1/instances/"+alice.Id+"/groups/"+group.Id+"/participants",
			fmt.Sprintf(`{"action":"add","participants":[%q]}`, carol.Account.Address))
		if res.json(t, &change); res.StatusCode != 200 || len(change.Data) != 1 || !change.Data[0].Ok {
			t.Fatalf("add: %d %s", res.StatusCode, res.body)
		}
		var g gen.Group
		e.get("/api/v1/instances/"+alice.Id+"/groups/"+group.Id, &g)
		if len(g.Participants) != 3 {
			t.Fatalf("group after add = %+v", g)
		}
		await.Until(t, "carol's group", func() gen.GroupList {
			var l gen.GroupList
			e.get("/api/v1/instances/"+carol.Id+"/groups", &l)
			return l
		}, func(l gen.GroupList) bool { return len(l.Data) == 1 })

		// Lookup: Bob is on the network, a free number is not.
		var lookup gen.ContactLookupResult
		res = e.post("/api/v1/instances/"+alice.Id+"/contacts/lookup",
			fmt.Sprintf(`{"addresses":[%q,"+99987654321"]}`, bob.Account.Address))
		if res.json(t, &lookup); res.StatusCode != 200 || len(lookup.Data) != 2 {
			t.Fatalf("lookup: %d %s", res.StatusCode, res.body)
		}
		if !lookup.Data[0].OnNetwork || lookup.Data[0].Contact == nil || lookup.Data[1].OnNetwork {
			t.Fatalf("lookup = %+v", lookup.Data)
		}
		contact := *lookup.Data[0].Contact

		// Media: upload, then read it back.
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "note.txt")
		_, _ = io.WriteString(fw, "hello media")
		_ = mw.Close()
		res = e.do(request{method: http.MethodPost, path: "/api/v1/media", key: e.apiKey, body: buf.String(),
			header: map[string]string{"Content-Type": mw.FormDataContentType()}})
		if res.StatusCode != 201 {
			t.Fatalf("upload: %d %s", res.StatusCode, res.body)
		}
		var media gen.Media
		res.json(t, &media)
		if content := e.get("/api/v1/media/"+media.Id+"/content", nil); string(content.body) != "hello media" {
			t.Fatalf("content = %q", content.body)
		}

		// Every object is invisible to another workspace.
		other := e.workspace("Other")
		otherKey, _ := e.key(other.ID, "messaging:write")
		for _, path := range []string{
			"/api/v1/instances/" + alice.Id + "/messages/" + queued.Id,
			"/api/v1/instances/" + alice.Id + "/messages",
			"/api/v1/instances/" + bob.Id + "/chats/" + chats.Data[0].Id,
			"/api/v1/instances/" + alice.Id + "/groups/" + group.Id,
			"/api/v1/instances/" + alice.Id + "/contacts/" + contact.Id,
			"/api/v1/instances/" + alice.Id + "/queue",
			"/api/v1/media/" + media.Id,
			"/api/v1/media/" + media.Id + "/content",
		} {
			e.do(request{path: path, key: otherKey}).problem(t, 404, "not_found")
		}
		for _, r := range []request{
			{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/messages", body: `{"to":"+99912345678","type":"text","text":"x"}`},
			{method: http.MethodPost, path: "/api/v1/instances/" + bob.Id + "/chats/" + chats.Data[0].Id + "/read"},
			{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/groups/" + group.Id + "/leave"},
			{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/contacts/" + contact.Id + "/block"},
			{method: http.MethodPost, path: "/api/v1/instances/" + alice.Id + "/sandbox/inbound", body: `{"from":"+99912345678","text":"x"}`},
		} {
			r.key = otherKey
			e.do(r).problem(t, 404, "not_found")
		}

		// The events of an instance are numbered one by one.
		evs, _, err := db.Events.List(context.Background(), e.ws.ID, store.EventFilter{}, store.Page{Limit: 100, After: "evt_"})
		if err != nil {
			t.Fatal(err)
		}
		last := map[string]int64{}
		seen := map[string]bool{}
		for _, ev := range evs {
			var data struct {
				InstanceID string `json:"instance_id"`
				Sequence   int64  `json:"sequence"`
			}
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.Sequence != last[data.InstanceID]+1 {
				t.Errorf("%s of %s: sequence %d after %d", ev.Type, data.InstanceID, data.Sequence, last[data.InstanceID])
			}
			last[data.InstanceID] = data.Sequence
			seen[ev.Type] = true
		}
		for _, typ := range []string{"instance.created", "instance.status_changed", "instance.qr_updated", "message.sent",
			"message.status_updated", "message.received", "chat.updated", "group.created", "group.participants_changed",
			"contact.updated"} {
			if !seen[typ] {
				t.Errorf("no %s event", typ)
			}
		}
	})
}

// A provider with no capability refuses every call that needs one, before anything is stored or queued.
func TestCapabilityNotSupported(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		bare := e.instance("bare", `{"token":"abcd"}`)
		base := "/api/v1/instances/" + bare.Id
		for _, r := range []request{
			{method: http.MethodPost, path: base + "/messages", body: `{"to":"bob","type":"text","text":"x"}`},
			{method: http.MethodPost, path: base + "/messages", body: `{"to":"bob","type":"location","location":{"latitude":1,"longitude":2}}`},
			{method: http.MethodPost, path: base + "/pairing-code", body: `{"phone":"+15550100001"}`},
			{path: base + "/qr"},
			{method: http.MethodPost, path: base + "/groups", body: `{"subject":"x","participants":["bob"]}`},
			{method: http.MethodPost, path: base + "/groups/join", body: `{"invite":"x"}`},
			{method: http.MethodPost, path: base + "/contacts/lookup", body: `{"addresses":["bob"]}`},
			{method: http.MethodPost, path: base + "/contacts/con_01JDAD3A1B2C3D4E5F6G7H8J9K/block"},
		} {
			r.key = e.apiKey
			e.do(r).problem(t, 422, "capability_not_supported")
		}
		var msgs gen.MessageList
		e.get(base+"/messages", &msgs)
		if len(msgs.Data) != 0 {
			t.Fatalf("messages stored: %+v", msgs.Data)
		}
	})
}

// Receipts in either order (the sandbox shuffles them): every message ends read, and its history only climbs.
func TestStatusNeverMovesBackwards(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnvWith(t, db, sandbox.Options{Shuffle: true})
		a, b := e.connected("A"), e.connected("B")
		rank := map[gen.MessageStatus]int{"queued": 0, "sending": 1, "sent": 2, "delivered": 3, "read": 4}
		var ids []string
		for i := range 10 {
			res := e.post("/api/v1/instances/"+a.Id+"/messages",
				fmt.Sprintf(`{"to":%q,"type":"text","text":"m%d"}`, b.Account.Address, i))
			var m gen.Message
			if res.json(t, &m); res.StatusCode != 202 {
				t.Fatalf("send: %d %s", res.StatusCode, res.body)
			}
			ids = append(ids, m.Id)
		}
		for _, id := range ids {
			m := await.Until(t, "message "+id+" read", func() gen.Message {
				var m gen.Message
				e.get("/api/v1/instances/"+a.Id+"/messages/"+id, &m)
				return m
			}, func(m gen.Message) bool { return m.Status == "read" })
			for i := 1; i < len(m.StatusHistory); i++ {
				if rank[m.StatusHistory[i].Status] <= rank[m.StatusHistory[i-1].Status] {
					t.Errorf("%s: history %+v goes backwards", id, m.StatusHistory)
				}
			}
		}
	})
}

// An upload whose file is not in the part named file is refused as validation_failed naming the parts: the part
// the operation does not take and the one it needs (the validator's own error said the body was not JSON).
func TestMediaUploadWithoutAFilePart(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("upload", "note.txt")
		_, _ = io.WriteString(fw, "hello media")
		_ = mw.WriteField("filename", "note.txt")
		_ = mw.Close()
		p := e.do(request{method: http.MethodPost, path: "/api/v1/media", key: e.apiKey, body: buf.String(),
			header: map[string]string{"Content-Type": mw.FormDataContentType()}}).problem(t, 400, "validation_failed")
		got := map[string]string{}
		for _, f := range p.Errors {
			got[f["pointer"]] = f["detail"]
		}
		if len(got) != 2 || !strings.Contains(got["/upload"], "not a part") || !strings.Contains(got["/file"], "required") {
			t.Errorf("errors = %v, want /upload (not a part) and /file (required)", p.Errors)
		}
	})
}

// Concurrent sends and the recipients' runs share transactions (their events numbered and written once per
// transaction): every instance's events still count one by one in the order of the log, and the chat.updated of a
// send or an inbound message shows the message as it was written — as the send answered, as message.received
// carries it.
func TestSharedTransactionsNumberEventsInOrder(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		a, b, c := e.connected("A"), e.connected("B"), e.connected("C")
		const n = 24
		sent := make([]gen.Message, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				to := b
				if i%2 == 1 {
					to = c
				}
				res := e.post("/api/v1/instances/"+a.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"m%d"}`, to.Account.Address, i))
				if res.StatusCode != 202 {
					t.Errorf("send: %d %s", res.StatusCode, res.body)
					return
				}
				res.json(t, &sent[i])
			})
		}
		wg.Wait()
		for _, m := range sent {
			await.Until(t, "message "+m.Id+" read", func() gen.Message {
				var got gen.Message
				e.get("/api/v1/instances/"+a.Id+"/messages/"+m.Id, &got)
				return got
			}, func(m gen.Message) bool { return m.Status == "read" })
		}
		evs, _, err := db.Events.List(context.Background(), e.ws.ID, store.EventFilter{}, store.Page{Limit: 100, After: "evt_"})
		if err != nil {
			t.Fatal(err)
		}
		for more := evs; len(more) == 100; {
			if more, _, err = db.Events.List(context.Background(), e.ws.ID, store.EventFilter{}, store.Page{Limit: 100, After: more[99].ID}); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, more...)
		}
		last := map[string]int64{}
		received := map[string]string{} // message ID → its message.received message
		lastMessages := map[string][]string{}
		newest := map[string]time.Time{}
		for _, ev := range evs {
			var data struct {
				InstanceID string          `json:"instance_id"`
				Sequence   int64           `json:"sequence"`
				Message    json.RawMessage `json:"message"`
				Chat       struct {
					ID          string          `json:"id"`
					LastMessage json.RawMessage `json:"last_message"`
				} `json:"chat"`
			}
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.Sequence != last[data.InstanceID]+1 {
				t.Errorf("%s of %s: sequence %d after %d", ev.Type, data.InstanceID, data.Sequence, last[data.InstanceID])
			}
			last[data.InstanceID] = data.Sequence
			var id struct {
				ID string `json:"id"`
			}
			switch ev.Type {
			case "message.received":
				_ = json.Unmarshal(data.Message, &id)
				received[id.ID] = string(data.Message)
			case "chat.updated":
				if len(data.Chat.LastMessage) > 0 {
					_ = json.Unmarshal(data.Chat.LastMessage, &id)
					lastMessages[id.ID] = append(lastMessages[id.ID], string(data.Chat.LastMessage))
					// In the order of the changes: a chat's newest message never goes back to an older one.
					var lm struct {
						CreatedAt time.Time `json:"created_at"`
					}
					_ = json.Unmarshal(data.Chat.LastMessage, &lm)
					if prev := newest[data.Chat.ID]; lm.CreatedAt.Before(prev) {
						t.Errorf("chat.updated %d of %s shows a message of %s after one of %s", data.Sequence, data.Chat.ID, lm.CreatedAt, prev)
					}
					newest[data.Chat.ID] = lm.CreatedAt
				}
			}
		}
		for _, m := range sent {
			want, _ := json.Marshal(m)
			if !slices.ContainsFunc(lastMessages[m.Id], func(got string) bool { return jsonEqual(got, string(want)) }) {
				t.Errorf("no chat.updated of %s shows it as the send answered: %s; shown as %v", m.Id, want, lastMessages[m.Id])
			}
		}
		if len(received) != n {
			t.Errorf("%d message.received, want %d", len(received), n)
		}
		// A run of several messages to a chat shows its newest only.
		shown := 0
		for id, want := range received {
			if len(lastMessages[id]) == 0 {
				continue
			}
			shown++
			if !slices.ContainsFunc(lastMessages[id], func(got string) bool { return jsonEqual(got, want) }) {
				t.Errorf("no chat.updated of %s shows it as message.received does: %s; shown as %v", id, want, lastMessages[id])
			}
		}
		if shown == 0 {
			t.Error("no chat.updated shows a received message")
		}
	})
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
