package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/receivertest"
)

// port is a receiver's port, for URLs that name it by host name.
func port(t *testing.T, rc *receivertest.Receiver) string {
	t.Helper()
	u, err := url.Parse(rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestClientDelivers(t *testing.T) {
	var got struct {
		method, host, contentType, body string
	}
	rcv := receivertest.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.method, got.host, got.contentType, got.body = r.Method, r.Host, r.Header.Get("Content-Type"), string(body)
		w.WriteHeader(http.StatusNoContent)
	})
	// A proxy in the environment must be ignored. (Go never proxies requests to 127.0.0.1 anyway, so the request
	// names the receiver by a host name.)
	proxy := receivertest.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)

	g := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: loopback}, WithLookup(testLookup(t, map[string][]string{
		"hooks.example": {"127.0.0.1"},
	})))
	target := "http://hooks.example:" + port(t, rcv) + "/in"
	if err := g.CheckURL(t.Context(), target); err != nil {
		t.Fatalf("CheckURL(%q): %v", target, err)
	}
	resp, err := g.Client(5*time.Second).Post(target, "application/json", strings.NewReader(`{"type":"link.clicked"}`))
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	resp.Body.Close()

	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("status = %d, want 204", resp.StatusCode)
	}
	want := struct{ method, host, contentType, body string }{
		http.MethodPost, "hooks.example:" + port(t, rcv), "application/json", `{"type":"link.clicked"}`,
	}
	if got != want {
		t.Errorf("receiver got %+v, want %+v", got, want)
	}
	if n := proxy.Count(); n != 0 {
		t.Errorf("the proxy from the environment received %d requests", n)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	for _, location := range []string{"http://169.254.169.254/latest/meta-data/", "/landing"} {
		t.Run(location, func(t *testing.T) {
			rcv := receivertest.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/landing" {
					t.Error("the redirect was followed")
				}
				http.Redirect(w, r, location, http.StatusFound)
			})
			g := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: loopback})
			resp, err := g.Client(5*time.Second).Post(rcv.URL+"/in", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatalf("Post: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != location {
				t.Errorf("got %d to %q, want the 302 to %q itself", resp.StatusCode, resp.Header.Get("Location"), location)
			}
		})
	}
}

// TestClientRefusesRebinding: a name that resolved to a public address at registration resolves to a blocked one
// when the delivery dials. The blocked answers are loopback addresses, where the receiver listens, so a failure of
// the guard shows as a hit on the receiver and sends nothing off the machine.
func TestClientRefusesRebinding(t *testing.T) {
	for _, dialAnswers := range [][]string{
		{"127.0.0.1"},
		{"::ffff:127.0.0.1"},
		{"127.0.0.2", "127.0.0.1"},
		{"::1", "127.0.0.1"},
	} {
		t.Run(strings.Join(dialAnswers, ","), func(t *testing.T) {
			rcv := receivertest.New(t, nil)
			registration := testLookup(t, map[string][]string{"rebind.example": {publicAddr}})
			delivery := testLookup(t, map[string][]string{"rebind.example": dialAnswers})
			var lookups atomic.Int32
			rebinding := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
				if lookups.Add(1) == 1 {
					return registration(ctx, network, host)
				}
				return delivery(ctx, network, host)
			}
			g := NewGuard(Policy{AllowHTTP: true}, WithLookup(rebinding))

			target := "http://rebind.example:" + port(t, rcv) + "/"
			if err := g.CheckURL(t.Context(), target); err != nil {
				t.Fatalf("CheckURL(%q) = %v, want nil: the name resolves to a public address at first", target, err)
			}
			resp, err := g.Client(5*time.Second).Post(target, "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
			}
			assertBlocked(t, err, dialAnswers...)
			if n := rcv.Count(); n != 0 {
				t.Errorf("the receiver got %d requests", n)
			}
		})
	}
}

// TestClientRefusesBlockedLiterals: an IP-literal target that is blocked now — whenever it was registered, in
// whatever notation — is refused at dial time.
func TestClientRefusesBlockedLiterals(t *testing.T) {
	rcv := receivertest.New(t, nil)
	client := NewGuard(Policy{AllowHTTP: true}, WithLookup(testLookup(t, nil))).Client(5 * time.Second)
	for _, host := range []string{"127.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]"} {
		t.Run(host, func(t *testing.T) {
			resp, err := client.Get("http://" + host + ":" + port(t, rcv) + "/")
			if err == nil {
				resp.Body.Close()
			}
			assertBlocked(t, err) // the URL names the address already
		})
	}
	if n := rcv.Count(); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

// assertBlocked checks that err is the guard's refusal and names none of the refused addresses.
func assertBlocked(t *testing.T, err error, refused ...string) {
	t.Helper()
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("error = %v, want ErrBlocked", err)
	}
	for _, addr := range refused {
		if strings.Contains(err.Error(), addr) {
			t.Errorf("error %q names the refused address %s", err, addr)
		}
	}
}

