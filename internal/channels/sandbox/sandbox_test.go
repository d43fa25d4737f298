package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestNormalizeAddress(t *testing.T) {
	p := New(nil, Options{})
	for _, c := range []struct{ raw, want, err string }{
		{raw: "+999 555 0101", want: "+9995550101"},
		{raw: "0099955501 01", want: "+9995550101"},
		{raw: "(+999) 555-0101", want: "+9995550101"},
		{raw: "tel:+999.555.0101", want: "+9995550101"},
		{raw: " +99900000000 ", want: EchoNumber},
		{raw: "123456789012345678@G.Sandbox", want: "123456789012345678@g.sandbox"},
		{raw: "+49 30 1234567", err: "reserved range +999"},
		{raw: "999 555 0101", err: "international form"},
		{raw: "+999 555", err: "7 to 12 digits"},
		{raw: "+999 555 0101 x12", err: "only digits"},
		{raw: "+999+5550101", err: "only digits"},
		{raw: "12@g.sandbox", err: "not a sandbox group address"},
		{raw: "", err: "international form"},
	} {
		got, err := p.NormalizeAddress(c.raw)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("NormalizeAddress(%q) = %q, %v; want an error mentioning %q", c.raw, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("NormalizeAddress(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
}

func TestInfoAndConfig(t *testing.T) {
	p := New(nil, Options{})
	info := p.Info()
	every := []channels.Capability{channels.CapText, channels.CapMedia, channels.CapLocation, channels.CapContactCard,
		channels.CapReaction, channels.CapReply, channels.CapEdit, channels.CapDelete, channels.CapDelivered,
		channels.CapRead, channels.CapMarkRead, channels.CapGroupsCreate, channels.CapGroupsManage,
		channels.CapGroupsInvite, channels.CapContactsLookup, channels.CapContactsBlock, channels.CapContactsPicture, channels.CapGroupsSettings,
		channels.CapGroupsPicture, channels.CapProfileName, channels.CapProfileAbout, channels.CapProfilePicture, channels.CapAuthQR,
		channels.CapAuthPairing, channels.CapAuthToken}
	for _, c := range every {
		if !info.Has(c) {
			t.Errorf("the sandbox does not list %s", c)
		}
	}
	if info.Name != Name || len(info.AuthMethods) != 3 {
		t.Errorf("info = %+v", info)
	}
	for _, c := range []struct {
		config map[string]any
		err    string
	}{
		{config: map[string]any{"display_name": "Ada", "number": "+999 123 4567", "auto_pair": true}},
		{config: map[string]any{"number": "+999 012 3456"}, err: "network's own range"},
		{config: map[string]any{"number": "+44 20 7946 0000"}, err: "reserved range"},
		{config: map[string]any{"display_name": strings.Repeat("x", 65)}, err: "at most 64"},
		{config: map[string]any{"auto_pair": "yes"}, err: "true or false"},
		{config: map[string]any{"token": "x"}, err: "not a setting"},
		{config: map[string]any{"delivered_after_ms": 250.0, "read_after_ms": -1, "shuffle_receipts": true}},
		{config: map[string]any{"delivered_after_ms": json.Number("1000")}},
		{config: map[string]any{"delivered_after_ms": 1.5}, err: "whole number"},
		{config: map[string]any{"read_after_ms": -2}, err: "or -1 for never"},
		{config: map[string]any{"read_after_ms": 3_600_001}, err: "from 0 to 3600000"},
		{config: map[string]any{"read_after_ms": "1s"}, err: "whole number"},
		{config: map[string]any{"shuffle_receipts": 1}, err: "true or false"},
	} {
		err := p.ValidateConfig(c.config)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ValidateConfig(%v) = %v; want %q", c.config, err, c.err)
		}
	}
}

func TestPairByQR(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{QRRefresh: 20 * time.Millisecond, QRLimit: -1})
		a := n.open(map[string]any{"display_name": "Ada"})
		a.start()
		a.waitState(t, channels.StatusAwaitingAuth)
		qrs := a.sink.wait(t, "qr", 3) // refreshed until scanned
		if qrs[0].qr == qrs[1].qr || !strings.HasPrefix(qrs[0].qr, "sandbox-qr:") {
			t.Errorf("QR codes %q, %q: want fresh sandbox codes", qrs[0].qr, qrs[1].qr)
		}
		if s := a.sink.of("state"); s[0].status != channels.StatusConnecting || s[1].reason != "scan the QR code" {
			t.Errorf("states %v: want connecting, then awaiting_auth to scan the QR code", s)
		}
		if err := a.control(channels.Control{Kind: "scan"}); err != nil {
			t.Fatalf("scan: %v", err)
		}
		c := a.sink.wait(t, "connected", 1)[0]
		a.waitState(t, channels.StatusConnected)
		if !strings.HasPrefix(c.party.Address, "+9995") || c.party.DisplayName != "Ada" || len(c.creds) == 0 {
			t.Fatalf("connected as %+v with %d bytes of credentials", c.party, len(c.creds))
		}
		if err := a.control(channels.Control{Kind: "scan"}); failureCode(t, err) != "invalid_state" {
			t.Errorf("a second scan: %v", err)
		}

		// A restart opens a new session with the credentials: it connects at once, with the same number.
		if err := a.stop(); err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
		b := &instance{n: n, id: a.id, config: a.config, sink: &recorder{}}
		b.reopen(c.creds)
		b.start()
		b.waitState(t, channels.StatusConnected)
		if len(b.sink.of("qr")) != 0 || len(b.sink.of("connected")) != 0 {
			t.Errorf("reconnecting with credentials showed a QR code or paired again: %v", b.sink.events)
		}
		if _, number := b.sess.live(); number != c.party.Address {
			t.Errorf("reconnected as %s, want %s", number, c.party.Address)
		}
	})
}

