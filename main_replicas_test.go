package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/ratelimit/redislimit/redistest"
	"github.com/switchboard/switchboard/store/storetest"
)

// proxyPeer is the address HAProxy connects to the replicas from: the only one they trust to name the client.
const proxyPeer = "127.0.0.2"

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// requireHAProxy returns the path of Debian's HAProxy, or skips (fails under CI) without it.
func requireHAProxy(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is required when CI is set (make proxy installs Debian's)")
		}
		t.Skip("haproxy is not installed (make proxy installs Debian's)")
	}
	return bin
}

// startHAProxy runs HAProxy in the foreground on addr in front of backends: round robin per request, adding
// X-Forwarded-For, connecting from proxyPeer.
func startHAProxy(t testing.TB, addr string, backends []string) {
	t.Helper()
	bin := requireHAProxy(t)
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server r%d %s source %s\n", i+1, b, proxyPeer)
	}
	cfg := fmt.Sprintf(`global
  maxconn 4096
defaults
  mode http
  option forwardfor
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend front
  bind %s
  default_backend replicas
backend replicas
  balance roundrobin
%s`, addr, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", logs.String())
		}
	})
	await.Equal(t, "haproxy to answer", func() string {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err.Error()
		}
		res.Body.Close()
		return res.Status
	}, "200 OK")
}

// cluster is n serve processes on one PostgreSQL database and one Redis, behind HAProxy.
type cluster struct {
	proxy    string // base URL of HAProxy
	replicas []*server
	dbURL    string
}

