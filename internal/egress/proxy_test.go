package egress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/egress/proxytest"
	"github.com/switchboard/switchboard/internal/receivertest"
)

func TestParseProxy(t *testing.T) {
	for raw, want := range map[string]string{
		"socks5://proxy.example.com:1080": "socks5://proxy.example.com:1080",
		"http://10.0.0.1:3128":            "http://10.0.0.1:3128",
		"http://[2001:db8::1]:8080/":      "http://[2001:db8::1]:8080",
	} {
		p, err := ParseProxy(raw)
		if err != nil || p.URL() != want {
			t.Errorf("ParseProxy(%q) = %q, %v; want %q", raw, p.URL(), err, want)
		}
	}
	for _, raw := range []string{"https://proxy.example.com:443", "socks5://proxy.example.com",
		"socks5://user:pass@proxy.example.com:1080", "http://proxy.example.com:3128/path", "http://:3128",
		"http://proxy.example.com:0", "http://proxy.example.com:3128?x=1", "socks4://p:1080", "http://[::1%25eth0]:1"} {
		if _, err := ParseProxy(raw); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("ParseProxy(%q) = %v, want an ErrInvalidURL", raw, err)
		}
	}
}

// loopbackGuard allows loopback (where the test's proxies and receiver run) and resolves the names of the map.
func loopbackGuard(names map[string]string) *Guard {
	return NewGuard(Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		WithLookup(func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if a, ok := names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, errors.New("no such host")
		}))
}

func TestProxiedClientThroughRealProxies(t *testing.T) {
	rcv := receivertest.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello through "+r.Host)
	})
	for name, start := range map[string]func(testing.TB, string, string) *proxytest.Proxy{
		"socks5": proxytest.SOCKS5, "http": proxytest.HTTP,
	} {
		t.Run(name, func(t *testing.T) {
			px := start(t, "sb", "proxy-pass")
			p, err := ParseProxy(px.URL)
			if err != nil {
				t.Fatal(err)
			}
			p.Username, p.Password = px.Username, px.Password
			g := loopbackGuard(map[string]string{"receiver.test": "127.0.0.1", "intranet.test": "10.0.0.5"})
			if err := g.CheckProxy(context.Background(), p); err != nil {
				t.Fatalf("CheckProxy: %v", err)
			}
			target := "http://receiver.test:" + port(t, rcv) + "/"
			res, err := g.Via(p).Client(0).Get(target)
			if err != nil {
				t.Fatalf("through the proxy: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(body) != "hello through receiver.test:"+port(t, rcv) {
				t.Fatalf("answer %q", body)
			}
			// The proxy was asked for the address the guard resolved and judged, never for the name.
			if name == "http" && !strings.Contains(px.Log(), "127.0.0.1:"+port(t, rcv)) {
				t.Errorf("tinyproxy did not log a CONNECT to the receiver's address:\n%s", px.Log())
			}

			// A name that resolves to a blocked address never reaches the proxy.
			_, err = g.Via(p).Client(0).Get("http://intranet.test:80/")
			if !errors.Is(err, ErrBlocked) {
				t.Errorf("a blocked target through the proxy: %v, want ErrBlocked", err)
			}

			// Wrong credentials: the proxy's refusal, without the password in the message.
			bad := p
			bad.Password = "wrong-password"
			_, err = g.Via(bad).Client(0).Get(target)
			if !errors.Is(err, ErrProxy) || strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("wrong credentials: %v, want ErrProxy without the password", err)
			}

			// Without credentials too.
			bad.Username, bad.Password = "", ""
			if _, err = g.Via(bad).Client(0).Get(target); !errors.Is(err, ErrProxy) {
				t.Errorf("no credentials: %v, want ErrProxy", err)
			}
		})
	}
}

func TestProxyOnABlockedAddress(t *testing.T) {
	px := proxytest.SOCKS5(t, "sb", "proxy-pass")
	p, _ := ParseProxy(px.URL)
	g := NewGuard(Policy{AllowHTTP: true}) // loopback is not allowed
	if err := g.CheckProxy(context.Background(), p); !errors.Is(err, ErrBlocked) {
		t.Errorf("CheckProxy of a loopback proxy = %v, want ErrBlocked", err)
	}
	// A target on an allowed public address still cannot go through a proxy on a blocked one.
	_, err := g.Via(p).DialContext(context.Background(), "tcp", "203.0.113.7:443")
	if !errors.Is(err, ErrBlocked) || errors.Is(err, ErrProxy) {
		t.Errorf("dial through a blocked proxy = %v, want ErrBlocked", err)
	}
	if strings.Contains(px.Log(), "203.0.113.7") {
		t.Errorf("the proxy heard of the target:\n%s", px.Log())
	}
}

func TestUnreachableProxy(t *testing.T) {
	g := loopbackGuard(nil)
	for _, scheme := range []string{"socks5", "http"} {
		// Port 1 on loopback: nothing listens.
		_, err := g.Via(Proxy{Scheme: scheme, Address: "127.0.0.1:1"}).DialContext(context.Background(), "tcp", "127.0.0.1:80")
		if err == nil || errors.Is(err, ErrProxy) {
			t.Errorf("%s: dial through an unreachable proxy = %v, want a dial error that is not ErrProxy", scheme, err)
		}
	}
}