func TestQRGivesUp(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{QRRefresh: time.Millisecond, QRLimit: 2})
		a := n.open(nil)
		a.start()
		if err := a.ended(t); err != nil {
			t.Fatalf("Run = %v, want nil (ended for good)", err)
		}
		if got := len(a.sink.of("qr")); got != 2 {
			t.Errorf("%d QR codes shown, want 2", got)
		}
		if s := a.sink.of("state"); s[len(s)-1].status != channels.StatusDisconnected {
			t.Errorf("last state %v, want disconnected", s[len(s)-1])
		}
	})
}

func TestPairingCode(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{QRLimit: -1})
		taken := n.connected(map[string]any{"number": freeNumber()})

		a := n.open(nil)
		if _, err := a.sess.PairingCode(context.Background(), ""); failureCode(t, err) != "invalid_state" {
			t.Errorf("a pairing code before Run: %v", err)
		}
		a.start()
		a.waitState(t, channels.StatusAwaitingAuth)
		if _, err := a.sess.PairingCode(context.Background(), taken.number); failureCode(t, err) != "number_taken" {
			t.Errorf("a pairing code for a number held by another instance: %v", err)
		}
		if _, err := a.sess.PairingCode(context.Background(), "+1 555 0100"); failureCode(t, err) != "invalid_address" {
			t.Errorf("a pairing code for a number outside the sandbox: %v", err)
		}
		want := freeNumber()
		code, err := a.sess.PairingCode(context.Background(), want)
		if err != nil || len(code) != 9 || code[4] != '-' {
			t.Fatalf("PairingCode = %q, %v; want ABCD-EFGH", code, err)
		}
		if err := a.control(channels.Control{Kind: "scan", Text: "AAAA-AAAA"}); failureCode(t, err) != "pairing_code_mismatch" {
			t.Errorf("a wrong code: %v", err)
		}
		if err := a.control(channels.Control{Kind: "scan", Text: strings.ToLower(strings.ReplaceAll(code, "-", ""))}); err != nil {
			t.Fatalf("entering the code: %v", err)
		}
		if got := a.sink.wait(t, "connected", 1)[0].party.Address; got != want {
			t.Errorf("paired as %s, want the number asked for, %s", got, want)
		}
		a.waitState(t, channels.StatusConnected)
	})
}