// TestClientSkipsBlockedAddresses: when a name resolves to blocked and allowed addresses, the delivery goes to an
// allowed one.
func TestClientSkipsBlockedAddresses(t *testing.T) {
	rcv := receivertest.New(t, nil)
	g := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		WithLookup(testLookup(t, map[string][]string{"hooks.example": {"::1", "127.0.0.2", "127.0.0.1"}})))
	resp, err := g.Client(5 * time.Second).Get("http://hooks.example:" + port(t, rcv) + "/")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	resp.Body.Close()
	if n := rcv.Count(); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}
}

func TestClientFailures(t *testing.T) {
	rcv := receivertest.New(t, nil)
	withLookup := WithLookup(testLookup(t, map[string][]string{"empty.example": {}}))
	tests := []struct {
		name   string
		policy Policy
		url    string
		want   error
	}{
		// AllowHTTP may be turned off after http:// URLs were registered.
		{"http without AllowHTTP", Policy{AllowedNetworks: loopback}, rcv.URL, ErrInvalidURL},
		{"name without addresses", Policy{AllowHTTP: true}, "http://empty.example/", ErrUnresolvable},
		{"malformed IPv4 literal", Policy{AllowHTTP: true}, "http://1.2.3.256/", ErrInvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &closeRecorder{Reader: strings.NewReader("{}")}
			resp, err := NewGuard(tt.policy, withLookup).Client(5*time.Second).Post(tt.url, "application/json", body)
			if err == nil {
				resp.Body.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if !body.closed.Load() {
				t.Error("the request body was not closed")
			}
		})
	}
	if n := rcv.Count(); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error {
	c.closed.Store(true)
	return nil
}

func TestClientTimeout(t *testing.T) {
	release := make(chan struct{})
	rcv := receivertest.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	g := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: loopback})

	start := time.Now()
	resp, err := g.Client(100 * time.Millisecond).Get(rcv.URL)
	if err == nil {
		resp.Body.Close()
	}
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("error = %v, want a timeout", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("the request took %v", elapsed)
	}
}

func TestClientCloseIdleConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	rcv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			closed <- struct{}{}
		}
	}
	rcv.Start()
	defer rcv.Close()

	client := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: loopback}).Client(5 * time.Second)
	resp, err := client.Get(rcv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	client.CloseIdleConnections()
	await.Receive(t, "the idle connection to be closed", closed)
}

// TestControl checks the dial-time hook on its own, for addresses no test may connect to: whatever the lookup
// returned, a socket bound for a blocked address is refused before it connects.
func TestControl(t *testing.T) {
	g := NewGuard(Policy{AllowedNetworks: loopback})
	tests := []struct {
		address string
		want    error
	}{
		{publicAddr + ":443", nil},
		{"[2606:4700::1111]:443", nil},
		{"127.0.0.1:8080", nil},
		{"[::1]:8080", nil},
		{"10.0.0.1:443", ErrBlocked},
		{"169.254.169.254:80", ErrBlocked},
		{"[::ffff:169.254.169.254]:80", ErrBlocked},
		{"[64:ff9b::a9fe:a9fe]:80", ErrBlocked},
		{"[fe80::1%eth0]:443", ErrBlocked},
		{"[fd00::1]:443", ErrBlocked},
		{"100.64.0.1:443", ErrBlocked},
		{"0.0.0.0:443", ErrBlocked},
		{"not an address", ErrBlocked},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			if err := g.control("tcp", tt.address, nil); err != tt.want {
				t.Errorf("control(%q) = %v, want %v", tt.address, err, tt.want)
			}
		})
	}
}

// DialContext, for channels that hold a TCP connection to a server a customer named, judges the address it dials
// like the client: a blocked address is refused without a packet sent (ErrBlocked, no address named), an allowed
// one connects, and a name is resolved by the guard.
func TestDialContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ctx := context.Background()

	blocked := NewGuard(Policy{}, WithLookup(testLookup(t, map[string][]string{"xmpp.example": {"127.0.0.1"}})))
	for _, addr := range []string{"127.0.0.1:" + port, "xmpp.example:" + port, "[::ffff:127.0.0.1]:" + port} {
		if c, err := blocked.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrBlocked) || err.Error() != ErrBlocked.Error() {
			if c != nil {
				c.Close()
			}
			t.Errorf("DialContext(%s) = %v, want the bare ErrBlocked", addr, err)
		}
	}
	allowed := NewGuard(Policy{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		WithLookup(testLookup(t, map[string][]string{"xmpp.example": {"127.0.0.1"}, "unknown.example": {}})))
	c, err := allowed.DialContext(ctx, "tcp", "xmpp.example:"+port)
	if err != nil {
		t.Fatalf("DialContext to an allowed network: %v", err)
	}
	c.Close()
	if _, err := allowed.DialContext(ctx, "tcp", "unknown.example:"+port); !errors.Is(err, ErrUnresolvable) {
		t.Errorf("DialContext to a name without addresses = %v, want ErrUnresolvable", err)
	}
}
