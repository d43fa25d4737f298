package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// newChannels is the messaging service with the sandbox network (receipts at once) over the real runtime, unpaced.
func newChannels(t *testing.T, db *store.DB) *channels.Service {
	t.Helper()
	return newChannelsOf(t, db, sandbox.New(db.Sandbox, sandbox.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
}

// newChannelsOf is the messaging service over providers, its runtime running until the test ends.
func newChannelsOf(t *testing.T, db *store.DB, providers ...channels.Provider) *channels.Service {
	t.Helper()
	box, err := sealbox.New(make([]byte, sealbox.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := channels.NewRecorder(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box, Logger: discard,
		Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	rt := hub.New(db, rec, hub.Options{Rate: -1, Lease: 3 * time.Second, Logger: discard})
	svc, err := channels.New(rec, rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return svc
}

// The Channels pages: create a sandbox instance from the provider's config form, connect it, see its QR code,
// simulate the scan, send a message to a second instance and see its status history reach read; disconnect; delete
// after confirming; another workspace gets 404; a form without the CSRF token is refused.
func TestChannelsPages(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc := newChannels(t, db)
		e := newEnv(t, db, console.Config{Channels: svc})
		b := e.browser()
		b.newUser(t, "channels")
		ws := b.newWorkspace(t, "Channels")

		page := b.get(t, "/user/channels")
		page.wantStatus(t, http.StatusOK)
		page.wantText(t, "No instances yet")
		page.wantText(t, "Sandbox settings")
		if !strings.Contains(page.body, `name="config.sandbox.display_name"`) {
			t.Fatal("the sandbox's config form has no display_name input")
		}

		// Refused: no name.
		r := b.postCSRF(t, "/user/channels", url.Values{"provider": {"sandbox"}})
		r.wantStatus(t, http.StatusUnprocessableEntity)

		create := func(name string, config url.Values) string {
			form := url.Values{"name": {name}, "provider": {"sandbox"}}
			for k, v := range config {
				form[k] = v
			}
			r := b.postCSRF(t, "/user/channels", form)
			if r.StatusCode != http.StatusSeeOther {
				t.Fatalf("create: %d %s", r.StatusCode, r.text())
			}
			return strings.TrimPrefix(r.location(t).Path, "/user/channels/")
		}
		alice := create("Alice", url.Values{"config.sandbox.display_name": {"Alice <Support>"}})
		bob := create("Bob", url.Values{"config.sandbox.auto_pair": {"true"}})
		inst, err := svc.Get(ctx, ws.ID, alice)
		if err != nil || inst.Config["display_name"] != "Alice <Support>" {
			t.Fatalf("instance %+v, %v", inst, err)
		}

		// Connect: the page shows the QR code and follows the instance until it is paired.
		b.postCSRF(t, "/user/channels/"+alice+"/connect", url.Values{}).wantRedirect(t, "/user/channels/"+alice+"?done=connect")
		waiting := await.Until(t, "the QR code on the page", func() *resp { return b.get(t, "/user/channels/"+alice) },
			func(r *resp) bool { return strings.Contains(r.body, `id="qr-image"`) })
		// Without script the page reloads itself (with script its sections follow the event stream instead).
		if !strings.Contains(waiting.body, `src="data:image/png;base64,`) ||
			!strings.Contains(waiting.body, `<noscript><meta http-equiv="refresh" content="2"></noscript>`) {
			t.Fatalf("waiting page: no QR code or no refresh without script:\n%s", waiting.body)
		}
		b.postCSRF(t, "/user/channels/"+alice+"/scan", url.Values{}).wantRedirect(t, "/user/channels/"+alice+"?done=scan")
		paired := await.Until(t, "alice connected", func() *resp { return b.get(t, "/user/channels/"+alice) },
			func(r *resp) bool { return strings.Contains(r.body, `data-status="connected"`) })
		paired.wantText(t, "Send a test message")
		if strings.Contains(paired.body, "Alice <Support>") {
			t.Fatal("the display name is not escaped")
		}

		b.postCSRF(t, "/user/channels/"+bob+"/connect", url.Values{})
		bobInst := await.Until(t, "bob connected", func() store.Instance {
			i, _ := svc.Get(ctx, ws.ID, bob)
			return i
		}, func(i store.Instance) bool { return i.Status == "connected" })

		// A message to bob: its history reaches read on the page.
		r = b.postCSRF(t, "/user/channels/"+alice+"/send", url.Values{"to": {bobInst.Account.Address}, "text": {"hello bob"}})
		r.wantRedirect(t, "/user/channels/"+alice+"?done=sent")
		read := await.Until(t, "the message read", func() *resp { return b.get(t, "/user/channels/"+alice) },
			func(r *resp) bool { return strings.Contains(r.body, `class="message-read"`) })
		for _, s := range []string{"hello bob", "queued", "sending", "sent", "delivered", "read"} {
			read.wantText(t, s)
		}
		// The chat with bob is listed with how the account keeps it: pinned and muted until a time, then archived.
		cs, _, err := svc.ListChats(ctx, ws.ID, alice, store.ChatFilter{}, store.Page{Limit: 5})
		if err != nil || len(cs) != 1 {
			t.Fatalf("alice's chats: %v %v", cs, err)
		}
		until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		yes := true
		if _, err := svc.OrganizeChat(ctx, ws.ID, alice, cs[0].ID, channels.ChatOrganization{Pinned: &yes, Muted: &yes, MutedUntil: until}); err != nil {
			t.Fatal(err)
		}
		page = b.get(t, "/user/channels/"+alice)
		for _, s := range []string{`id="` + cs[0].ID + `"`, `data-chat-state="pinned"`, `data-chat-state="muted"`, `muted until <time datetime="` + until.Format(time.RFC3339)} {
			if !strings.Contains(page.body, s) {
				t.Fatalf("the chats section has no %s:\n%s", s, page.body)
			}
		}
		if strings.Contains(page.body, `data-chat-state="archived"`) {
			t.Fatal("a chat never archived shows as archived")
		}
		if _, err := svc.OrganizeChat(ctx, ws.ID, alice, cs[0].ID, channels.ChatOrganization{Archived: &yes}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.get(t, "/user/channels/"+alice).body, `data-chat-state="archived"`) {
			t.Fatal("the archived chat does not show as archived")
		}
		// A refused send says why.
		bad := b.postCSRF(t, "/user/channels/"+alice+"/send", url.Values{"to": {"not a number"}, "text": {"x"}})
		bad.wantStatus(t, http.StatusUnprocessableEntity)
		if bad.alert() == "" {
			t.Fatal("a refused send shows no reason")
		}

		// Calls: declined with a message from the page's form; a message too long is refused with a reason.
		page = b.get(t, "/user/channels/"+alice)
		page.wantText(t, "they ring on the account's other devices")
		b.postCSRF(t, "/user/channels/"+alice+"/calls", url.Values{"reject": {"on"}, "message": {"  Please write instead.  "}}).
			wantRedirect(t, "/user/channels/"+alice+"?done=calls")
		if i, _ := svc.Get(ctx, ws.ID, alice); i.CallsReject == nil || !*i.CallsReject || i.CallsMessage == nil ||
			*i.CallsMessage != "Please write instead." {
			t.Fatalf("calls after the form: reject %v message %v", i.CallsReject, i.CallsMessage)
		}
		page = b.get(t, "/user/channels/"+alice)
		page.wantText(t, "declines each at once")
		page.wantText(t, "Please write instead.")
		b.postCSRF(t, "/user/channels/"+alice+"/calls", url.Values{"reject": {"on"}, "message": {strings.Repeat("x", 1001)}}).
			wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, "/user/channels/"+alice+"/calls", url.Values{}).wantRedirect(t, "/user/channels/"+alice+"?done=calls")
		if i, _ := svc.Get(ctx, ws.ID, alice); i.CallsReject == nil || *i.CallsReject || i.CallsMessage != nil {
			t.Fatalf("calls after unchecking: reject %v message %v", i.CallsReject, i.CallsMessage)
		}

		// The list shows both, with their status.
		list := b.get(t, "/user/channels")
		list.wantText(t, "Alice")
		list.wantText(t, "Bob")
		list.wantText(t, "connected")

		// Another workspace's member gets 404; a form without the token is refused.
		other := e.browser()
		other.newUser(t, "intruder")
		other.newWorkspace(t, "Elsewhere")
		other.get(t, "/user/channels/"+alice).wantStatus(t, http.StatusNotFound)
		other.postCSRF(t, "/user/channels/"+alice+"/disconnect", url.Values{}).wantStatus(t, http.StatusNotFound)
		b.post(t, "/user/channels/"+alice+"/disconnect", url.Values{}).wantStatus(t, http.StatusForbidden)

		// Disconnect keeps the credentials; delete asks for the name first.
		b.postCSRF(t, "/user/channels/"+alice+"/disconnect", url.Values{}).wantRedirect(t, "/user/channels/"+alice+"?done=disconnect")
		if i, _ := svc.Get(ctx, ws.ID, alice); i.Status != "disconnected" || i.Credentials == nil {
			t.Fatalf("after disconnect: %s, credentials kept %v", i.Status, i.Credentials != nil)
		}
		b.get(t, "/user/channels/"+alice+"/delete").wantText(t, "This cannot be undone")
		b.postCSRF(t, "/user/channels/"+alice+"/delete", url.Values{"confirm": {"wrong"}}).wantStatus(t, http.StatusUnprocessableEntity)
		b.postCSRF(t, "/user/channels/"+alice+"/delete", url.Values{"confirm": {"Alice"}}).wantRedirect(t, "/user/channels?done=deleted")
		if _, err := svc.Get(ctx, ws.ID, alice); err == nil {
			t.Fatal("the instance was not deleted")
		}
	})
}
