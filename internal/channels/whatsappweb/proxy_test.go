//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/egress/proxytest"
)

// whatsmeow's real client of an instance with a proxy opens its websocket through it: the proxy (a real tinyproxy)
// is asked for the address the guard resolved WhatsApp's host to. This machine cannot reach WhatsApp, so the
// host resolves to a loopback port where nothing listens and the session fails as offline, after the proxy was
// asked.
func TestRealClientDialsThroughTheProxy(t *testing.T) {
	px := proxytest.HTTP(t, "sb", "proxy-pass")
	p, err := egress.ParseProxy(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	p.Username, p.Password = px.Username, px.Password
	guard := egress.NewGuard(egress.Policy{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		egress.WithLookup(func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if host == "web.whatsapp.com" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.9")}, nil
			}
			return nil, errors.New("no such host")
		}))
	prov := New(sqlite(t), Options{NewClient: Real(RealOptions{})})
	s, err := prov.Open(channels.Instance{ID: "ins_proxied", Config: map[string]any{}, Via: guard.Via(p)}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(t.Context())
	var f *channels.Failure
	if !errors.As(err, &f) || f.Code != "server_unreachable" {
		t.Fatalf("Run = %v, want server_unreachable", err)
	}
	if !strings.Contains(px.Log(), "127.0.0.9:443") {
		t.Errorf("the proxy was not asked for WhatsApp's address:\n%s", px.Log())
	}
}
