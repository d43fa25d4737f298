// Package receivertest is a webhook receiver for tests: an HTTP server on a loopback port that records every
// request it gets, counts the connections that reach it, and answers as the test says. Only tests import it.
package receivertest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Request is one request the receiver got, as it arrived.
type Request struct {
	Method string
	Path   string
	Header http.Header // a clone, safe to keep
	Body   []byte
	At     time.Time // when the request arrived, before its body was read
}

// Handler answers the n-th request (from 0) the receiver got; the request is already recorded, and its body
// can still be read.
type Handler func(n int, w http.ResponseWriter, r *http.Request)

// Receiver is a webhook receiver on a loopback port. The embedded server gives its URL and lets a test close it
// early; it also closes when the test ends. All methods are safe for concurrent use.
type Receiver struct {
	*httptest.Server
	handle Handler
	status atomic.Int32
	body   atomic.Pointer[string]
	// conns counts the connections that reached it, whether or not a request followed (a TLS handshake to this
	// plain-HTTP server fails, but its connection counts).
	conns atomic.Int64

	mu  sync.Mutex
	got []Request
}

// New serves a receiver on a new loopback port. handle answers each request; nil answers with the receiver's
// status (200 unless SetStatus changes it) and body ("ok" unless SetBody changes it).
func New(t testing.TB, handle Handler) *Receiver {
	t.Helper()
	return start(t, httptest.NewUnstartedServer(nil), handle)
}

// Serve serves a receiver on ln, which it closes when the test ends.
func Serve(t testing.TB, ln net.Listener, handle Handler) *Receiver {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	_ = srv.Listener.Close()
	srv.Listener = ln
	return start(t, srv, handle)
}

func start(t testing.TB, srv *httptest.Server, handle Handler) *Receiver {
	rc := &Receiver{Server: srv, handle: handle}
	rc.status.Store(http.StatusOK)
	rc.SetBody("ok")
	srv.Config.Handler = http.HandlerFunc(rc.serve)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.got)
	rc.got = append(rc.got, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: at})
	rc.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body)) // the handler may read the body too
	if rc.handle != nil {
		rc.handle(n, w, r)
		return
	}
	w.WriteHeader(int(rc.status.Load()))
	_, _ = io.WriteString(w, *rc.body.Load())
}

// SetStatus sets the status the receiver answers with when it has no handler.
func (rc *Receiver) SetStatus(code int) { rc.status.Store(int32(code)) }

// SetBody sets the body the receiver answers with when it has no handler.
func (rc *Receiver) SetBody(body string) { rc.body.Store(&body) }

// Requests is a copy of the requests received so far, in arrival order.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// Count is how many requests the receiver got.
func (rc *Receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// Conns is how many connections reached the receiver, whether or not a request followed.
func (rc *Receiver) Conns() int64 { return rc.conns.Load() }

// Statuses answers the first requests with the given statuses, then 200, each with a short body.
func Statuses(codes ...int) Handler {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < len(codes) {
			w.WriteHeader(codes[n])
		}
		_, _ = io.WriteString(w, "receiver says hi")
	}
}