func TestConfiguredNumberTaken(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		first := n.connected(map[string]any{"number": freeNumber()})
		second := n.open(map[string]any{"number": first.number, "auto_pair": true})
		second.start()
		if err := second.ended(t); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if s := second.waitState(t, channels.StatusFailed); !strings.Contains(s.reason, "held by another instance") {
			t.Errorf("failed because %q", s.reason)
		}
	})
}

func TestDirectMessages(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a := n.connected(map[string]any{"display_name": "Ada"})
		b := n.connected(nil)

		id := a.send(t, b.number, "hello")
		in := b.sink.wait(t, "inbound", 1)[0].inbound
		if in.ProviderID != id || in.Chat != a.number || in.From.Address != a.number ||
			in.From.DisplayName != "Ada" || in.Text != "hello" || in.Type != channels.TypeText {
			t.Errorf("B received %+v", in)
		}
		await.Equal(t, "delivered, then read", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
			"delivered,read")

		// A send repeated with the same message id is the same message.
		out := channels.Outbound{MessageID: store.NewID("msg"), Chat: b.number, Type: channels.TypeText, Text: "once"}
		first, err := a.sess.Send(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.sess.Send(context.Background(), out)
		if err != nil || again.ProviderID != first.ProviderID {
			t.Errorf("repeated send = %+v, %v; want %s", again, err, first.ProviderID)
		}
		a.send(t, b.number, "after")
		await.Equal(t, "B's messages", func() string { return strings.Join(b.sink.texts(), ",") }, "hello,once,after")

		_, err = a.sess.Send(context.Background(), channels.Outbound{MessageID: "m1", Chat: freeNumber(),
			Type: channels.TypeText, Text: "anyone?"})
		var f *channels.Failure
		if failureCode(t, err) != "recipient_not_on_network" || errors.As(err, &f) && f.Retryable {
			t.Errorf("to a number without an account: %v", err)
		}
		if _, err := a.sess.Send(context.Background(), channels.Outbound{Chat: b.number, Type: channels.TypeText}); failureCode(t, err) != "invalid_message" {
			t.Errorf("an empty text: %v", err)
		}
	})
}

func TestOfflineRecipient(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a := n.connected(nil)
		b := n.connected(nil)
		creds := b.sink.of("connected")[0].creds
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
		n.sessions.set(b.id, nil)

		first := a.send(t, b.number, "while you were out")
		a.send(t, b.number, "and again")
		// Held by the network: no receipts while B is offline.
		if r := a.sink.receiptsOf(first); len(r) != 0 {
			t.Errorf("receipts %v before the recipient connected", r)
		}
		b.reopen(creds)
		b.start()
		await.Equal(t, "the held messages, in order", func() string { return strings.Join(b.sink.texts(), ",") },
			"while you were out,and again")
		await.Equal(t, "receipts once delivered", func() string { return strings.Join(a.sink.receiptsOf(first), ",") },
			"delivered,read")
	})
}

func TestEcho(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a := n.connected(nil)
		id := a.send(t, "+999 0000 0000", "ping")
		reply := a.sink.wait(t, "inbound", 1)[0].inbound
		if reply.Text != "echo: ping" || reply.From.Address != EchoNumber || reply.Chat != EchoNumber ||
			reply.ReplyTo != id || reply.From.DisplayName != echoName {
			t.Errorf("echo answered %+v", reply)
		}
		await.Equal(t, "the echo's receipts", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
			"delivered,read")
		// The echo's answer can be read and replied to like any message.
		if err := a.sess.MarkRead(context.Background(), EchoNumber, ""); err != nil {
			t.Error(err)
		}
		if _, err := a.sess.Send(context.Background(), channels.Outbound{Chat: EchoNumber, Type: channels.TypeReaction,
			Target: reply.ProviderID, Emoji: "👍"}); err != nil {
			t.Errorf("reacting to the echo: %v", err)
		}
	})
}

