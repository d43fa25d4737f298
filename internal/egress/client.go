package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/switchboard/switchboard/internal/telemetry"
)

// Transport limits for deliveries. Receivers are customers' servers, some slow or hostile; each limit keeps one of
// them from holding a worker or memory for long.
const (
	connectTimeout         = 10 * time.Second // per address tried
	tcpKeepAlive           = 30 * time.Second
	tlsHandshakeTimeout    = 10 * time.Second
	expectContinueTimeout  = time.Second
	idleConnTimeout        = 90 * time.Second
	maxIdleConns           = 256
	maxIdleConnsPerHost    = 8
	maxResponseHeaderBytes = 64 << 10
)

// Client returns an HTTP client for deliveries to customer-controlled URLs. Every connection is judged at dial time
// on the address actually being connected, whatever a name resolved to when it was registered; redirects are never
// followed (a 3xx response is returned as it is); no proxy is taken from the environment; a request whose scheme the
// policy forbids is refused, so turning AllowHTTP off also stops deliveries to http:// URLs registered before it.
// timeout bounds each whole exchange, body included (zero means no limit, as for http.Client). Each call makes its
// own connection pool: make one client and reuse it.
//
// A request fails with an error matching ErrBlocked (errors.Is) when the guard refused an address the host resolved
// to and no other address could be connected; its message does not name the address. It fails with ErrUnresolvable
// when the host has no address, and with an error wrapping ErrInvalidURL for a forbidden scheme or a malformed IP
// literal.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return g.client(g.DialContext, timeout)
}

// client is the Client whose connections dial opens (directly, or through an instance's proxy).
func (g *Guard) client(dial func(ctx context.Context, network, address string) (net.Conn, error), timeout time.Duration) *http.Client {
	transport := &http.Transport{
		Proxy:                  nil, // never from the environment: the guard would judge the proxy's address, not the target's
		DialContext:            dial,
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  expectContinueTimeout,
		IdleConnTimeout:        idleConnTimeout,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// HTTP/1.1 only (a custom DialContext turns off HTTP/2 unless forced): every receiver speaks it, and one
		// connection per in-flight delivery keeps a stalled response from delaying others to the same endpoint.
		ForceAttemptHTTP2: false,
	}
	return &http.Client{
		// A client span per request when tracing is on (it names the host, never the path); traceparent goes along.
		Transport: telemetry.Transport(schemeCheck{guard: g, next: transport}),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// dial resolves address's host with the guard's lookup and connects to its addresses in the order returned until one
// answers. Each connection passes through control, which refuses blocked addresses before any packet is sent.
func (g *Guard) dial(ctx context.Context, dialer *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	refused := false
	for _, addr := range addrs {
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(addr.Unmap().String(), port))
		switch {
		case err == nil:
			return conn, nil
		case errors.Is(err, ErrBlocked):
			refused = true
		case firstErr == nil:
			firstErr = err
		}
	}
	if refused {
		// The bare sentinel: the dialer's error names the refused address, which delivery logs must not show.
		return nil, ErrBlocked
	}
	return nil, firstErr
}

// control is the dialer's last word on every connection: it runs after the socket is created and before it connects,
// with the address the socket is about to connect to, so no resolver answer can slip past it. It returns ErrBlocked
// for an address the policy does not allow, and for one it cannot read (failing closed).
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil || !g.allows(addrPort.Addr()) {
		return ErrBlocked
	}
	return nil
}

// schemeCheck refuses requests whose scheme the policy forbids before they reach the transport.
type schemeCheck struct {
	guard *Guard
	next  *http.Transport
}

// RoundTrip implements http.RoundTripper.
func (s schemeCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := s.guard.checkScheme(req.URL.Scheme); err != nil {
		// A RoundTripper must close the body, even when it fails.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return s.next.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport's pool.
func (s schemeCheck) CloseIdleConnections() {
	s.next.CloseIdleConnections()
}

// DialContext opens a TCP connection to a customer-controlled host:port (a channel's server) under the same rules as
// the Client: the host is resolved with the guard's lookup and every address is judged at dial time, so a channel
// config can aim neither at the operator's network nor, through DNS, at anything it could not name directly. The
// errors are those of the Client (ErrBlocked, ErrUnresolvable, or the dialer's own).
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: connectTimeout, KeepAlive: tcpKeepAlive, Control: g.control}
	return g.dial(ctx, dialer, network, address)
}
