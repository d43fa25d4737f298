package main

import (
	"bufio"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store/storetest"
)

// linkFixture is a workspace, a links:write key and one short link of a database, made through the CLI and the API
// of a running server.
type linkFixture struct {
	key, slug, id string
}

func newLinkFixture(t *testing.T, dbURL string, p *server) linkFixture {
	t.Helper()
	secret := workspaceKey(t, dbURL, "Clicks", "links:write")
	req, _ := http.NewRequest(http.MethodPost, p.url+"/api/v1/links", strings.NewReader(`{"destination_url":"https://example.com/landing"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create link: %d %s", res.StatusCode, body)
	}
	var l struct{ ID, Slug string }
	mustJSON(t, string(body), &l)
	return linkFixture{key: secret, slug: l.Slug, id: l.ID}
}

// hammer sends redirect requests for slug from 8 connections until stopped, and counts the redirects served: a
// request whose answer was not a 302 to the destination (the server was stopping, or gone) was not served.
type hammer struct {
	served, failed atomic.Int64
	stop           chan struct{}
	wg             sync.WaitGroup
	// target is the server's base URL; it can change between phases (a restarted server).
	target atomic.Value
}

func startHammer(base, slug string) *hammer {
	h := &hammer{stop: make(chan struct{})}
	h.target.Store(base)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 8 {
		h.wg.Go(func() {
			for {
				select {
				case <-h.stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, h.target.Load().(string)+"/"+slug, nil)
				req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
				res, err := client.Do(req)
				if err != nil {
					h.failed.Add(1)
					time.Sleep(5 * time.Millisecond) // a server that is down refuses at once
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusFound && res.Header.Get("Location") == "https://example.com/landing" {
					h.served.Add(1)
				} else {
					h.failed.Add(1)
				}
			}
		})
	}
	return h
}

// waitServed waits until at least n more redirects were served than when it was called.
func (h *hammer) waitServed(t *testing.T, n int64) {
	t.Helper()
	want := h.served.Load() + n
	await.Until(t, fmt.Sprintf("%d redirects served", want), h.served.Load, func(n int64) bool { return n >= want })
}

func (h *hammer) finish() int64 {
	close(h.stop)
	h.wg.Wait()
	return h.served.Load()
}

// clickRows counts the click rows of a link straight from the database.
func clickRows(t *testing.T, dbURL, linkID string) int64 {
	t.Helper()
	driver, dsn := "pgx", dbURL
	if strings.HasPrefix(dbURL, "file:") {
		driver, dsn = "sqlite", dbURL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow("SELECT count(*) FROM clicks WHERE link_id = $1", linkID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// metric reads one sample of the server's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A server stopped with SIGTERM in the middle of a load, then restarted, has recorded every redirect it served:
// exactly one click row each.
func TestClicksSurviveASIGTERMRestart(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		dataDir := "SWITCHBOARD_DATA_DIR=" + t.TempDir()
		p := runServer(t, dbURL, "", dataDir)
		f := newLinkFixture(t, dbURL, p)
		h := startHammer(p.url, f.slug)
		h.waitServed(t, 300)
		if logs := p.stop(); !strings.Contains(logs, "draining buffered clicks") {
			t.Fatalf("no drain in the logs:\n%s", logs)
		}
		p = runServer(t, dbURL, strings.TrimPrefix(p.url, "http://"), dataDir)
		h.target.Store(p.url)
		h.waitServed(t, 100)
		served := h.finish()
		p.stop()
		if rows := clickRows(t, dbURL, f.id); rows != served {
			t.Fatalf("%d redirects served, %d clicks recorded", served, rows)
		}
	})
}

// tcpProxy forwards connections to a PostgreSQL server until cut: then it refuses new connections and ends the
// open ones, as an unreachable database does; restore listens again on the same address.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
			go func() { _, _ = io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// ownPostgresDB creates a database for one test on the PostgreSQL server of the tests (dropped at the end) and
// returns its URL, rewritten to go through a proxy the test controls.
func ownPostgresDB(t *testing.T) (proxied string, direct string, proxy *tcpProxy) {
	t.Helper()
	base, err := url.Parse(storetest.PostgresURL(t)) // skips, or fails under CI, without PostgreSQL
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", base.String())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "switchboard_outage_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		admin.Close()
	})
	base.Path = "/" + name
	direct = base.String()
	proxy = newTCPProxy(t, base.Host)
	base.Host = proxy.addr
	return base.String(), direct, proxy
}

// PostgreSQL becomes unreachable in the middle of a load (the test cuts the TCP proxy between the server and the
// database, like a network failure) and comes back: redirects of the cached link go on, their clicks go to the
// spool meanwhile, and in the end every served redirect has exactly one click row and nothing was dropped.
func TestClicksSurviveADatabaseOutage(t *testing.T) {
	proxied, direct, proxy := ownPostgresDB(t)
	p := runServer(t, proxied, "", "SWITCHBOARD_DATA_DIR="+t.TempDir())
	f := newLinkFixture(t, proxied, p)
	h := startHammer(p.url, f.slug)
	h.waitServed(t, 200)
	await.Until(t, "200 clicks persisted before the outage", func() float64 {
		return metric(t, p.url, "switchboard_clicks_persisted_total")
	}, func(n float64) bool { return n >= 200 })

	proxy.cut()
	h.waitServed(t, 500) // served from the cache while the database is away
	await.Until(t, "clicks spooled during the outage", func() float64 {
		return metric(t, p.url, "switchboard_clicks_spooled_total")
	}, func(n float64) bool { return n > 0 })
	proxy.restore()
	h.waitServed(t, 200)
	served := h.finish()
	await.Equal(t, "the spool to be replayed", func() float64 { return metric(t, p.url, "switchboard_clicks_spool_bytes") }, 0)
	spooled, replayed := metric(t, p.url, "switchboard_clicks_spooled_total"), metric(t, p.url, "switchboard_clicks_replayed_total")
	if dropped := metric(t, p.url, "switchboard_clicks_dropped_total"); dropped != 0 {
		t.Errorf("dropped = %v", dropped)
	}
	p.stop()
	if rows := clickRows(t, direct, f.id); rows != served {
		t.Fatalf("%d redirects served, %d clicks recorded (%v spooled, %v replayed)", served, rows, spooled, replayed)
	}
	if spooled >= float64(served) {
		t.Errorf("%v of %d clicks spooled: the database took none", spooled, served)
	}
	t.Logf("%d redirects served; %v clicks spooled during the outage, %v replayed", served, spooled, replayed)
}

// The crash window of kill -9: what was spooled survives and is replayed at the next start; what was only in memory
// is lost. The test makes the window visible with an hour-long write interval and a database that is away.
func TestKill9CrashWindow(t *testing.T) {
	proxied, direct, proxy := ownPostgresDB(t)
	dataDir := "SWITCHBOARD_DATA_DIR=" + t.TempDir()

	// Clicks spooled during an outage survive kill -9.
	p := runServer(t, proxied, "", dataDir)
	f := newLinkFixture(t, proxied, p)
	h := startHammer(p.url, f.slug)
	h.waitServed(t, 50)
	proxy.cut()
	h.waitServed(t, 200)
	served := h.finish()
	await.Equal(t, "no click left in memory", func() float64 { return metric(t, p.url, "switchboard_clicks_in_flight") }, 0)
	p.kill()
	proxy.restore()
	// Links answer on the host of the server's base URL: restarts keep the address.
	addr := strings.TrimPrefix(p.url, "http://")
	p = runServer(t, proxied, addr, dataDir)
	await.Equal(t, "a click for every served redirect after the restart", func() int64 { return clickRows(t, direct, f.id) }, served)
	p.stop()

	// Clicks still in memory (an hour-long interval keeps them there) die with the process.
	p = runServer(t, proxied, addr, dataDir, "SWITCHBOARD_CLICK_INTERVAL=1h", "SWITCHBOARD_CLICK_BATCH_SIZE=100000")
	h = startHammer(p.url, f.slug)
	h.waitServed(t, 20)
	inMemory := h.finish()
	p.kill()
	p = runServer(t, proxied, addr, dataDir)
	if rows := clickRows(t, direct, f.id); rows != served {
		t.Fatalf("%d clicks, want the %d of before: %d clicks in memory were killed with the process", rows, served, inMemory)
	}
	p.stop()
	t.Logf("kill -9: %d spooled clicks survived, %d clicks in memory were lost", served, inMemory)
}

// holdMigrations takes the lock serve's migrations take (store's lockMigrations: an flock beside an SQLite file, an
// advisory lock on PostgreSQL), so that a server started meanwhile waits in its start; release lets it go on.
func holdMigrations(t *testing.T, dbURL string) (release func()) {
	t.Helper()
	if path, ok := strings.CutPrefix(dbURL, "file:"); ok {
		f, err := os.OpenFile(path+".migrate.lock", os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return func() { _ = f.Close() }
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "SELECT pg_advisory_lock($1)", int64(0x5377_6974_6368)); err != nil {
		t.Fatal(err)
	}
	return func() { _ = conn.Close(); _ = db.Close() }
}

// A visitor who comes while the server starts (its address taken, its database not ready: a restart under
// traffic) is answered 503 with Retry-After at once, not kept waiting in the accept queue: a request the visitor
// gave up on was otherwise served, and counted, once the server was up — more clicks than redirects the visitors
// saw (TestClicksSurviveASIGTERMRestart once recorded 487 for 479: one for each of its 8 connections).
func TestNoClickForAVisitorTheStartKeptWaiting(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		p := runServer(t, dbURL, "")
		f := newLinkFixture(t, dbURL, p)
		p.stop()

		release := holdMigrations(t, dbURL)
		p = startServer(t, dbURL, strings.TrimPrefix(p.url, "http://"))
		await.Equal(t, "the restarted server to take its address", func() error {
			c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
			if err == nil {
				c.Close()
			}
			return err
		}, nil)
		visitor := &http.Client{Timeout: 2 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := visitor.Get(p.url + "/" + f.slug)
		if err != nil {
			t.Fatalf("a visit while the server starts: %v (it waited instead of being told to come back)", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("a visit while the server starts: %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
		}
		release()
		p.awaitReady()
		for range 3 {
			res, err := visitor.Get(p.url + "/" + f.slug)
			if err != nil || res.StatusCode != http.StatusFound {
				t.Fatalf("a visit once ready: %v %v", res, err)
			}
			res.Body.Close()
		}
		p.stop()
		if rows := clickRows(t, dbURL, f.id); rows != 3 {
			t.Fatalf("%d clicks recorded for 3 redirects served", rows)
		}
	})
}