func TestReceiptSchedule(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		t.Run("read when marked", func(t *testing.T) {
			n := newNetwork(t, db, Options{Read: NoReceipt})
			a := n.connected(nil)
			b := n.connected(nil)
			first := a.send(t, b.number, "one")
			second := a.send(t, b.number, "two")
			b.sink.wait(t, "inbound", 2)
			await.Equal(t, "delivered receipts", func() int { return len(a.sink.of("receipt")) }, 2)
			if err := b.sess.MarkRead(context.Background(), a.number, first); err != nil {
				t.Fatal(err)
			}
			await.Equal(t, "the first read", func() string { return strings.Join(a.sink.receiptsOf(first), ",") },
				"delivered,read")
			if err := b.sess.MarkRead(context.Background(), a.number, ""); err != nil {
				t.Fatal(err)
			}
			await.Equal(t, "the second read", func() string { return strings.Join(a.sink.receiptsOf(second), ",") },
				"delivered,read")
			// Marking read again tells nobody anything new.
			if err := b.sess.MarkRead(context.Background(), a.number, ""); err != nil {
				t.Fatal(err)
			}
			third := a.send(t, b.number, "three")
			await.Equal(t, "the third delivered", func() string { return strings.Join(a.sink.receiptsOf(third), ",") },
				"delivered")
			if got := len(a.sink.of("receipt")); got != 5 {
				t.Errorf("%d receipts, want 5 (each told once)", got)
			}
		})
		t.Run("delayed", func(t *testing.T) {
			n := newNetwork(t, db, Options{Delivered: 20 * time.Millisecond, Read: 60 * time.Millisecond})
			a := n.connected(nil)
			b := n.connected(nil)
			id := a.send(t, b.number, "later")
			await.Equal(t, "receipts on the schedule", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
				"delivered,read")
		})
		t.Run("the sender's settings", func(t *testing.T) {
			n := newNetwork(t, db, Options{})
			n.p.opts.coin = func() bool { return true }
			quiet := n.connected(map[string]any{"read_after_ms": -1})
			shuffled := n.connected(map[string]any{"shuffle_receipts": true, "read_after_ms": 10.0})
			plain := n.connected(nil)
			ids := []string{quiet.send(t, plain.number, "1"), shuffled.send(t, plain.number, "2"),
				plain.send(t, quiet.number, "3")}
			for i, c := range []struct {
				in   *instance
				want string
			}{{quiet, "delivered"}, {shuffled, "read,delivered"}, {plain, "delivered,read"}} {
				await.Equal(t, "receipts of message "+ids[i], func() string { return strings.Join(c.in.sink.receiptsOf(ids[i]), ",") },
					c.want)
			}
			for _, in := range []*instance{plain, quiet, shuffled} {
				await.Equal(t, in.number+"'s mailbox emptied", func() int { return n.mailbox(t, in.number) }, 0)
			}
			if got := strings.Join(quiet.sink.receiptsOf(ids[0]), ","); got != "delivered" {
				t.Errorf("receipts %s with read_after_ms -1", got)
			}
		})
		t.Run("shuffled", func(t *testing.T) {
			n := newNetwork(t, db, Options{Shuffle: true})
			n.p.opts.coin = func() bool { return true }
			a := n.connected(nil)
			b := n.connected(nil)
			id := a.send(t, b.number, "out of order")
			await.Equal(t, "read before delivered", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
				"read,delivered")
		})
	})
}

