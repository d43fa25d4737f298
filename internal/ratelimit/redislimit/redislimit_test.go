package redislimit_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/ratelimit/redislimit"
	"github.com/switchboard/switchboard/internal/ratelimit/redislimit/redistest"
)

// replicas opens n connections to one Redis under one prefix, as n server processes would.
func replicas(t *testing.T, url string, n int) []*redislimit.Redis {
	t.Helper()
	prefix := redistest.Prefix(t, url)
	rs := make([]*redislimit.Redis, n)
	for i := range rs {
		r, err := redislimit.Open(redislimit.Config{URL: url, Prefix: prefix, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		rs[i] = r
	}
	return rs
}

func TestQuotaIsSharedByReplicas(t *testing.T) {
	url := redistest.URL(t)
	p := ratelimit.Policy{Name: "key", Quota: 40, Window: time.Hour}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, r := range replicas(t, url, 3) {
		l := r.Limiter(ratelimit.New())
		for range 4 {
			wg.Go(func() {
				for range 25 {
					if l.Take("k:key_1", p, time.Now()).Allowed {
						allowed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	// 300 requests over 3 replicas: exactly the quota (the burst) is allowed; one request an hour/40 refills.
	if got := allowed.Load(); got < int64(p.Quota) || got > int64(p.Quota)+1 {
		t.Errorf("%d of 300 requests allowed across 3 replicas, want the quota %d", got, p.Quota)
	}
}

func TestDecisionsMatchTheLocalLimiter(t *testing.T) {
	url := redistest.URL(t)
	l := replicas(t, url, 1)[0].Limiter(ratelimit.New())
	p := ratelimit.Policy{Quota: 5, Window: time.Hour}
	interval := p.Window / time.Duration(p.Quota)
	for i := range 5 {
		d := l.Take("k", p, time.Now())
		wantReset := time.Duration(i+1) * interval
		if !d.Allowed || d.Remaining != 4-i || d.RetryAfter != 0 || d.Reset > wantReset || d.Reset < wantReset-time.Second {
			t.Errorf("request %d = %+v, want allowed with %d left and a reset of about %v", i+1, d, 4-i, wantReset)
		}
	}
	d := l.Take("k", p, time.Now())
	if d.Allowed || d.Remaining != 0 || d.RetryAfter > interval || d.RetryAfter < interval-time.Second {
		t.Errorf("request 6 = %+v, want refused with a retry after about %v", d, interval)
	}
	if peek := l.Peek("k", p, time.Now()); peek.Allowed {
		t.Errorf("Peek after the quota = %+v, want refused", peek)
	}
	l.Refund("k", p)
	if peek := l.Peek("k", p, time.Now()); !peek.Allowed || peek.Remaining != 1 {
		t.Errorf("Peek after a refund = %+v, want one request left", peek)
	}
	if d := l.Take("k", p, time.Now()); !d.Allowed {
		t.Errorf("Take after a refund = %+v, want allowed", d)
	}
}

// A request refused by the workspace's quota spends nothing of the key's, in one round trip.
func TestTakeAllSpendsAllOrNothing(t *testing.T) {
	url := redistest.URL(t)
	l := replicas(t, url, 1)[0].Limiter(ratelimit.New())
	key := ratelimit.Policy{Name: "key", Quota: 10, Window: time.Hour}
	ws := ratelimit.Policy{Name: "workspace", Quota: 3, Window: time.Hour}
	reqs := []ratelimit.Request{{Key: "k:a", Policy: key}, {Key: "w:x", Policy: ws}}
	ds := make([]ratelimit.Decision, 2)
	for i := range 3 {
		l.TakeAll(reqs, time.Now(), ds)
		if !ds[0].Allowed || !ds[1].Allowed || ds[0].Remaining != 9-i || ds[1].Remaining != 2-i {
			t.Fatalf("request %d = %+v, want both allowed", i+1, ds)
		}
	}
	l.TakeAll(reqs, time.Now(), ds)
	if !ds[0].Allowed || ds[1].Allowed || ds[1].RetryAfter <= 0 || ds[0].Remaining != 7 {
		t.Errorf("request 4 = %+v, want the workspace to refuse and the key to keep 7", ds)
	}
	if peek := l.Peek("k:a", key, time.Now()); peek.Remaining != 7 {
		t.Errorf("the key after a refused request has %d left, want 7 (nothing spent)", peek.Remaining)
	}
}

func TestNoncesAreSharedByReplicas(t *testing.T) {
	url := redistest.URL(t)
	rs := replicas(t, url, 2)
	a, b := rs[0].Nonces(ratelimit.NewNonces()), rs[1].Nonces(ratelimit.NewNonces())
	if !a.Claim("n1") {
		t.Fatal("a fresh nonce was refused")
	}
	if b.Claim("n1") || a.Claim("n1") {
		t.Error("a nonce claimed on one replica was claimed again")
	}
	b.Release("n1")
	if !a.Claim("n1") {
		t.Error("a released nonce could not be claimed again")
	}
}

// flakyProxy forwards TCP connections to Redis until it is stopped, and again once it is started.
type flakyProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	p := &flakyProxy{t: t, target: target}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *flakyProxy) start() {
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

func (p *flakyProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// syncBuffer is a log destination safe for the limiter's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// While Redis does not answer, requests are decided in process — never refused for it — and a metric and one log
// line say so; when it answers again the limits are shared again.
func TestUnreachableRedisFallsBackToTheProcess(t *testing.T) {
	url := redistest.URL(t)
	target := strings.TrimPrefix(url, "redis://")
	target = target[:strings.IndexByte(target, '/')]
	proxy := newFlakyProxy(t, target)
	db := url[strings.LastIndexByte(url, '/'):]
	var logs syncBuffer
	r, err := redislimit.Open(redislimit.Config{URL: "redis://" + proxy.addr + db, Prefix: redistest.Prefix(t, url),
		Timeout: 200 * time.Millisecond, RetryAfter: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	fallbacks, up := r.Collectors()[0], r.Collectors()[1]
	l, nonces := r.Limiter(ratelimit.New()), r.Nonces(ratelimit.NewNonces())
	p := ratelimit.Policy{Name: "key", Quota: 5, Window: time.Hour}

	for range 2 {
		if !l.Take("k", p, time.Now()).Allowed {
			t.Fatal("a request within the quota was refused while Redis answers")
		}
	}
	if testutil.ToFloat64(up) != 1 || testutil.ToFloat64(fallbacks) != 0 {
		t.Fatalf("redis_up %v, fallbacks %v while Redis answers", testutil.ToFloat64(up), testutil.ToFloat64(fallbacks))
	}

	proxy.stop()
	// The process's own quota is fresh: all 5 pass although Redis already holds 2, and the 6th is refused by the
	// process, not for want of Redis.
	for i := range 5 {
		if d := l.Take("k", p, time.Now()); !d.Allowed {
			t.Fatalf("request %d during the outage refused: %+v", i+1, d)
		}
	}
	if d := l.Take("k", p, time.Now()); d.Allowed {
		t.Error("the in-process quota did not hold during the outage")
	}
	if !nonces.Claim("during") || nonces.Claim("during") {
		t.Error("nonces during the outage: want one claim, then a refusal")
	}
	if testutil.ToFloat64(up) != 0 || testutil.ToFloat64(fallbacks) < 6 {
		t.Errorf("during the outage: redis_up %v, fallbacks %v; want 0 and at least 6",
			testutil.ToFloat64(up), testutil.ToFloat64(fallbacks))
	}
	if n := strings.Count(logs.String(), "redis does not answer"); n != 1 {
		t.Errorf("%d log lines about the outage, want 1:\n%s", n, logs.String())
	}

	proxy.start()
	// Back to Redis's state: 2 spent there, so 3 are left.
	await.Until(t, "the limiter to use Redis again", func() float64 {
		l.Peek("k", p, time.Now())
		return testutil.ToFloat64(up)
	}, func(v float64) bool { return v == 1 })
	if d := l.Peek("k", p, time.Now()); !d.Allowed || d.Remaining != 3 {
		t.Errorf("after the outage: %+v, want Redis's quota with 3 left", d)
	}
	if !strings.Contains(logs.String(), "redis answers again") {
		t.Errorf("no log line about the recovery:\n%s", logs.String())
	}
}

func TestOpenRefusesAMalformedURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/notanumber", "127.0.0.1:6379"} {
		if _, err := redislimit.Open(redislimit.Config{URL: u}); err == nil {
			t.Errorf("Open(%q) succeeded, want an error", u)
		}
	}
}
