package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestControls(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n := newNetwork(t, db, Options{})

		t.Run("inbound and receipt", func(t *testing.T) {
			a := n.connected(nil)
			stranger := freeNumber() // any address, with an account or not
			if err := a.control(channels.Control{Kind: "inbound", From: stranger, Text: "hi there"}); err != nil {
				t.Fatal(err)
			}
			in := a.sink.wait(t, "inbound", 1)[0].inbound
			if in.From.Address != stranger || in.Chat != stranger || in.Text != "hi there" || in.ProviderID == "" {
				t.Errorf("injected message arrived as %+v", in)
			}
			if err := a.control(channels.Control{Kind: "receipt", MessageID: "SB123", Status: "read"}); err != nil {
				t.Fatal(err)
			}
			if r := a.sink.wait(t, "receipt", 1)[0].receipt; r.ProviderID != "SB123" || r.Status != "read" {
				t.Errorf("receipt %+v", r)
			}
			for _, bad := range []channels.Control{
				{Kind: "inbound", From: "+1 555 0100", Text: "x"},
				{Kind: "inbound", From: stranger},
				{Kind: "receipt", MessageID: "SB1", Status: "seen"},
				{Kind: "fail_sends", Count: 1},
				{Kind: "explode"},
			} {
				if err := a.control(bad); failureCode(t, err) != "invalid_control" {
					t.Errorf("control %+v: %v", bad, err)
				}
			}
			if _, err := a.sess.Handle(ctx, channels.Command{Op: "sandbox.nothing"}); err == nil {
				t.Error("an unknown op was accepted")
			}
		})

		t.Run("fail_sends", func(t *testing.T) {
			a := n.connected(nil)
			b := n.connected(nil)
			if err := a.control(channels.Control{Kind: "fail_sends", Count: 2,
				Failure: &channels.Failure{Code: "rate_limited", Detail: "slow down", Retryable: true}}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, err := a.sess.Send(ctx, channels.Outbound{Chat: b.number, Type: channels.TypeText, Text: "x"})
				var f *channels.Failure
				if failureCode(t, err) != "rate_limited" || !errors.As(err, &f) || !f.Retryable {
					t.Errorf("send under fail_sends: %v", err)
				}
			}
			a.send(t, b.number, "through")
			await.Equal(t, "the third send delivered", func() string { return strings.Join(b.sink.texts(), ",") },
				"through")
		})

		t.Run("disconnect", func(t *testing.T) {
			a := n.connected(nil)
			if err := a.control(channels.Control{Kind: "disconnect"}); err != nil {
				t.Fatal(err)
			}
			if err := a.ended(t); err == nil {
				t.Fatal("Run returned nil after a disconnect; the runtime would not reconnect")
			}
			if _, err := a.sess.Send(ctx, channels.Outbound{Chat: EchoNumber, Type: channels.TypeText, Text: "x"}); failureCode(t, err) != "not_connected" {
				t.Errorf("send while disconnected: %v", err)
			}
			if err := a.control(channels.Control{Kind: "disconnect"}); failureCode(t, err) != "not_connected" {
				t.Errorf("disconnect while disconnected: %v", err)
			}
			// The runtime runs the session again: it reconnects with the credentials it kept.
			a.start()
			await.Equal(t, "connected again", func() int { return len(statesOf(a.sink, channels.StatusConnected)) }, 2)
			if got := len(a.sink.of("connected")); got != 1 {
				t.Errorf("paired %d times, want once", got)
			}
		})

		t.Run("call", func(t *testing.T) {
			a := n.connected(nil)
			caller := freeNumber()
			if err := a.control(channels.Control{Kind: "call", From: caller, Video: true}); err != nil {
				t.Fatal(err)
			}
			if c := a.sink.wait(t, "call", 1)[0].call; c.From.Address != caller || !c.Video || c.ID == "" {
				t.Errorf("call %+v", c)
			}
			if err := a.control(channels.Control{Kind: "call", From: "not a number"}); failureCode(t, err) != "invalid_control" {
				t.Errorf("a call from no address: %v", err)
			}
		})

		t.Run("restrict", func(t *testing.T) {
			a := n.connected(nil)
			if err := a.control(channels.Control{Kind: "restrict"}); failureCode(t, err) != "invalid_control" {
				t.Errorf("restrict without a duration: %v", err)
			}
			before := time.Now()
			if err := a.control(channels.Control{Kind: "restrict", Duration: time.Hour, Text: "slow down"}); err != nil {
				t.Fatal(err)
			}
			var r *channels.Restriction
			if err := a.ended(t); !errors.As(err, &r) || r.Reason != "slow down" || r.Until.Before(before.Add(time.Hour)) {
				t.Fatalf("Run = %v after a restrict, want a Restriction for an hour with the reason", err)
			}
			if err := a.control(channels.Control{Kind: "restrict", Duration: time.Hour}); failureCode(t, err) != "not_connected" {
				t.Errorf("restrict while not connected: %v", err)
			}
		})

		t.Run("logout", func(t *testing.T) {
			a := n.connected(nil)
			if err := a.control(channels.Control{Kind: "logout"}); err != nil {
				t.Fatal(err)
			}
			if err := a.ended(t); err != nil {
				t.Fatalf("Run = %v after a logout, want nil", err)
			}
			a.waitState(t, channels.StatusLoggedOut)
			// The credentials are no longer good: a new session opened with them is logged out too.
			b := &instance{n: n, id: a.id, config: a.config, sink: &recorder{}}
			b.reopen(a.sink.of("connected")[0].creds)
			b.start()
			if err := b.ended(t); err != nil {
				t.Fatal(err)
			}
			if s := b.sink.of("state"); s[len(s)-1].status != channels.StatusLoggedOut {
				t.Errorf("states %v with revoked credentials", s)
			}
		})

		t.Run("Logout", func(t *testing.T) {
			a := n.connected(nil)
			if err := a.sess.Logout(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.ended(t); err != nil {
				t.Fatalf("Run = %v after Logout, want nil", err)
			}
			// Run again, the session pairs again, and the instance gets its number back.
			a.start()
			if got := a.sink.wait(t, "connected", 2)[1].party.Address; got != a.number {
				t.Errorf("paired again as %s, want %s", got, a.number)
			}
		})

		t.Run("through the runtime", func(t *testing.T) {
			a := n.connected(nil)
			args, _ := json.Marshal(channels.Control{Kind: "inbound", From: EchoNumber, Text: "via Do"})
			if _, err := n.sessions.Do(ctx, a.id, channels.Command{Op: OpControl, Args: args}); err != nil {
				t.Fatal(err)
			}
			a.sink.wait(t, "inbound", 1)
			if _, err := n.sessions.Do(ctx, a.id, channels.Command{Op: OpControl, Args: json.RawMessage(`[`)}); failureCode(t, err) != "invalid_control" {
				t.Errorf("a control that is not JSON: %v", err)
			}
		})
	})
}

func statesOf(r *recorder, s channels.Status) []event {
	var out []event
	for _, e := range r.of("state") {
		if e.status == s {
			out = append(out, e)
		}
	}
	return out
}