func TestMessageKinds(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{MaxMedia: 8})
		a := n.connected(nil)
		b := n.connected(nil)
		c := n.connected(nil)
		ctx := context.Background()
		send := func(m channels.Outbound) (string, error) {
			m.Chat = b.number
			sent, err := a.sess.Send(ctx, m)
			return sent.ProviderID, err
		}
		photo := &channels.Media{Kind: "image", MIMEType: "image/png", Filename: "a.png", Caption: "look",
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("PNGDATA")), nil }}
		original, err := send(channels.Outbound{Type: channels.TypeMedia, Media: photo})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []channels.Outbound{
			{Type: channels.TypeLocation, Location: &channels.Location{Latitude: 52.5, Longitude: 13.4, Name: "Berlin"}},
			{Type: channels.TypeContact, Contact: &channels.ContactCard{Name: "Bob", Phones: []string{"+9995550101"}}},
			{Type: channels.TypeText, Text: "re", ReplyTo: original},
			{Type: channels.TypeReaction, Target: original, Emoji: "❤"},
			{Type: channels.TypeEdit, Target: original, Text: "edited"},
			{Type: channels.TypeDelete, Target: original},
		} {
			if _, err := send(m); err != nil {
				t.Fatalf("send %s: %v", m.Type, err)
			}
		}
		got := b.sink.wait(t, "inbound", 7)
		if m := got[0]; string(m.media) != "PNGDATA" || m.inbound.Media.Caption != "look" || m.inbound.Media.Size != 7 {
			t.Errorf("media arrived as %+v with %q", m.inbound.Media, m.media)
		}
		if l := got[1].inbound.Location; l == nil || l.Name != "Berlin" {
			t.Errorf("location arrived as %+v", l)
		}
		if c := got[2].inbound.Contact; c == nil || c.Phones[0] != "+9995550101" {
			t.Errorf("contact arrived as %+v", c)
		}
		if got[3].inbound.ReplyTo != original || got[4].inbound.Emoji != "❤" || got[5].inbound.Target != original ||
			got[5].inbound.Text != "edited" || got[6].inbound.Type != channels.TypeDelete {
			t.Errorf("reply, reaction, edit, delete arrived as %v", got[3:])
		}

		big := &channels.Media{Kind: "image",
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("123456789")), nil }}
		if _, err := send(channels.Outbound{Type: channels.TypeMedia, Media: big}); failureCode(t, err) != "media_rejected" {
			t.Errorf("media over the limit: %v", err)
		}
		// References are to messages of the same chat; only the sender edits or deletes.
		other := c.send(t, a.number, "from c")
		if _, err := send(channels.Outbound{Type: channels.TypeReaction, Target: other, Emoji: "x"}); failureCode(t, err) != "message_not_found" {
			t.Errorf("a reaction to another chat's message: %v", err)
		}
		inB := b.send(t, a.number, "from b")
		if _, err := send(channels.Outbound{Type: channels.TypeEdit, Target: inB, Text: "mine now"}); failureCode(t, err) != "not_permitted" {
			t.Errorf("editing the other party's message: %v", err)
		}
		if _, err := send(channels.Outbound{Type: channels.TypeReaction, Target: inB, Emoji: "ok"}); err != nil {
			t.Errorf("reacting to the other party's message: %v", err)
		}
	})
}

