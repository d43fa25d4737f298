package xmpp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"mellium.im/xmpp"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
)

// The seams a session implements.
var (
	_ channels.Sender           = (*session)(nil)
	_ channels.ReadMarker       = (*session)(nil)
	_ channels.GroupManager     = (*session)(nil)
	_ channels.ContactDirectory = (*session)(nil)
	_ channels.Discoverer       = (*session)(nil)
)

func testProvider() *Provider {
	return New(Options{PingInterval: time.Hour})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnect(t *testing.T) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	p := testProvider()

	t.Run("starttls with the server's CA", func(t *testing.T) {
		r := connect(t, p, "ins_starttls", srv.Config(account, "secret-a"))
		if got := r.sink.connected[0].Address; got != account {
			t.Errorf("account = %q, want %q", got, account)
		}
		caps := r.Capabilities()
		for _, c := range []channels.Capability{channels.CapMedia, channels.CapGroupsCreate, channels.CapContactsBlock, channels.CapText} {
			if !contains(caps, c) {
				t.Errorf("capabilities %v lack %s", caps, c)
			}
		}
	})
	t.Run("direct TLS", func(t *testing.T) {
		cfg := srv.Config(account, "secret-a")
		cfg["server"], cfg["tls"] = srv.DirectAddr(), TLSDirect
		connect(t, p, "ins_direct", cfg)
	})
	t.Run("insecure setting accepts the unknown certificate", func(t *testing.T) {
		cfg := srv.Config(account, "secret-a")
		delete(cfg, "ca_certificate")
		cfg["insecure_skip_verify"] = true
		connect(t, p, "ins_insecure", cfg)
	})
	t.Run("wrong password fails for good with auth_failed", func(t *testing.T) {
		r := openSession(t, p, "ins_badpw", srv.Config(account, "wrong"))
		err := r.ended(t)
		if err != nil {
			t.Fatalf("Run = %v, want nil after reporting the failure", err)
		}
		if got := r.sink.lastState(); got != "failed auth_failed" {
			t.Errorf("state = %q, want failed auth_failed", got)
		}
	})
	t.Run("unknown certificate is a tls_error", func(t *testing.T) {
		cfg := srv.Config(account, "secret-a")
		delete(cfg, "ca_certificate")
		r := openSession(t, p, "ins_tls", cfg)
		assertFailure(t, r.ended(t), ReasonTLSError)
	})
	t.Run("nothing listening is server_unreachable", func(t *testing.T) {
		cfg := srv.Config(account, "secret-a")
		cfg["server"] = "127.0.0.1:1"
		r := openSession(t, p, "ins_unreachable", cfg)
		assertFailure(t, r.ended(t), ReasonServerUnreachable)
	})
	t.Run("another client taking the resource is stream_error: conflict", func(t *testing.T) {
		first := connect(t, p, "ins_conflict", srv.Config(account, "secret-a"))
		connect(t, p, "ins_conflict", srv.Config(account, "secret-a"))
		if err := first.ended(t); err != nil {
			t.Fatalf("Run = %v, want nil after reporting the failure", err)
		}
		if got := first.sink.lastState(); got != "failed stream_error: conflict" {
			t.Errorf("state = %q, want failed stream_error: conflict", got)
		}
	})
}

