package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// webhookEnv lets the servers of these tests deliver to receivers on the loopback interface.
var webhookEnv = []string{"SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true", "SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8"}

// fixture sets up webhooks directly in the database the servers use, sealing secrets with the servers' key.
type fixture struct {
	t   *testing.T
	db  *store.DB
	box *sealbox.Box
	ws  store.Workspace
}

func newFixture(t *testing.T, dbURL string) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(testSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	box, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := db.Workspaces.Create(ctx, "webhooks")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: db, box: box, ws: ws}
}

// endpoint registers an endpoint for url subscribed to every event and returns it with its secret.
func (f *fixture) endpoint(url string) (store.WebhookEndpoint, string) {
	f.t.Helper()
	secret, err := webhook.NewSecret()
	if err != nil {
		f.t.Fatal(err)
	}
	e, err := f.db.Webhooks.Create(context.Background(), store.NewWebhookEndpoint{WorkspaceID: f.ws.ID, URL: url,
		Events: []string{"*"}, SealSecret: func(id string) string { return f.box.Seal([]byte(secret), []byte(id)) }})
	if err != nil {
		f.t.Fatal(err)
	}
	return e, secret
}

func (f *fixture) emit() store.Event {
	f.t.Helper()
	var ev store.Event
	err := f.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		var err error
		ev, err = events.NewOutbox(f.db, events.Builtin()).EmitJSON(ctx, tx, f.ws.ID, "link.created", []byte(`{"link_id":"lnk_1"}`))
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

// succeeded counts the workspace's succeeded deliveries.
func (f *fixture) succeeded() int {
	n, err := f.db.Bun().NewSelect().Table("webhook_deliveries").
		Where("workspace_id = ? AND status = ?", f.ws.ID, store.DeliverySucceeded).Count(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return int(n)
}

// hit is one request a test receiver got.
type hit struct {
	path   string
	header http.Header
	body   []byte
}

// hits records the requests of a test receiver.
type hits struct {
	mu  sync.Mutex
	got []hit
}

func (h *hits) add(r *http.Request) int {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, hit{path: r.URL.Path, header: r.Header.Clone(), body: body})
	return len(h.got) - 1
}

func (h *hits) all() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hit(nil), h.got...)
}

// A server killed (SIGKILL) while a delivery is in flight leaves it leased; restarted, it retries the delivery once
// the lease has run out, with the same webhook-id, and records it once, as succeeded.
func TestKilledMidDeliveryRetriedAfterRestart(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL)
		var got hits
		arrived := make(chan struct{})
		rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if got.add(r) == 0 {
				close(arrived)
				<-r.Context().Done() // held until the server dies and its connection closes
			}
		}))
		t.Cleanup(rc.Close)
		e, secret := f.endpoint(rc.URL + "/hook")
		env := append([]string{"SWITCHBOARD_WEBHOOK_TIMEOUT=2s", "SWITCHBOARD_WEBHOOK_LEASE=3s"}, webhookEnv...)

		first := runServer(t, dbURL, "", env...)
		ev := f.emit()
		await.Receive(t, "the delivery", arrived)
		first.kill()

		second := runServer(t, dbURL, "", env...)
		await.Equal(t, "the delivery to succeed after the restart", f.succeeded, 1)
		hs := got.all()
		if len(hs) != 2 {
			t.Fatalf("the receiver got %d requests, want 2 (the one cut off, the retry)", len(hs))
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hs {
			if id := h.header.Get("webhook-id"); id != ev.ID {
				t.Errorf("request %d has webhook-id %q, want %q", i, id, ev.ID)
			}
			if err := wh.Verify(h.body, h.header); err != nil {
				t.Errorf("request %d does not verify: %v", i, err)
			}
		}
		var d store.Delivery
		if err := f.db.Bun().NewSelect().Model(&d).Where("d.event_id = ? AND d.endpoint_id = ?", ev.ID, e.ID).
			Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		attempts, _ := f.db.Deliveries.Attempts(context.Background(), d.ID)
		if d.Attempts != 1 || len(attempts) != 1 || attempts[0].StatusCode == nil || *attempts[0].StatusCode != 200 {
			t.Errorf("delivery %+v with attempts %+v; want one attempt recorded, the successful retry", d, attempts)
		}
		second.stop()
	})
}

var deliveredMetric = regexp.MustCompile(`^switchboard_webhook_attempts_total\{[^}]*outcome="delivered"[^}]*\} (\S+)$`)