func TestLookupAndBlock(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a := n.connected(nil)
		b := n.connected(map[string]any{"display_name": "Bea"})
		c := n.connected(nil)
		ctx := context.Background()
		nobody := freeNumber()
		res, err := a.sess.Lookup(ctx, []string{b.number, "+999 00000000", nobody, "not a number"})
		if err != nil {
			t.Fatal(err)
		}
		want := []channels.LookupResult{
			{Address: b.number, Normalized: b.number, OnNetwork: true, DisplayName: "Bea"},
			{Address: "+999 00000000", Normalized: EchoNumber, OnNetwork: true, DisplayName: echoName},
			{Address: nobody, Normalized: nobody},
			{Address: "not a number"},
		}
		for i := range want {
			if !lookupEqual(res[i], want[i]) {
				t.Errorf("lookup %d = %+v, want %+v", i, res[i], want[i])
			}
		}

		if err := b.sess.Block(ctx, a.number, true); err != nil {
			t.Fatal(err)
		}
		blocked := a.send(t, b.number, "blocked") // accepted by the network, never delivered
		c.send(t, b.number, "from c")
		await.Equal(t, "only C's message", func() string { return strings.Join(b.sink.texts(), ",") }, "from c")
		if err := b.control(channels.Control{Kind: "inbound", From: a.number, Text: "x"}); failureCode(t, err) != "blocked" {
			t.Errorf("an injected message from a blocked number: %v", err)
		}
		if err := b.sess.Block(ctx, a.number, false); err != nil {
			t.Fatal(err)
		}
		a.send(t, b.number, "unblocked")
		await.Equal(t, "A's message after the unblock", func() string { return strings.Join(b.sink.texts(), ",") },
			"from c,unblocked")
		if r := a.sink.receiptsOf(blocked); len(r) != 0 {
			t.Errorf("the blocked message got receipts %v", r)
		}
		if err := b.sess.Block(ctx, b.number, true); failureCode(t, err) != "invalid_address" {
			t.Errorf("blocking oneself: %v", err)
		}
	})
}

func lookupEqual(a, b channels.LookupResult) bool {
	return a.Address == b.Address && a.Normalized == b.Normalized && a.OnNetwork == b.OnNetwork &&
		a.DisplayName == b.DisplayName && slices.Equal(a.IDs, b.IDs)
}

// TestDisplayNameChange: an instance that connects with a new display name is announced to the accounts that know
// its number (direct chats, shared groups), and to no other.
func TestDisplayNameChange(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a := n.connected(map[string]any{"display_name": "Ada"})
		chatted, grouped, stranger := n.connected(nil), n.connected(nil), n.connected(nil)
		chatted.send(t, a.number, "hi")
		if _, err := grouped.sess.CreateGroup(context.Background(), "g", []string{a.number}); err != nil {
			t.Fatal(err)
		}
		creds := a.sink.of("connected")[0].creds
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		a.config["display_name"] = "Ada L."
		a.reopen(creds)
		a.start()
		a.waitState(t, channels.StatusConnected)
		for _, in := range []*instance{chatted, grouped} {
			c := in.sink.wait(t, "contact", 1)[0].party
			if c.Address != a.number || c.DisplayName != "Ada L." {
				t.Errorf("told %+v", c)
			}
		}
		if got := len(stranger.sink.of("contact")) + n.mailbox(t, stranger.number); got != 0 {
			t.Errorf("a stranger was told of the new name")
		}
		if res, err := stranger.sess.Lookup(context.Background(), []string{a.number}); err != nil || res[0].DisplayName != "Ada L." {
			t.Errorf("lookup = %+v, %v", res, err)
		}
	})
}

// A session takes commands from the moment it reports itself connected: a client that sees the instance connected
// and calls at once (its profile here) is answered, whether the session paired just now or connected with saved
// credentials. (The first report of a pairing once came before the session knew its number: such a call was
// refused as not connected.)
func TestCommandsAreTakenOnceConnectedIsReported(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		in := n.open(map[string]any{"display_name": "Ada", "auto_pair": true})
		var mu sync.Mutex
		var errs []error
		in.sink.atConnected = func() {
			_, err := in.sess.Profile(context.Background())
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		in.start()
		in.waitState(t, channels.StatusConnected)
		creds := in.sink.wait(t, "connected", 1)[0].creds
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		in.reopen(creds)
		in.start()
		await.Until(t, "the second connection's report", func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(errs)
		}, func(k int) bool { return k >= 3 })
		mu.Lock()
		defer mu.Unlock()
		for i, err := range errs {
			if err != nil {
				t.Errorf("report %d of connected: a command then failed: %v", i+1, err)
			}
		}
	})
}