func assertFailure(t *testing.T, err error, code string) {
	t.Helper()
	var f *channels.Failure
	if !errors.As(err, &f) || f.Code != code || !f.Retryable {
		t.Fatalf("Run = %#v, want a retryable failure %s", err, code)
	}
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestConfig(t *testing.T) {
	p := testProvider()
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"password": "x"}, "jid must be an account address"},
		{map[string]any{"jid": "example.org", "password": "x"}, "jid must be an account address"},
		{map[string]any{"jid": "a@example.org"}, "password is required"},
		{map[string]any{"jid": "a@example.org", "password": "x", "server": "nohost"}, "server must be host:port"},
		{map[string]any{"jid": "a@example.org", "password": "x", "tls": "none"}, "tls must be starttls or direct"},
		{map[string]any{"jid": "a@example.org", "password": "x", "ca_certificate": "junk"}, "ca_certificate holds no PEM"},
		{map[string]any{"jid": "a@example.org", "password": "x", "insecure_skip_verify": "yes"}, "insecure_skip_verify must be true or false"},
		{map[string]any{"jid": "a@example.org", "password": "x", "muc_service": "room@conference.example.org"}, "muc_service must be a service address"},
	} {
		err := p.ValidateConfig(tc.cfg)
		if err == nil || !startsWith(err.Error(), tc.want) {
			t.Errorf("ValidateConfig(%v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := p.ValidateConfig(map[string]any{"jid": "a@example.org", "password": "x", "server": "xmpp.example.org:5222", "tls": "direct"}); err != nil {
		t.Errorf("a valid config: %v", err)
	}
	schema := p.Info().ConfigSchema["properties"].(map[string]any)
	if schema["password"].(map[string]any)["writeOnly"] != true {
		t.Error("the password is not writeOnly in the config schema")
	}
	for raw, want := range map[string]string{"Alice@Example.ORG": "alice@example.org", "xmpp:bob@example.org?message": "bob@example.org", "carol@example.org/phone": "carol@example.org"} {
		if got, err := p.NormalizeAddress(raw); err != nil || got != want {
			t.Errorf("NormalizeAddress(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"example.org", "", "@example.org", "a@b@c"} {
		if _, err := p.NormalizeAddress(raw); err == nil {
			t.Errorf("NormalizeAddress(%q) accepted", raw)
		}
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

func TestMessages(t *testing.T) {
	srv, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	ctx := ctxT(t)

	t.Run("text with receipts and markers", func(t *testing.T) {
		sent, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_1", Chat: bobAccount, Type: channels.TypeText, Text: "hello bob"})
		if err != nil || sent.ProviderID != "msg_1" {
			t.Fatalf("Send = %+v, %v", sent, err)
		}
		got := bob.message("the text at bob", func(m inMessage) bool { return m.ID == "msg_1" })
		if body(got) != "hello bob" || got.Request == nil || got.Markable == nil || got.Type != "chat" {
			t.Fatalf("bob received %+v", got)
		}
		bob.send(`<message to="` + got.From + `" id="r1"><received xmlns="urn:xmpp:receipts" id="msg_1"/></message>`)
		await.Until(t, "the delivered receipt", func() bool { return alice.sink.hasReceipt("msg_1", "delivered") }, func(b bool) bool { return b })
		bob.send(`<message to="` + got.From + `" id="d1" type="chat"><displayed xmlns="urn:xmpp:chat-markers:0" id="msg_1"/></message>`)
		await.Until(t, "the read marker", func() bool { return alice.sink.hasReceipt("msg_1", "read") }, func(b bool) bool { return b })
	})

	t.Run("inbound with a receipt back", func(t *testing.T) {
		bob.send(`<message to="` + account + `" id="b1" type="chat"><body>hi alice</body><request xmlns="urn:xmpp:receipts"/><markable xmlns="urn:xmpp:chat-markers:0"/></message>`)
		in := alice.sink.inboundWhere(t, "bob's message", func(m channels.Inbound) bool { return m.ProviderID == "b1" })
		if in.Type != channels.TypeText || in.Text != "hi alice" || in.Chat != bobAccount || in.From.Address != bobAccount {
			t.Fatalf("inbound %+v", in)
		}
		bob.message("alice's receipt", func(m inMessage) bool { return m.Received != nil && m.Received.ID == "b1" })
		if err := alice.MarkRead(ctx, bobAccount, "b1"); err != nil {
			t.Fatal(err)
		}
		bob.message("alice's displayed marker", func(m inMessage) bool { return m.Displayed != nil && m.Displayed.ID == "b1" })
	})

	t.Run("reply, edit, reaction, delete, location out", func(t *testing.T) {
		for _, m := range []channels.Outbound{
			{MessageID: "msg_reply", Chat: bobAccount, Type: channels.TypeText, Text: "replying", ReplyTo: "b1"},
			{MessageID: "msg_edit", Chat: bobAccount, Type: channels.TypeEdit, Text: "hello bob!", Target: "msg_1"},
			{MessageID: "msg_react", Chat: bobAccount, Type: channels.TypeReaction, Emoji: "👍", Target: "b1"},
			{MessageID: "msg_del", Chat: bobAccount, Type: channels.TypeDelete, Target: "msg_1"},
			{MessageID: "msg_geo", Chat: bobAccount, Type: channels.TypeLocation, Location: &channels.Location{Latitude: 52.52, Longitude: 13.405}},
		} {
			if _, err := alice.Send(ctx, m); err != nil {
				t.Fatalf("Send %s: %v", m.MessageID, err)
			}
		}
		if m := bob.message("the reply", func(m inMessage) bool { return m.ID == "msg_reply" }); m.Reply == nil || m.Reply.ID != "b1" {
			t.Errorf("reply %+v", m)
		}
		if m := bob.message("the correction", func(m inMessage) bool { return m.ID == "msg_edit" }); m.Replace == nil || m.Replace.ID != "msg_1" || body(m) != "hello bob!" {
			t.Errorf("correction %+v", m)
		}
		if m := bob.message("the reaction", func(m inMessage) bool { return m.ID == "msg_react" }); m.Reactions == nil || m.Reactions.ID != "b1" || len(m.Reactions.Reaction) != 1 || m.Reactions.Reaction[0] != "👍" {
			t.Errorf("reaction %+v", m)
		}
		if m := bob.message("the retraction", func(m inMessage) bool { return m.ID == "msg_del" }); m.Retract == nil || m.Retract.ID != "msg_1" {
			t.Errorf("retraction %+v", m)
		}
		if m := bob.message("the location", func(m inMessage) bool { return m.ID == "msg_geo" }); body(m) != "geo:52.52,13.405" {
			t.Errorf("location %+v", m)
		}
	})

	t.Run("reply, edit, reaction, delete, location in", func(t *testing.T) {
		bob.send(`<message to="` + account + `" id="b2" type="chat"><body>sure</body><reply xmlns="urn:xmpp:reply:0" id="msg_1"/></message>`)
		bob.send(`<message to="` + account + `" id="b3" type="chat"><body>sure!</body><replace xmlns="urn:xmpp:message-correct:0" id="b2"/></message>`)
		bob.send(`<message to="` + account + `" id="b4" type="chat"><reactions xmlns="urn:xmpp:reactions:0" id="msg_1"><reaction>🎉</reaction></reactions></message>`)
		bob.send(`<message to="` + account + `" id="b5" type="chat"><retract xmlns="urn:xmpp:message-retract:1" id="b2"/><body>retracted</body></message>`)
		bob.send(`<message to="` + account + `" id="b6" type="chat"><body>geo:48.1,11.6</body></message>`)
		if in := alice.sink.inboundWhere(t, "the reply", func(m channels.Inbound) bool { return m.ProviderID == "b2" }); in.ReplyTo != "msg_1" || in.Text != "sure" {
			t.Errorf("reply %+v", in)
		}
		if in := alice.sink.inboundWhere(t, "the edit", func(m channels.Inbound) bool { return m.ProviderID == "b3" }); in.Type != channels.TypeEdit || in.Target != "b2" || in.Text != "sure!" {
			t.Errorf("edit %+v", in)
		}
		if in := alice.sink.inboundWhere(t, "the reaction", func(m channels.Inbound) bool { return m.ProviderID == "b4" }); in.Type != channels.TypeReaction || in.Target != "msg_1" || in.Emoji != "🎉" {
			t.Errorf("reaction %+v", in)
		}
		if in := alice.sink.inboundWhere(t, "the delete", func(m channels.Inbound) bool { return m.ProviderID == "b5" }); in.Type != channels.TypeDelete || in.Target != "b2" {
			t.Errorf("delete %+v", in)
		}
		if in := alice.sink.inboundWhere(t, "the location", func(m channels.Inbound) bool { return m.ProviderID == "b6" }); in.Type != channels.TypeLocation || in.Location == nil || in.Location.Latitude != 48.1 {
			t.Errorf("location %+v", in)
		}
	})

	t.Run("not connected", func(t *testing.T) {
		s, err := testProvider().Open(channels.Instance{ID: "ins_idle", Config: srv.Config(account, "secret-a")}, newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.(channels.Sender).Send(ctx, channels.Outbound{MessageID: "msg_x", Chat: bobAccount, Type: channels.TypeText, Text: "x"})
		var f *channels.Failure
		if !errors.As(err, &f) || f.Code != "not_connected" || !f.Retryable {
			t.Fatalf("Send without a connection = %v", err)
		}
	})
}

func TestGroups(t *testing.T) {
	srv, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	ctx := ctxT(t)

	g, err := alice.CreateGroup(ctx, "Launch", []string{bobAccount, "xmpp:"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Subject != "Launch" || !hasParticipant(g, account, "owner") || !hasParticipant(g, bobAccount, "member") ||
		len(g.Rejected) != 1 || g.Rejected[0].Failure.Code != "invalid_address" {
		t.Fatalf("created %+v", g)
	}
	invite := bob.message("the invitation", func(m inMessage) bool { return m.MUCUser != nil && m.MUCUser.Invite != nil })
	if invite.From != g.Address {
		t.Fatalf("invitation from %s, want %s", invite.From, g.Address)
	}
	bob.send(`<presence to="` + g.Address + `/bob"><x xmlns="http://jabber.org/protocol/muc"/></presence>`)
	bob.presence("bob's own presence in the room", func(p inPresence) bool { return p.From == g.Address+"/bob" && p.MUCUser.has(110) })
	await.Until(t, "bob to show in the group", func() bool { return alice.sink.groupChange(g.Address, channels.GroupParticipantsChanged) }, func(b bool) bool { return b })

	// A message in the room reaches bob, and his reaches alice's sink as the group's, from his account.
	if _, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_g1", Chat: g.Address, Type: channels.TypeText, Text: "hello room"}); err != nil {
		t.Fatal(err)
	}
	if m := bob.message("the room message", func(m inMessage) bool { return m.ID == "msg_g1" }); m.Type != "groupchat" || body(m) != "hello room" {
		t.Fatalf("room message %+v", m)
	}
	bob.send(`<message to="` + g.Address + `" id="bg1" type="groupchat"><body>hi all</body></message>`)
	in := alice.sink.inboundWhere(t, "bob's room message", func(m channels.Inbound) bool { return m.ProviderID == "bg1" })
	if in.Chat != g.Address || in.From.Address != bobAccount || in.From.DisplayName != "bob" || in.Text != "hi all" {
		t.Fatalf("room inbound %+v", in)
	}

	// A private message from an occupant is a direct message from the person.
	bob.send(`<message to="` + g.Address + `/alice" id="pm1" type="chat"><body>just you</body><x xmlns="http://jabber.org/protocol/muc#user"/></message>`)
	if in := alice.sink.inboundWhere(t, "bob's private message", func(m channels.Inbound) bool { return m.ProviderID == "pm1" }); in.Chat != bobAccount || in.From.Address != bobAccount || in.From.DisplayName != "bob" {
		t.Fatalf("private message %+v", in)
	}

	subject, desc := "Launch day", "Where we launch"
	g, err = alice.UpdateGroup(ctx, g.Address, &subject, &desc)
	if err != nil || g.Subject != subject || g.Description != desc {
		t.Fatalf("UpdateGroup = %+v, %v", g, err)
	}
	bob.message("the new subject", func(m inMessage) bool { return m.Subject != nil && *m.Subject == subject })

	res, err := alice.ChangeParticipants(ctx, g.Address, "promote", []string{bobAccount, "not an address"})
	if err != nil || len(res) != 2 || !res[0].OK || res[1].OK || res[1].Failure == nil || res[1].Failure.Code != "invalid_address" {
		t.Fatalf("promote = %+v, %v", res, err)
	}
	if g, _ = alice.GetGroup(ctx, g.Address); !hasParticipant(g, bobAccount, "admin") {
		t.Fatalf("after promote %+v", g)
	}
	if res, err = alice.ChangeParticipants(ctx, g.Address, "demote", []string{bobAccount}); err != nil || !res[0].OK {
		t.Fatalf("demote = %+v, %v", res, err)
	}
	if res, err = alice.ChangeParticipants(ctx, g.Address, "remove", []string{bobAccount}); err != nil || !res[0].OK {
		t.Fatalf("remove = %+v, %v", res, err)
	}
	bob.presence("bob kicked", func(p inPresence) bool {
		return p.From == g.Address+"/bob" && p.Type == "unavailable" && p.MUCUser.has(307)
	})
	await.Until(t, "bob gone from the group", func() bool {
		g, _ := alice.GetGroup(ctx, g.Address)
		return hasParticipant(g, bobAccount, "")
	}, func(b bool) bool { return !b })

	link, err := alice.InviteLink(ctx, g.Address, false)
	if err != nil || link != "xmpp:"+g.Address+"?join" {
		t.Fatalf("InviteLink = %q, %v", link, err)
	}
	if err := alice.LeaveGroup(ctx, g.Address); err != nil {
		t.Fatal(err)
	}
	// Joining by the link enters the room again; it persisted without occupants.
	joined, err := alice.JoinGroup(ctx, link)
	if err != nil || joined.Address != g.Address || joined.Subject != subject {
		t.Fatalf("JoinGroup = %+v, %v", joined, err)
	}
	var f *channels.Failure
	if _, err := alice.JoinGroup(ctx, "nobody-here@conference."+srv.Domain); !errors.As(err, &f) || f.Code != "not_found" {
		t.Fatalf("JoinGroup of an unknown room = %v, want not_found", err)
	}
}

// twoAccounts starts a server with two accounts: alice, connected through the provider, and bob, a plain client.
func twoAccounts(t *testing.T) (*prosodytest.Server, *running, *peer) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	bobAccount := srv.Register("bob", "secret-b")
	alice := connect(t, testProvider(), "ins_alice", srv.Config(account, "secret-a"))
	return srv, alice, dialPeer(t, srv, bobAccount, "secret-b")
}

func hasParticipant(g channels.Group, addr, role string) bool {
	for _, p := range g.Participants {
		if p.Address == addr && (role == "" || p.Role == role) {
			return true
		}
	}
	return false
}

func TestContacts(t *testing.T) {
	srv, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	ctx := ctxT(t)

	// Bob adds alice (with a name for her in his roster); alice approves, subscribes back, and bob approves.
	bob.send(`<presence to="` + account + `" type="subscribe"/>`)
	bob.presence("alice's subscription request", func(p inPresence) bool { return p.From == account && p.Type == "subscribe" })
	bob.send(`<presence to="` + account + `" type="subscribed"/>`)
	got := await.Until(t, "bob as a contact with presence", func() channels.Party { return alice.sink.contact(bobAccount) },
		func(p channels.Party) bool { return p.Presence == "available" })
	if got.Address != bobAccount {
		t.Fatalf("contact %+v", got)
	}
	bob.send(`<presence><show>away</show></presence>`)
	await.Until(t, "bob away", func() channels.Party { return alice.sink.contact(bobAccount) },
		func(p channels.Party) bool { return p.Presence == "away" })

	res, err := alice.Lookup(ctx, []string{bobAccount, "nobody@" + srv.Domain, "not an address"})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OnNetwork || res[0].Normalized != bobAccount || res[1].OnNetwork || res[1].Normalized != "nobody@"+srv.Domain || res[2].OnNetwork || res[2].Normalized != "" {
		t.Fatalf("Lookup = %+v", res)
	}

	if err := alice.Block(ctx, bobAccount, true); err != nil {
		t.Fatal(err)
	}
	bob.send(`<message to="` + account + `" id="blocked1" type="chat"><body>let me in</body></message>`)
	// The server refuses it to bob (so it handled it before the unblocking below).
	bob.message("the refusal of the blocked message", func(m inMessage) bool { return m.ID == "blocked1" && m.Type == "error" })
	if err := alice.Block(ctx, bobAccount, false); err != nil {
		t.Fatal(err)
	}
	bob.send(`<message to="` + account + `" id="unblocked1" type="chat"><body>thanks</body></message>`)
	alice.sink.inboundWhere(t, "the message after unblocking", func(m channels.Inbound) bool { return m.ProviderID == "unblocked1" })
	alice.sink.mu.Lock()
	for _, m := range alice.sink.inbound {
		if m.ProviderID == "blocked1" {
			t.Error("a message sent while blocked arrived")
		}
	}
	alice.sink.mu.Unlock()
}

func TestMedia(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	ctx := ctxT(t)

	content := bytes.Repeat([]byte("switchboard "), 1000)
	media := &channels.Media{Kind: "document", MIMEType: "text/plain", Filename: "notes.txt", Size: int64(len(content)), Caption: "the notes",
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(content)), nil }}
	if _, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_media", Chat: bobAccount, Type: channels.TypeMedia, Media: media}); err != nil {
		t.Fatal(err)
	}
	m := bob.message("the file", func(m inMessage) bool { return m.ID == "msg_media" })
	if m.OOB == nil || m.OOB.URL != body(m) || m.OOB.Desc != "the notes" {
		t.Fatalf("media message %+v", m)
	}
	resp, err := http.Get(m.OOB.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, content) {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(got))
	}

	// Too large for the server: refused before anything is uploaded.
	big := *media
	big.Size = 2 << 20
	var f *channels.Failure
	if _, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_big", Chat: bobAccount, Type: channels.TypeMedia, Media: &big}); !errors.As(err, &f) || f.Code != "media_rejected" || f.Retryable {
		t.Fatalf("Send of a too large file = %v", err)
	}

	// Inbound media: a URL with out-of-band data.
	bob.send(`<message to="` + account + `" id="bm1" type="chat"><body>` + m.OOB.URL + `</body><x xmlns="jabber:x:oob"><url>` + m.OOB.URL + `</url></x></message>`)
	in := alice.sink.inboundWhere(t, "bob's file", func(m channels.Inbound) bool { return m.ProviderID == "bm1" })
	if in.Type != channels.TypeMedia || in.Media == nil || in.Media.URL != m.OOB.URL || in.Media.Filename != "notes.txt" || in.Media.MIMEType != "text/plain" {
		t.Fatalf("inbound media %+v", in)
	}
}

// A server without HTTP File Upload and blocking: the instance's capabilities say so, and the calls are refused.
func TestCapabilitiesFromDiscovery(t *testing.T) {
	srv := prosodytest.Start(t, prosodytest.WithoutUpload(), prosodytest.WithoutBlocking())
	account := srv.Register("alice", "secret-a")
	p := testProvider()
	alice := connect(t, p, "ins_alice", srv.Config(account, "secret-a"))
	caps := alice.Capabilities()
	if contains(caps, channels.CapMedia) || contains(caps, channels.CapContactsBlock) || !contains(caps, channels.CapGroupsCreate) || !contains(caps, channels.CapText) {
		t.Fatalf("capabilities %v", caps)
	}
	var f *channels.Failure
	if err := alice.Block(ctxT(t), "bob@"+srv.Domain, true); !errors.As(err, &f) || f.Code != "capability_not_supported" {
		t.Fatalf("Block = %v", err)
	}
	media := &channels.Media{MIMEType: "text/plain", Size: 1, Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("x"))), nil }}
	if _, err := alice.Send(ctxT(t), channels.Outbound{MessageID: "m", Chat: "bob@" + srv.Domain, Type: channels.TypeMedia, Media: media}); !errors.As(err, &f) || f.Code != "capability_not_supported" {
		t.Fatalf("Send media = %v", err)
	}
}