// delivered reads a server's count of delivered attempts from /metrics, and checks that the queue gauges are there.
func delivered(t *testing.T, s *server) int {
	t.Helper()
	res, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	total, found := 0, false
	names := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if m := deliveredMetric.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			total, found = total+int(v), true
		}
		if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(name, "#") {
			names[name] = true
		}
	}
	if !found {
		t.Fatalf("no switchboard_webhook_attempts_total{outcome=\"delivered\"} in %s/metrics", s.url)
	}
	for _, g := range []string{"switchboard_webhook_queue_depth", "switchboard_webhook_oldest_pending_seconds"} {
		if !names[g] {
			t.Errorf("no %s in %s/metrics", g, s.url)
		}
	}
	return total
}

// Two servers on one PostgreSQL database share the deliveries: every event reaches every endpoint exactly once (no
// lease runs out in this test, so no delivery may be duplicated) and both servers do part of the work.
func TestTwoServersShareDeliveries(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	f := newFixture(t, dbURL)
	var got hits
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.add(r)
		time.Sleep(10 * time.Millisecond) // a receiver doing some work, so that neither server can take everything
	}))
	t.Cleanup(rc.Close)
	const endpoints, events = 4, 100
	for i := range endpoints {
		f.endpoint(rc.URL + "/hook/" + strconv.Itoa(i))
	}
	env := append([]string{"SWITCHBOARD_WEBHOOK_LEASE=10m"}, webhookEnv...)
	a, b := runServer(t, dbURL, "", env...), runServer(t, dbURL, "", env...)
	ids := map[string]bool{}
	for range events {
		ids[f.emit().ID] = true
	}
	await.Equal(t, "every delivery to succeed", f.succeeded, endpoints*events)

	seen := map[string]int{}
	for _, h := range got.all() {
		id := h.header.Get("webhook-id")
		if !ids[id] {
			t.Errorf("unknown webhook-id %q", id)
		}
		seen[h.path+" "+id]++
	}
	for key, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", key, n)
		}
	}
	if len(seen) != endpoints*events {
		t.Errorf("%d distinct deliveries reached the receiver, want %d", len(seen), endpoints*events)
	}
	byA, byB := delivered(t, a), delivered(t, b)
	if byA == 0 || byB == 0 || byA+byB != endpoints*events {
		t.Errorf("server A delivered %d, server B %d; want both to share the %d deliveries", byA, byB, endpoints*events)
	}
}

// On SQLite a server without SWITCHBOARD_SECRET_KEY generates the key in the data directory, says so in one log line
// that names the file and never the key, and uses the same key after a restart; on PostgreSQL it refuses to start
// without one, before touching the database.
func TestServerSecretKey(t *testing.T) {
	dir := t.TempDir()
	dbURL := "file:" + filepath.Join(dir, "switchboard.db")
	run := func() string {
		s := runServer(t, dbURL, "", "SWITCHBOARD_SECRET_KEY=")
		return s.stop()
	}
	logs := run()
	key, err := os.ReadFile(filepath.Join(dir, sealbox.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs, "back it up") != 1 || !strings.Contains(logs, filepath.Join(dir, sealbox.KeyFile)) ||
		strings.Contains(logs, strings.TrimSpace(string(key))) {
		t.Errorf("first start logs:\n%s", logs)
	}
	if logs := run(); strings.Contains(logs, "back it up") {
		t.Errorf("a restart generated another key:\n%s", logs)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, sealbox.KeyFile)); string(again) != string(key) {
		t.Error("the key file changed")
	}

	pgURL := storetest.PostgresURL(t)
	_, stderr, code := cli(t, pgURL, "serve", "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "SWITCHBOARD_SECRET_KEY") {
		t.Errorf("PostgreSQL without a key: exit %d, %s", code, stderr)
	}
}

// Malformed webhook settings stop serve with a message naming the setting.
func TestServeRejectsBadWebhookSettings(t *testing.T) {
	dbURL := storetest.SQLiteURL(t)
	tests := []struct {
		env, msg string
	}{
		{"SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE=0s,5m,5s", "is shorter than the one before"},
		{"SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=10.1.2.3/8", "bits set beyond its prefix length"},
		{"SWITCHBOARD_WEBHOOK_TIMEOUT=soon", `SWITCHBOARD_WEBHOOK_TIMEOUT="soon"`},
		{"SWITCHBOARD_WEBHOOK_LEASE=10s", "must exceed --webhook-timeout"},
		{"SWITCHBOARD_WEBHOOK_WORKERS=0", "--webhook-workers must be at least 1"},
		{"SWITCHBOARD_WEBHOOK_ALLOW_HTTP=maybe", "SWITCHBOARD_WEBHOOK_ALLOW_HTTP"},
		{"SWITCHBOARD_WEBHOOK_RETENTION=-1h", "--webhook-retention must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, tt.env)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tt.msg) {
				t.Errorf("exit %v, output %q; want exit 2 and %q", err, out, tt.msg)
			}
		})
	}
}
