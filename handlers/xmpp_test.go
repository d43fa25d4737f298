package handlers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/xmpp"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// newXMPPEnv is a server with the XMPP provider, the real channel runtime and the webhook dispatcher, whose webhooks
// may reach receivers on loopback.
func newXMPPEnv(t *testing.T, db *store.DB) *msgEnv {
	t.Helper()
	return newProviderEnv(t, db, "XMPP", xmpp.New(xmpp.Options{PingInterval: time.Second, PingTimeout: time.Second}))
}

// newProviderEnv is a server with providers, the real channel runtime and the webhook dispatcher, whose webhooks
// may reach receivers on loopback, and a workspace (named name) with a key.
func newProviderEnv(t *testing.T, db *store.DB, name string, providers ...channels.Provider) *msgEnv {
	t.Helper()
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	box, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	outbox := events.NewOutbox(db, events.Builtin())
	// Loopback is allowed: the fakes, Prosody and the tests' proxies listen there.
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	rec, err := channels.NewRecorder(db, outbox, channels.Config{Sealer: box, Logger: log, Providers: providers,
		BaseURL: publicURL, Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	rt := hub.New(db, rec, hub.Options{Rate: -1, Lease: 3 * time.Second, BackoffBase: 100 * time.Millisecond,
		BackoffMax: 500 * time.Millisecond, Logger: log})
	svc, err := channels.New(rec, rt)
	if err != nil {
		t.Fatal(err)
	}
	dispatcher := webhook.NewDispatcher(db, box, guard, webhook.Config{Events: outbox, Logger: log})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 3)
	go func() { _ = rt.Run(ctx); stopped <- struct{}{} }()
	go func() { _ = dispatcher.Run(ctx); stopped <- struct{}{} }()
	go func() { _ = svc.RunRoutes(ctx); stopped <- struct{}{} }()
	t.Cleanup(func() { stop(); <-stopped; <-stopped; <-stopped })
	e := &msgEnv{env: newEnv(t, db, handlers.Config{Events: outbox, Channels: svc, Logger: log,
		Box: box, Webhooks: webhookService(t, db, outbox, webhook.ServiceConfig{Box: box, Guard: guard, Sender: dispatcher.Sender(), Wake: dispatcher.Wake}),
		KeyRateLimit: 1 << 20, WorkspaceRateLimit: 1 << 20}), channels: svc}
	e.ws = e.workspace(name)
	e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:write")
	return e
}

// The whole path on a real server: our API → the XMPP provider → Prosody → a plain client, and back into signed
// webhooks; a failed login; the server going away and coming back with messages queued meanwhile.
func TestXMPPEndToEnd(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		srv := prosodytest.Start(t)
		alice, bob := srv.Register("alice", "secret-a"), srv.Register("bob", "secret-b")
		e := newXMPPEnv(t, db)

		rc := receivertest.New(t, nil)
		var hook struct {
			Secret string `json:"secret"`
		}
		res := e.post("/api/v1/webhooks", `{"url":"`+rc.URL+`/hook","events":["message.received","message.failed"]}`)
		if res.StatusCode != 201 {
			t.Fatalf("webhook: %d %s", res.StatusCode, res.body)
		}
		res.json(t, &hook)

		// A wrong password fails for good, with the reason.
		cfg, _ := json.Marshal(srv.Config(alice, "wrong"))
		wrong := e.instance("xmpp", string(cfg))
		e.post("/api/v1/instances/"+wrong.Id+"/connect", "")
		if got := e.status(wrong.Id, "failed"); !strings.Contains(got.StatusReason, "auth_failed") {
			t.Errorf("wrong password: reason %q", got.StatusReason)
		}

		cfg, _ = json.Marshal(srv.Config(alice, "secret-a"))
		inst := e.instance("xmpp", string(cfg))
		e.post("/api/v1/instances/"+inst.Id+"/connect", "")
		connected := e.status(inst.Id, "connected")
		if connected.Account == nil || connected.Account.Address != alice {
			t.Fatalf("account = %+v", connected.Account)
		}
		peer := srv.Dial(bob, "secret-b")
		peer.AnswerReceipts()

		// Out: text reaches bob; his receipt and displayed marker move it to delivered, then read.
		var m gen.Message
		if res := e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"`+bob+`","type":"text","text":"hello bob"}`); res.StatusCode != 202 {
			t.Fatalf("send: %d %s", res.StatusCode, res.body)
		} else {
			res.json(t, &m)
		}
		got := peer.Wait("the text at bob", func(s prosodytest.Stanza) bool { return s.Name == "message" && s.Body == "hello bob" })
		awaitMessage(e, inst.Id, m.Id, "delivered")
		peer.Send(fmt.Sprintf(`<message to=%q id="d1" type="chat"><displayed xmlns="urn:xmpp:chat-markers:0" id=%q/></message>`, got.From, got.ID))
		read := awaitMessage(e, inst.Id, m.Id, "read")
		var history []string
		for _, h := range read.StatusHistory {
			history = append(history, string(h.Status))
		}
		if !slices.Equal(history, []string{"queued", "sending", "sent", "delivered", "read"}) {
			t.Errorf("history = %v", history)
		}

		// In: bob's reply is a signed message.received webhook, from a contact with his address.
		peer.Send(`<message to="` + alice + `" id="b1" type="chat"><body>hi alice</body></message>`)
		body := await.Until(t, "the message.received webhook", func() []byte {
			for _, r := range rc.Requests() {
				if strings.Contains(string(r.Body), `"hi alice"`) {
					wh, err := standardwebhooks.NewWebhook(hook.Secret)
					if err != nil {
						t.Fatal(err)
					}
					if err := wh.Verify(r.Body, r.Header); err != nil {
						t.Fatalf("the official library rejects the webhook: %v", err)
					}
					return r.Body
				}
			}
			return nil
		}, func(b []byte) bool { return b != nil })
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Message gen.Message `json:"message"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "message.received" || ev.Data.Message.From.Address != bob || ev.Data.Message.From.ContactId == nil {
			t.Errorf("webhook %s", body)
		}

		// The server goes away: reconnecting; messages sent meanwhile wait, and go out in order once it is back.
		srv.Stop()
		e.status(inst.Id, "reconnecting")
		var queued []string
		for i := range 3 {
			var q gen.Message
			res := e.post("/api/v1/instances/"+inst.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"while down %d"}`, bob, i))
			if res.StatusCode != 202 {
				t.Fatalf("send while down: %d %s", res.StatusCode, res.body)
			}
			res.json(t, &q)
			queued = append(queued, q.Id)
		}
		srv.Start()
		e.status(inst.Id, "connected")
		peer = srv.Dial(bob, "secret-b")
		for _, id := range queued {
			awaitMessage(e, inst.Id, id, "sent")
		}
		var order []string
		await.Until(t, "the three messages at bob", func() []string {
			order = order[:0]
			for _, s := range peer.Received() {
				if strings.HasPrefix(s.Body, "while down") {
					order = append(order, s.Body)
				}
			}
			return order
		}, func(o []string) bool { return len(o) == 3 })
		if !slices.Equal(order, []string{"while down 0", "while down 1", "while down 2"}) {
			t.Errorf("bob got %v", order)
		}
	})
}

// awaitMessage polls a message until it reaches a status.
func awaitMessage(e *msgEnv, instanceID, id, status string) gen.Message {
	e.t.Helper()
	return await.Until(e.t, "message "+id+" "+status, func() gen.Message {
		var m gen.Message
		e.get("/api/v1/instances/"+instanceID+"/messages/"+id, &m)
		return m
	}, func(m gen.Message) bool { return string(m.Status) == status })
}