// Stopping the server mid-session ends Run with an error the runtime retries; once the server is back a new Run
// connects, rejoins its rooms and messages flow again.
func TestServerRestart(t *testing.T) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	bobAccount := srv.Register("bob", "secret-b")
	p := testProvider()
	alice := connect(t, p, "ins_alice", srv.Config(account, "secret-a"))
	g, err := alice.CreateGroup(ctxT(t), "Restart", nil)
	if err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	err = alice.ended(t)
	var f *channels.Failure
	if !errors.As(err, &f) || !f.Retryable {
		t.Fatalf("Run after the server stopped = %v, want a retryable failure", err)
	}
	if _, err := alice.Send(ctxT(t), channels.Outbound{MessageID: "msg_down", Chat: bobAccount, Type: channels.TypeText, Text: "x"}); !errors.As(err, &f) || f.Code != "not_connected" {
		t.Fatalf("Send while down = %v", err)
	}
	// While the server is down the next session fails at once with server_unreachable.
	assertFailure(t, alice.reopen(t).ended(t), ReasonServerUnreachable)

	srv.Start()
	alice = alice.reopen(t)
	await.Until(t, "the session to connect again", func() int { return alice.sink.connections() }, func(n int) bool { return n == 2 })
	bob := dialPeer(t, srv, bobAccount, "secret-b")
	if _, err := alice.Send(ctxT(t), channels.Outbound{MessageID: "msg_up", Chat: bobAccount, Type: channels.TypeText, Text: "back"}); err != nil {
		t.Fatal(err)
	}
	bob.message("the message after the restart", func(m inMessage) bool { return m.ID == "msg_up" })
	// The room was rejoined: bob (not a member) sees alice as its occupant.
	bob.send(`<presence to="` + g.Address + `/bob"><x xmlns="http://jabber.org/protocol/muc"/></presence>`)
	bob.presence("alice in the room after the restart", func(p inPresence) bool { return p.From == g.Address+"/alice" })
}