// startCluster starts the replicas side by side (so that they migrate the new database at once), then the proxy.
func startCluster(t *testing.T, n int, env ...string) *cluster {
	t.Helper()
	requireHAProxy(t)
	c := &cluster{dbURL: storetest.EmptyPostgresURL(t)}
	redisURL := redistest.URL(t)
	proxyAddr := freeAddr(t)
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	c.replicas = make([]*server, n)
	var wg sync.WaitGroup
	for i, addr := range addrs {
		dataDir := t.TempDir()
		wg.Go(func() {
			c.replicas[i] = runServer(t, c.dbURL, addr, append([]string{
				"SWITCHBOARD_REDIS_URL=" + redisURL, "SWITCHBOARD_TRUSTED_PROXIES=" + proxyPeer + "/32",
				// Sharing is what is shown here; on a loaded machine a round trip may exceed the default 100 ms,
				// and the limits would be decided in process (the fallback, tested in redislimit).
				"SWITCHBOARD_REDIS_TIMEOUT=10s",
				// The console's origin is the proxy's.
				"SWITCHBOARD_BASE_URL=http://" + proxyAddr, "SWITCHBOARD_DATA_DIR=" + dataDir,
				"SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true", "SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8",
			}, env...)...)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	startHAProxy(t, proxyAddr, addrs)
	c.proxy = "http://" + proxyAddr
	return c
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// apiCall sends an API request with key and returns the status, the problem code (if any) and the body.
func apiCall(t *testing.T, method, u, key string, body any) (int, string, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, u, r)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	return res.StatusCode, p.Code, b
}

// requestsServed reads how many requests of operation a replica counted, from its own /metrics.
func requestsServed(t *testing.T, s *server, operation string) int {
	t.Helper()
	res, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	re := regexp.MustCompile(`(?m)^switchboard_http_requests_total\{[^}]*operation="` + operation + `"[^}]*\} (\d+)`)
	n := 0
	for _, m := range re.FindAllSubmatch(b, -1) {
		var v int
		fmt.Sscan(string(m[1]), &v)
		n += v
	}
	return n
}

func TestReplicasBehindAProxy(t *testing.T) {
	const perMinute = 30
	c := startCluster(t, 3, fmt.Sprintf("SWITCHBOARD_RATE_LIMIT_PER_MINUTE=%d", perMinute))
	out, stderr, code := cli(t, c.dbURL, "workspace", "create", "--name", "Replicas", "--json")
	if code != 0 {
		t.Fatalf("workspace create: %s", stderr)
	}
	var ws struct{ ID string }
	mustJSON(t, out, &ws)
	newKey := func(scopes string) (id, secret string) {
		out, stderr, code := cli(t, c.dbURL, "key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", scopes, "--json")
		if code != 0 {
			t.Fatalf("key create: %s", stderr)
		}
		var k struct{ ID, Secret string }
		mustJSON(t, out, &k)
		return k.ID, k.Secret
	}

	t.Run("a key's quota holds across replicas", func(t *testing.T) {
		_, key := newKey("models:read")
		before := make([]int, len(c.replicas))
		for i, s := range c.replicas {
			before[i] = requestsServed(t, s, "listModels")
		}
		const sent = 120
		var allowed, limited atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for range sent / 6 {
					switch status, code, _ := apiCall(t, "GET", c.proxy+"/api/v1/models", key, nil); {
					case status == 200:
						allowed.Add(1)
					case status == 429 && code == "rate_limited":
						limited.Add(1)
					default:
						t.Errorf("answer %d %s", status, code)
					}
				}
			})
		}
		wg.Wait()
		// GCRA allows a burst of the whole quota, then one request every window/quota (2 s here).
		refill := int64(time.Since(start)/(time.Minute/perMinute)) + 1
		if got := allowed.Load(); got < perMinute || got > perMinute+refill {
			t.Errorf("%d of %d requests allowed across 3 replicas in %v, want the burst %d plus at most %d refilled",
				got, sent, time.Since(start).Round(time.Millisecond), perMinute, refill)
		}
		for i, s := range c.replicas {
			if n := requestsServed(t, s, "listModels") - before[i]; n < sent/6 {
				t.Errorf("replica %d served %d of the %d requests: the proxy did not spread them", i+1, n, sent)
			}
		}
		t.Logf("%d allowed, %d limited across 3 replicas", allowed.Load(), limited.Load())
	})

	t.Run("a revoked key fails on every replica at the next request", func(t *testing.T) {
		id, key := newKey("models:read")
		for i, s := range c.replicas {
			if status, code, _ := apiCall(t, "GET", s.url+"/api/v1/models", key, nil); status != 200 {
				t.Fatalf("replica %d before the revocation: %d %s", i+1, status, code)
			}
		}
		if _, stderr, code := cli(t, c.dbURL, "key", "revoke", id); code != 0 {
			t.Fatalf("key revoke: %s", stderr)
		}
		for i, s := range c.replicas {
			if status, code, _ := apiCall(t, "GET", s.url+"/api/v1/models", key, nil); status != 401 || code != "api_key_revoked" {
				t.Errorf("replica %d at the next request: %d %s, want 401 api_key_revoked", i+1, status, code)
			}
		}
	})

	_, writer := newKey("links:write,webhooks:write")

	t.Run("a link edit is visible on every replica within 1 s", func(t *testing.T) {
		slug := fmt.Sprintf("rep-%d", time.Now().UnixNano())
		status, code, body := apiCall(t, "POST", c.proxy+"/api/v1/links", writer,
			map[string]any{"destination_url": "https://example.com/before", "slug": slug})
		if status != 201 {
			t.Fatalf("create link: %d %s %s", status, code, body)
		}
		var link struct{ ID string }
		_ = json.Unmarshal(body, &link)
		location := func(s *server) string {
			res, err := noRedirects.Get(s.url + "/" + slug)
			if err != nil {
				return err.Error()
			}
			res.Body.Close()
			return res.Header.Get("Location")
		}
		for i, s := range c.replicas { // every replica caches the link
			if got := location(s); got != "https://example.com/before" {
				t.Fatalf("replica %d redirects to %q", i+1, got)
			}
		}
		status, code, body = apiCall(t, "PATCH", c.proxy+"/api/v1/links/"+link.ID, writer,
			map[string]any{"destination_url": "https://example.com/after"})
		if status != 200 {
			t.Fatalf("edit link: %d %s %s", status, code, body)
		}
		edited := time.Now()
		var slowest time.Duration
		for i, s := range c.replicas {
			await.Equal(t, fmt.Sprintf("replica %d to redirect to the new destination", i+1),
				func() string { return location(s) }, "https://example.com/after")
			slowest = max(slowest, time.Since(edited))
		}
		if slowest > time.Second {
			t.Errorf("the edit reached the last replica after %v, want within 1 s", slowest)
		}
		t.Logf("the edit was visible on all 3 replicas after %v", slowest.Round(time.Millisecond))
	})

	t.Run("no webhook delivery is duplicated", func(t *testing.T) {
		var mu sync.Mutex
		received := map[string]int{}
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			received[r.Header.Get("webhook-id")]++
			mu.Unlock()
		}))
		defer receiver.Close()
		status, code, body := apiCall(t, "POST", c.proxy+"/api/v1/webhooks", writer,
			map[string]any{"url": receiver.URL + "/hook", "events": []string{"link.created"}})
		if status != 201 {
			t.Fatalf("register webhook: %d %s %s", status, code, body)
		}
		const events = 300
		items := make([]map[string]any, events)
		for i := range items {
			items[i] = map[string]any{"destination_url": fmt.Sprintf("https://example.com/%d", i)}
		}
		if status, code, body := apiCall(t, "POST", c.proxy+"/api/v1/links/bulk", writer, map[string]any{"links": items}); status != 200 && status != 201 && status != 207 {
			t.Fatalf("bulk create: %d %s %s", status, code, body)
		}
		db, err := sql.Open("pgx", c.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// Once every delivery is recorded as succeeded nothing can send it again: then count what arrived.
		await.Equal(t, "every delivery to succeed", func() int {
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM webhook_deliveries WHERE workspace_id = $1 AND status = 'succeeded'`,
				ws.ID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}, events)
		mu.Lock()
		defer mu.Unlock()
		var total int
		for id, n := range received {
			total += n
			if n != 1 {
				t.Errorf("event %s delivered %d times", id, n)
			}
		}
		if len(received) != events || total != events {
			t.Errorf("%d requests for %d events, want each of the %d events once", total, len(received), events)
		}
		var senders int
		for _, s := range c.replicas {
			if attemptsMade(t, s) > 0 {
				senders++
			}
		}
		t.Logf("%d events delivered once each, by %d of the 3 replicas", len(received), senders)
	})

	t.Run("a console session works on every replica; client addresses come from the trusted proxy", func(t *testing.T) {
		email := fmt.Sprintf("replicas-%d@example.com", time.Now().UnixNano())
		session := consoleSignUp(t, c.proxy, email, "198.51.100.7")
		for i, s := range c.replicas {
			req, _ := http.NewRequest("GET", s.url+"/user/workspaces", nil)
			req.AddCookie(session)
			res, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(b), email) {
				t.Errorf("replica %d with the session: %d, want the workspaces page of %s", i+1, res.StatusCode, email)
			}
		}
		db, err := sql.Open("pgx", c.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var ip string
		if err := db.QueryRow(`SELECT s.ip FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1`, email).Scan(&ip); err != nil {
			t.Fatal(err)
		}
		// Not the proxy's own address (the header was believed) and not the address the client claimed (HAProxy
		// appended the real one, and only the proxy is trusted).
		if ip != "127.0.0.1" {
			t.Errorf("the session through the proxy was opened from %q, want the client's 127.0.0.1", ip)
		}
		// Straight to a replica, the same claim is ignored: the client is no trusted proxy.
		direct := fmt.Sprintf("direct-%d@example.com", time.Now().UnixNano())
		consoleSignUp(t, c.replicas[0].url, direct, "198.51.100.7")
		if err := db.QueryRow(`SELECT s.ip FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1`, direct).Scan(&ip); err != nil {
			t.Fatal(err)
		}
		if ip != "127.0.0.1" {
			t.Errorf("a direct sign-up claiming X-Forwarded-For was recorded from %q, want the connection's 127.0.0.1", ip)
		}
	})
}

// attemptsMade reads how many webhook attempts a replica made, from its own /metrics.
func attemptsMade(t *testing.T, s *server) int {
	t.Helper()
	res, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^switchboard_webhook_attempts_total\{[^}]*\} (\d+)`).FindAllSubmatch(b, -1) {
		var v int
		fmt.Sscan(string(m[1]), &v)
		n += v
	}
	return n
}

var csrfInput = regexp.MustCompile(`name="csrf_token"[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="csrf_token"`)

// consoleSignUp signs up through base as a browser would, claiming to be forwardedFor, and returns the session
// cookie.
func consoleSignUp(t *testing.T, base, email, forwardedFor string) *http.Cookie {
	t.Helper()
	res, err := http.Get(base + "/user/sign-up")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfInput.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-up page:\n%s", page)
	}
	token := string(m[1]) + string(m[2])
	form := url.Values{"csrf_token": {token}, "email": {email}, "password": {"correct horse battery staple"}}
	req, _ := http.NewRequest("POST", base+"/user/sign-up", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", forwardedFor)
	for _, ck := range res.Cookies() {
		req.AddCookie(ck)
	}
	res, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "sb_session" && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("sign-up through %s answered %d without a session", base, res.StatusCode)
	return nil
}
