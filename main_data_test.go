package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// sameLinks is the setting every server over one deployment's data shares: the short domain its links live on.
var sameLinks = []string{"SWITCHBOARD_SHORT_BASE_URL=http://go.example"}

// browserAgent makes a redirect count as a person's click.
const browserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"

// deployment is an SQLite installation with data in every area: a console user and session, a workspace and keys,
// links with clicks and their rollups, a webhook with events, deliveries and attempts, idempotency records.
type deployment struct {
	dbURL, dataDir string
	srv            *server
	workspace, key string
	slug, linkID   string
	session        *http.Cookie
	deliveries     *atomic.Int64
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	d := &deployment{deliveries: &atomic.Int64{}}
	d.dataDir = t.TempDir()
	d.dbURL = "file:" + filepath.Join(d.dataDir, "switchboard.db")
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { d.deliveries.Add(1) }))
	t.Cleanup(receiver.Close)
	d.srv = runServer(t, d.dbURL, "", append(sameLinks, "SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true",
		"SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8")...)
	out, stderr, code := cli(t, d.dbURL, "workspace", "create", "--name", "Moving", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var ws struct{ ID string }
	mustJSON(t, out, &ws)
	d.workspace = ws.ID
	out, stderr, code = cli(t, d.dbURL, "key", "create", "--workspace", ws.ID, "--name", "all", "--scopes",
		"models:read,links:write,webhooks:write", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var k struct{ Secret string }
	mustJSON(t, out, &k)
	d.key = k.Secret
	if status, code, body := apiCall(t, "POST", d.srv.url+"/api/v1/webhooks", d.key,
		map[string]any{"url": receiver.URL + "/hook", "events": []string{"link.created"}}); status != 201 {
		t.Fatalf("webhook: %d %s %s", status, code, body)
	}
	d.slug = "moving"
	req, _ := http.NewRequest("POST", d.srv.url+"/api/v1/links", strings.NewReader(
		`{"destination_url":"https://example.com/moved","slug":"moving","tags":["a"],"utm":{"source":"mail"}}`))
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "move-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create link: %v %v", err, res)
	}
	var link struct{ ID string }
	mustJSON(t, readAll(t, res), &link)
	d.linkID = link.ID
	for range 5 {
		d.visit(t, d.srv.url)
	}
	d.session = consoleSignUp(t, d.srv.url, "mover@example.com", "")
	await.Equal(t, "the link events to be delivered", func() bool { return d.deliveries.Load() >= 1 }, true)
	return d
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// visit follows the short link as a browser would and returns where it sends the visitor.
func (d *deployment) visit(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/"+d.slug, nil)
	req.Header.Set("User-Agent", browserAgent)
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.Header.Get("Location")
}

// humans reads the link, with its count of human clicks.
func (d *deployment) humans(t *testing.T, base string) string {
	t.Helper()
	status, code, body := apiCall(t, "GET", base+"/api/v1/links/"+d.linkID, d.key, nil)
	if status != 200 {
		t.Fatalf("get link: %d %s", status, code)
	}
	return string(body)
}

// works checks that a server over the deployment's data answers as the original did: the key, the link (with its
// clicks), the console session.
func (d *deployment) works(t *testing.T, base string) {
	t.Helper()
	if status, code, _ := apiCall(t, "GET", base+"/api/v1/models", d.key, nil); status != 200 {
		t.Errorf("the key: %d %s", status, code)
	}
	if got := d.visit(t, base); !strings.HasPrefix(got, "https://example.com/moved?utm_source=mail") {
		t.Errorf("the link redirects to %q", got)
	}
	var link struct{ Clicks int }
	if body := d.humans(t, base); json.Unmarshal([]byte(body), &link) != nil || link.Clicks < 5 {
		t.Errorf("the link lost its clicks: %s", body)
	}
	req, _ := http.NewRequest("GET", base+"/user/workspaces", nil)
	req.AddCookie(d.session)
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("the console session: %d, want the workspaces page", res.StatusCode)
	}
}