// A message the sink could not store is not acknowledged (stream management): the connection ends with
// storage_error, and the server delivers the message again to the next connection.
func TestUnstoredMessageIsDeliveredAgain(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	account := alice.cfg.JID.String()
	alice.sink.failInbound.Store(1)
	bob.send(`<message to="` + account + `" id="lost1" type="chat"><body>do not lose me</body><request xmlns="urn:xmpp:receipts"/></message>`)
	assertFailure(t, alice.ended(t), ReasonSinkError)

	alice = alice.reopen(t)
	in := alice.sink.inboundWhere(t, "the message delivered again", func(m channels.Inbound) bool { return m.ProviderID == "lost1" })
	if in.Text != "do not lose me" {
		t.Fatalf("inbound %+v", in)
	}
	bob.message("the receipt, once stored", func(m inMessage) bool { return m.Received != nil && m.Received.ID == "lost1" })
}

// A server that stops answering (SIGSTOP: the connection stays open) is found by the ping keepalive.
func TestPingKeepalive(t *testing.T) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	p := New(Options{PingInterval: 100 * time.Millisecond, PingTimeout: 500 * time.Millisecond})
	alice := connect(t, p, "ins_alice", srv.Config(account, "secret-a"))
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.Signal(syscall.SIGCONT)
	err := alice.ended(t)
	assertFailure(t, err, ReasonServerUnreachable)
}

