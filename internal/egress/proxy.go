package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/proxy"
)

// ErrProxy is wrapped by the errors of a proxy that did not open a tunnel: it refused the credentials or the
// target, or answered something that is not its protocol. The message says which, never the password.
var ErrProxy = errors.New("the proxy refused the connection")

// Proxy is a forward proxy a channel instance's connections go through: HTTP CONNECT ("http") or SOCKS5 ("socks5")
// at Address (host:port), with optional credentials.
type Proxy struct {
	Scheme, Address    string
	Username, Password string
}

// URL is the proxy's scheme, host and port, as the API shows it.
func (p Proxy) URL() string { return p.Scheme + "://" + p.Address }

// ParseProxy reads a proxy URL such as socks5://proxy.example.com:1080: scheme http or socks5, a host and a port,
// nothing else (credentials are separate fields, so they never sit in a URL that is shown). The error's message is
// written for API clients.
func ParseProxy(raw string) (Proxy, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return Proxy{}, invalid("malformed")
	case u.Scheme != "http" && u.Scheme != "socks5":
		return Proxy{}, invalid("the scheme must be http (CONNECT) or socks5")
	case u.User != nil:
		return Proxy{}, invalid("credentials go in username and password, not in the URL")
	case u.Hostname() == "":
		return Proxy{}, invalid("the host is missing")
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#"):
		return Proxy{}, invalid("a proxy URL is a scheme, a host and a port, without a path or query")
	}
	n, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || n == 0 {
		return Proxy{}, invalid("the port must be given, from 1 to 65535")
	}
	if _, _, err := literalAddr(u.Hostname()); err != nil {
		return Proxy{}, err
	}
	return Proxy{Scheme: u.Scheme, Address: u.Host}, nil
}

// CheckProxy validates a proxy when it is configured: its host, resolved with a timeout, must have only addresses
// the policy allows (ErrBlocked, ErrUnresolvable otherwise), as CheckURL judges a webhook's.
func (g *Guard) CheckProxy(ctx context.Context, p Proxy) error {
	host, _, err := net.SplitHostPort(p.Address)
	if err != nil {
		return invalid("the port must be given")
	}
	return g.checkHost(ctx, host)
}

// Proxied is the guard's way out through one proxy: DialContext and Client as the Guard's own, with every
// connection tunnelled through the proxy. Both the proxy's address and the target's are judged: the target's host
// is resolved here and the proxy is asked for an allowed address, never for a name it would resolve itself (a
// proxy on the operator's network would resolve names to it). Make one with Guard.Via; it is safe for concurrent
// use.
type Proxied struct {
	g       *Guard
	p       Proxy
	clients sync.Map // timeout → *http.Client, so that connections are pooled per proxy
}

// Via returns the guard's way out through p.
func (g *Guard) Via(p Proxy) *Proxied { return &Proxied{g: g, p: p} }

// Proxy is the proxy the connections go through.
func (v *Proxied) Proxy() Proxy { return v.p }

// Client returns an HTTP client like Guard.Client whose connections go through the proxy.
func (v *Proxied) Client(timeout time.Duration) *http.Client {
	return v.g.client(v.DialContext, timeout)
}

// DialContext opens a TCP connection to address (host:port) through the proxy. It fails with ErrBlocked when every
// address of the host is one the policy refuses (before the proxy hears of it), ErrUnresolvable when the host has
// none, an error wrapping ErrProxy when the proxy refuses, and the dialer's error when the proxy cannot be reached.
func (v *Proxied) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := v.g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, a := range addrs {
		if !v.g.allows(a) {
			continue
		}
		conn, err := v.tunnel(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		return nil, ErrBlocked
	}
	return nil, firstErr
}

// tunnel asks the proxy for a connection to target, an IP address and port.
func (v *Proxied) tunnel(ctx context.Context, network, target string) (net.Conn, error) {
	if v.p.Scheme == "socks5" {
		var auth *proxy.Auth
		if v.p.Username != "" || v.p.Password != "" {
			auth = &proxy.Auth{User: v.p.Username, Password: v.p.Password}
		}
		d, err := proxy.SOCKS5("tcp", v.p.Address, auth, guardDialer{v.g})
		if err != nil {
			return nil, err
		}
		conn, err := d.(proxy.ContextDialer).DialContext(ctx, network, target)
		var unreached proxyUnreached
		if errors.As(err, &unreached) {
			return nil, unreached.err
		}
		if err != nil {
			// x/net's messages name the step ("username/password authentication failed", "host unreachable").
			return nil, fmt.Errorf("%w: socks5: %s", ErrProxy, strings.TrimPrefix(err.Error(), "socks connect tcp "+v.p.Address+"->"+target+": "))
		}
		return conn, err
	}
	return v.connect(ctx, target)
}

// connect opens an HTTP CONNECT tunnel to target (RFC 9110, section 9.3.6).
func (v *Proxied) connect(ctx context.Context, target string) (net.Conn, error) {
	conn, err := v.g.DialContext(ctx, "tcp", v.p.Address)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(connectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if v.p.Username != "" || v.p.Password != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(v.p.Username+":"+v.p.Password)) + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: http: no CONNECT answer (%v)", ErrProxy, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("%w: http: CONNECT answered %s", ErrProxy, res.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// Bytes of the tunnel that arrived with the answer: read them first.
		return bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// guardDialer connects to the proxy itself under the guard's rules; its errors are marked, so that a proxy that
// could not be reached is told from one that refused.
type guardDialer struct{ g *Guard }

func (d guardDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d guardDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := d.g.DialContext(ctx, network, address)
	if err != nil {
		return nil, proxyUnreached{err}
	}
	return conn, nil
}

// proxyUnreached is the error of a connection to the proxy itself.
type proxyUnreached struct{ err error }

func (e proxyUnreached) Error() string { return e.err.Error() }
func (e proxyUnreached) Unwrap() error { return e.err }

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