// A backup taken while the server writes (redirects record clicks all along) is a consistent database that a server
// starts from, restored as docs/operations.md says.
func TestBackupWhileServingAndRestore(t *testing.T) {
	d := newDeployment(t)
	backup := filepath.Join(t.TempDir(), "backup.db")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				d.visit(t, d.srv.url)
			}
		}
	})
	out, stderr, code := cli(t, d.dbURL, "backup", "--to", backup)
	close(stop)
	wg.Wait()
	if code != 0 || !strings.Contains(out, "Backed up to") {
		t.Fatalf("backup: %d %s %s", code, out, stderr)
	}
	copyDB, err := store.Open(context.Background(), "file:"+backup)
	if err != nil {
		t.Fatal(err)
	}
	var check string
	if err := copyDB.Bun().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check of the backup: %q %v", check, err)
	}
	_ = copyDB.Close()

	// Restore: into a fresh data directory, with the secret key of the installation.
	restored := t.TempDir()
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "switchboard.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := runServer(t, "file:"+filepath.Join(restored, "switchboard.db"), "", sameLinks...)
	d.works(t, srv.url)

	// PostgreSQL has its own tools.
	_, stderr, code = cli(t, storetest.PostgresURL(t), "backup", "--to", filepath.Join(t.TempDir(), "pg.db"))
	if code == 0 || !strings.Contains(stderr, "pg_dump") {
		t.Errorf("backup of PostgreSQL: exit %d, %s; want a pointer to pg_dump", code, stderr)
	}
}

// migrate-data moves a whole SQLite deployment to PostgreSQL: every table, row for row, and then the same things
// work from PostgreSQL.
func TestMigrateDataToPostgres(t *testing.T) {
	d := newDeployment(t)
	d.srv.stop() // drains the clicks; a copy is taken of a stopped deployment
	pgURL := storetest.EmptyPostgresURL(t)
	out, stderr, code := cli(t, d.dbURL, "migrate-data", "--to", pgURL)
	if code != 0 {
		t.Fatalf("migrate-data: %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"workspaces", "api_keys", "links", "clicks", "click_rollups", "webhook_endpoints",
		"events", "webhook_deliveries", "idempotency_keys", "users", "sessions", "Copied"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress does not mention %s:\n%s", want, out)
		}
	}
	ctx := context.Background()
	src, err := store.Open(ctx, d.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := store.Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	// The areas the deployment used hold data, so the comparison below compares something in each.
	for _, table := range []string{"workspaces", "api_keys", "users", "sessions", "links", "link_tags",
		"clicks", "click_rollups", "click_dimension_rollups", "click_visitors", "click_salts", "webhook_endpoints",
		"events", "webhook_deliveries", "webhook_attempts", "idempotency_keys"} {
		var n int
		if err := dst.Bun().NewSelect().TableExpr(table).ColumnExpr("count(*)").Scan(ctx, &n); err != nil || n == 0 {
			t.Errorf("%s has %d rows on PostgreSQL (%v), want the deployment's", table, n, err)
		}
	}
	storetest.CompareDatabases(t, src, dst)

	srv := runServer(t, pgURL, "", sameLinks...)
	d.works(t, srv.url)
	// A second run refuses to copy over the data now in PostgreSQL.
	if _, stderr, code := cli(t, d.dbURL, "migrate-data", "--to", pgURL); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Errorf("a second migrate-data: exit %d, %s; want a refusal", code, stderr)
	}
}

// The default binary has no whatsmeow to create WhatsApp Web's tables in PostgreSQL: given a source holding paired
// devices (tables a whatsapp_web server created), migrate-data refuses, names the tables and the build that copies
// them, and writes no row, rather than leave every instance to pair again.
func TestMigrateDataRefusesWhatsAppWebSessionsWithoutTheProvider(t *testing.T) {
	dbURL := storetest.SQLiteURL(t)
	workspaceKey(t, dbURL, "Paired", "models:read")
	ctx := context.Background()
	src, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// The shape of whatsmeow's device table and the provider's bindings, as far as the refusal looks.
	for _, q := range []string{
		"CREATE TABLE whatsmeow_device (jid TEXT PRIMARY KEY, registration_id BIGINT NOT NULL, noise_key bytea NOT NULL)",
		"INSERT INTO whatsmeow_device VALUES ('15550000001.0:7@s.whatsapp.net', 1, x'0102')",
		"CREATE TABLE whatsapp_web_instances (instance_id TEXT PRIMARY KEY, jid TEXT NOT NULL)",
		"INSERT INTO whatsapp_web_instances VALUES ('inst_1', '15550000001.0:7@s.whatsapp.net')",
	} {
		if _, err := src.Bun().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_ = src.Close()
	pgURL := storetest.EmptyPostgresURL(t)
	_, stderr, code := cli(t, dbURL, "migrate-data", "--to", pgURL)
	if code == 0 {
		t.Fatal("migrate-data of a source with WhatsApp Web sessions succeeded in the default build")
	}
	for _, want := range []string{"whatsmeow_device", "whatsapp_web_instances", "whatsapp_web build", "nothing was committed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	dst, err := store.Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var n int
	if err := dst.Bun().NewSelect().TableExpr("workspaces").ColumnExpr("count(*)").Scan(ctx, &n); err != nil || n != 0 {
		t.Errorf("the refused copy left %d workspaces in PostgreSQL (%v)", n, err)
	}
}