// Message carbons: what the account's other clients send shows as FromMe, what they alone receive shows too.
func TestCarbons(t *testing.T) {
	srv, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	phone := dialPeer(t, srv, account, "secret-a") // alice's phone
	phone.send(`<message to="` + bobAccount + `" id="fromphone1" type="chat"><body>sent from my phone</body></message>`)
	in := alice.sink.inboundWhere(t, "the phone's message", func(m channels.Inbound) bool { return m.ProviderID == "fromphone1" })
	if !in.FromMe || in.Chat != bobAccount || in.From.Address != account || in.Text != "sent from my phone" {
		t.Fatalf("sent carbon %+v", in)
	}
	bob.send(`<message to="` + phone.JID().String() + `" id="tophone1" type="chat"><body>to your phone</body></message>`)
	in = alice.sink.inboundWhere(t, "the message to the phone", func(m channels.Inbound) bool { return m.ProviderID == "tophone1" })
	if in.FromMe || in.Chat != bobAccount || in.From.Address != bobAccount || in.Text != "to your phone" {
		t.Fatalf("received carbon %+v", in)
	}
}

// With stream management, sent means the server acknowledged the message: a server that takes the bytes but does
// not answer leaves the message to be sent again.
func TestSentMeansAcknowledged(t *testing.T) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	p := New(Options{PingInterval: time.Hour, PingTimeout: 3 * time.Second})
	alice := connect(t, p, "ins_alice", srv.Config(account, "secret-a"))
	if !alice.sm.on.Load() {
		t.Fatal("stream management is not on")
	}
	ctx := ctxT(t)
	if _, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_ok", Chat: "bob@" + srv.Domain, Type: channels.TypeText, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.Signal(syscall.SIGCONT)
	_, err := alice.Send(ctx, channels.Outbound{MessageID: "msg_unacked", Chat: "bob@" + srv.Domain, Type: channels.TypeText, Text: "x"})
	var f *channels.Failure
	if !errors.As(err, &f) || f.Code != "network_error" || !f.Retryable {
		t.Fatalf("Send to a server that does not answer = %v, want a retryable network_error", err)
	}
}

