package xmpp

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/egress/proxytest"
)

// An instance with a proxy reaches Prosody only through it: with its credentials the session connects and sends;
// with a wrong password it does not, and says the proxy refused.
func TestConnectThroughAProxy(t *testing.T) {
	srv := prosodytest.Start(t)
	account := srv.Register("alice", "secret-a")
	bob := srv.Register("bob", "secret-b")
	peerClient := srv.Dial(bob, "secret-b")
	guard := egress.NewGuard(egress.Policy{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for name, start := range map[string]func(testing.TB, string, string) *proxytest.Proxy{
		"socks5": proxytest.SOCKS5, "http": proxytest.HTTP,
	} {
		t.Run(name, func(t *testing.T) {
			px := start(t, "sb", "proxy-pass")
			p, err := egress.ParseProxy(px.URL)
			if err != nil {
				t.Fatal(err)
			}
			p.Username, p.Password = px.Username, px.Password
			inst := channels.Instance{ID: "ins_proxied_" + name, WorkspaceID: "ws_test", Config: srv.Config(account, "secret-a"),
				Via: guard.Via(p)}
			r := runSession(t, testProvider(), inst, newRecorder())
			await.Until(t, "the session to connect through the proxy", r.sink.connections, func(n int) bool { return n > 0 })
			if _, err := r.Send(ctxT(t), channels.Outbound{MessageID: "msg_proxied_" + name, Chat: bob,
				Type: channels.TypeText, Text: "through the " + name + " proxy"}); err != nil {
				t.Fatalf("send: %v", err)
			}
			peerClient.Wait("the message through the proxy", func(s prosodytest.Stanza) bool {
				return s.Body == "through the "+name+" proxy"
			})

			bad := p
			bad.Password = "wrong"
			inst.ID, inst.Via = inst.ID+"_bad", guard.Via(bad)
			r = runSession(t, testProvider(), inst, newRecorder())
			if err := r.ended(t); err == nil || !strings.Contains(err.Error(), "proxy") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("a refused proxy: Run returned %v", err)
			}
			if r.sink.connections() != 0 {
				t.Error("connected without the proxy's consent")
			}
		})
	}
}