// A connection lost without a goodbye is resumed (XEP-0198): what arrived meanwhile is delivered on the resumed
// stream, and the account keeps its address.
func TestResumption(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	account := alice.cfg.JID.String()
	bound := alice.xs.LocalAddr()
	// The network fails: the socket closes under the session, no stream end is sent.
	_ = alice.xs.Conn().Close()
	var f *channels.Failure
	if err := alice.ended(t); !errors.As(err, &f) || !f.Retryable {
		t.Fatalf("Run after the connection dropped = %v", err)
	}
	bob.send(`<message to="` + account + `" id="whiledown1" type="chat"><body>while you were away</body></message>`)

	alice = alice.reopen(t)
	alice.sink.inboundWhere(t, "the message sent while the connection was down", func(m channels.Inbound) bool { return m.ProviderID == "whiledown1" })
	await.Equal(t, "the session to resume", func() int32 { return alice.sm.resumes.Load() }, 1)
	// What the resumed stream held arrives while the session is still setting up; it is connected after that.
	now := await.Until(t, "the session to be connected", func() *xmpp.Session {
		alice.mu.Lock()
		defer alice.mu.Unlock()
		return alice.xs
	}, func(xs *xmpp.Session) bool { return xs != nil })
	if !now.LocalAddr().Equal(bound) {
		t.Fatalf("address after resuming: %v, want %v", now.LocalAddr(), bound)
	}
	if _, err := alice.Send(ctxT(t), channels.Outbound{MessageID: "msg_after", Chat: bob.JID().Bare().String(), Type: channels.TypeText, Text: "back"}); err != nil {
		t.Fatal(err)
	}
	bob.message("the message after resuming", func(m inMessage) bool { return m.ID == "msg_after" })
}

// What is said in a room while the instance is disconnected arrives when it connects again (room history since
// the last message it saw).
func TestRoomHistoryAcrossConnections(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	bobAccount := bob.JID().Bare().String()
	ctx := ctxT(t)
	g, err := alice.CreateGroup(ctx, "History", []string{bobAccount})
	if err != nil {
		t.Fatal(err)
	}
	bob.send(`<presence to="` + g.Address + `/bob"><x xmlns="http://jabber.org/protocol/muc"/></presence>`)
	bob.presence("bob in the room", func(p inPresence) bool { return p.From == g.Address+"/bob" && p.MUCUser.has(110) })
	bob.send(`<message to="` + g.Address + `" id="h1" type="groupchat"><body>before</body></message>`)
	alice.sink.inboundWhere(t, "the first room message", func(m channels.Inbound) bool { return m.ProviderID == "h1" })

	alice.cancel() // disconnect: a clean goodbye, the rooms are left server-side
	if err := alice.ended(t); err != nil {
		t.Fatal(err)
	}
	bob.presence("alice gone from the room", func(p inPresence) bool { return p.From == g.Address+"/alice" && p.Type == "unavailable" })
	bob.send(`<message to="` + g.Address + `" id="h2" type="groupchat"><body>while you were away</body></message>`)

	alice = alice.reopen(t)
	in := alice.sink.inboundWhere(t, "the message said while away", func(m channels.Inbound) bool { return m.ProviderID == "h2" })
	if in.Chat != g.Address || in.From.Address != bobAccount {
		t.Fatalf("history message %+v", in)
	}
}

// Rooms others own: an invitation makes the group new to the instance, being removed makes it left.
func TestInvitedAndRemoved(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	account := alice.cfg.JID.String()
	room := "bobs-room@conference." + bob.JID().Domainpart()
	bob.send(`<presence to="` + room + `/bob"><x xmlns="http://jabber.org/protocol/muc"/></presence>`)
	bob.presence("bob's room created", func(p inPresence) bool { return p.From == room+"/bob" && p.MUCUser.has(110) })
	bob.send(`<iq type="set" id="cfg1" to="` + room + `"><query xmlns="http://jabber.org/protocol/muc#owner"><x xmlns="jabber:x:data" type="submit"/></query></iq>`)
	bob.send(`<message to="` + room + `"><x xmlns="http://jabber.org/protocol/muc#user"><invite to="` + account + `"/></x></message>`)
	await.Until(t, "the invitation as a new group", func() bool { return alice.sink.groupChange(room, channels.GroupCreated) }, func(b bool) bool { return b })

	if _, err := alice.JoinGroup(ctxT(t), "xmpp:"+room+"?join"); err != nil {
		t.Fatal(err)
	}
	bob.send(`<iq type="set" id="kick1" to="` + room + `"><query xmlns="http://jabber.org/protocol/muc#admin"><item nick="alice" role="none"/></query></iq>`)
	await.Until(t, "the removal as a left group", func() bool { return alice.sink.groupChange(room, channels.GroupLeft) }, func(b bool) bool { return b })
	alice.mu.Lock()
	_, still := alice.rooms[room]
	alice.mu.Unlock()
	if still {
		t.Error("the room is still among the joined ones")
	}
}

// A contact's availability is reported as presence (with the roster's name), their chat states (XEP-0085) as chat
// states of the chat, and the account's own chat states reach them as XEP-0085 elements.
func TestPresenceAndChatStates(t *testing.T) {
	_, alice, bob := twoAccounts(t)
	account, bobAccount := alice.cfg.JID.String(), bob.JID().Bare().String()
	ctx := ctxT(t)
	presence := func(what string, match func(channels.Presence) bool) channels.Presence {
		t.Helper()
		var found channels.Presence
		await.Until(t, what, func() []channels.Presence {
			alice.sink.mu.Lock()
			defer alice.sink.mu.Unlock()
			return slices.Clone(alice.sink.presences)
		}, func(ps []channels.Presence) bool {
			for _, p := range ps {
				if match(p) {
					found = p
					return true
				}
			}
			return false
		})
		return found
	}

	bob.send(`<presence to="` + account + `" type="subscribe"/>`)
	bob.presence("alice's subscription request", func(p inPresence) bool { return p.From == account && p.Type == "subscribe" })
	bob.send(`<presence to="` + account + `" type="subscribed"/>`)
	presence("bob available", func(p channels.Presence) bool {
		return p.From.Address == bobAccount && p.State == "available" && p.Chat == ""
	})
	bob.send(`<presence><show>xa</show></presence>`)
	presence("bob extended away", func(p channels.Presence) bool { return p.From.Address == bobAccount && p.State == "xa" })

	bob.send(`<message to="` + account + `" type="chat"><composing xmlns="http://jabber.org/protocol/chatstates"/></message>`)
	presence("bob typing", func(p channels.Presence) bool {
		return p.From.Address == bobAccount && p.Chat == bobAccount && p.State == channels.StateTyping
	})
	bob.send(`<message to="` + account + `" type="chat"><paused xmlns="http://jabber.org/protocol/chatstates"/></message>`)
	presence("bob paused", func(p channels.Presence) bool { return p.Chat == bobAccount && p.State == channels.StatePaused })
	alice.sink.mu.Lock()
	for _, m := range alice.sink.inbound {
		if m.Text == "" {
			t.Errorf("a chat state was reported as a message: %+v", m)
		}
	}
	alice.sink.mu.Unlock()

	for _, st := range []string{channels.StateTyping, channels.StatePaused, channels.StateRecording} {
		if err := alice.SendChatState(ctx, bobAccount, st); err != nil {
			t.Fatal(err)
		}
	}
	bob.message("alice composing", func(m inMessage) bool { return m.Composing != nil && m.Body == nil })
	bob.message("alice paused", func(m inMessage) bool { return m.Paused != nil && m.Body == nil })
	bob.message("alice composing a voice message", func(m inMessage) bool { return m.Composing != nil })
	if err := alice.SendChatState(ctx, "not an address@@", channels.StateTyping); err == nil {
		t.Error("a chat state to a bad address was sent")
	}
}
