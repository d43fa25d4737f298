package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store/storetest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchboard-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "switchboard")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(fmt.Sprintf("build: %v\n%s", err, out))
	}
	defer os.RemoveAll(dir)
	storetest.Main(m)
}

// cli runs the binary against dbURL and returns stdout, stderr and the exit code.
func cli(t *testing.T, dbURL string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// workspaceKey makes a workspace and a key of it with the CLI and returns the key's secret.
func workspaceKey(t *testing.T, dbURL, name, scopes string) string {
	t.Helper()
	out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", name, "--json")
	if code != 0 {
		t.Fatalf("workspace create: %s", stderr)
	}
	var ws struct{ ID string }
	mustJSON(t, out, &ws)
	out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", scopes, "--json")
	if code != 0 {
		t.Fatalf("key create: %s", stderr)
	}
	var key struct{ Secret string }
	mustJSON(t, out, &key)
	return key.Secret
}

// created posts body as JSON to the server with the key (and extra headers as name, value pairs), expects 201 and
// returns the body.
func (s *server) created(secret, path, body string, header ...string) string {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		s.t.Fatalf("POST %s: %d %s", path, res.StatusCode, b)
	}
	return string(b)
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
}

func databases(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.PostgresURL(t)) })
}

// The README's path: bootstrap from the CLI, start the server, make the first call, revoke from the CLI while the
// server runs, stop the server with SIGTERM.
func TestBootstrapFirstCallAndRevoke(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
		if code != 0 {
			t.Fatalf("workspace create: %d %s", code, stderr)
		}
		var ws struct{ ID, Name string }
		mustJSON(t, out, &ws)
		if !strings.HasPrefix(ws.ID, "ws_") || ws.Name != "Acme" {
			t.Fatalf("workspace %+v", ws)
		}

		out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "first", "--scopes", "models:read", "--json")
		if code != 0 {
			t.Fatalf("key create: %d %s", code, stderr)
		}
		var key struct {
			ID, Secret string
			Scopes     []string
		}
		mustJSON(t, out, &key)
		if !regexp.MustCompile(`^sb_sk_[0-9A-Za-z]{38}$`).MatchString(key.Secret) || !strings.HasPrefix(key.ID, "key_") {
			t.Fatalf("key %+v", key)
		}

		out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "embed", "--kind", "browser",
			"--browser-scope", "links:create", "--origins", "https://www.acme.example", "--daily-quota", "50", "--json")
		var browser struct {
			Secret, Kind string
			Origins      []string
			DailyQuota   int `json:"daily_quota"`
		}
		mustJSON(t, out, &browser)
		if code != 0 || !regexp.MustCompile(`^sb_pk_[0-9A-Za-z]{38}$`).MatchString(browser.Secret) || browser.Kind != "browser" ||
			len(browser.Origins) != 1 || browser.DailyQuota != 50 {
			t.Fatalf("browser key create: %d %s %s", code, out, stderr)
		}
		if _, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "embed", "--kind", "browser",
			"--browser-scope", "links:create"); code == 0 || !strings.Contains(stderr, "origins") {
			t.Errorf("a browser key without origins: %d %s", code, stderr)
		}

		out, _, _ = cli(t, dbURL, "key", "list", "--workspace", ws.ID, "--json")
		if strings.Contains(out, key.Secret) || strings.Contains(out, browser.Secret) || strings.Contains(out, `"secret":`) {
			t.Fatalf("key list shows the secret: %s", out)
		}
		var listed []map[string]any
		mustJSON(t, out, &listed)
		if len(listed) != 2 || listed[1]["id"] != key.ID || listed[1]["status"] != "active" || listed[0]["kind"] != "browser" {
			t.Fatalf("key list %s", out)
		}

		srv := runServer(t, dbURL, "")
		base, stop := srv.url, srv.stop
		call := func() (int, string) {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+key.Secret)
			req.Header.Set("Accept", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct{ Code, Object string }
			_ = json.NewDecoder(res.Body).Decode(&body)
			return res.StatusCode, body.Code + body.Object
		}
		if status, obj := call(); status != http.StatusOK || obj != "list" {
			t.Fatalf("first call: %d %s", status, obj)
		}

		if _, stderr, code := cli(t, dbURL, "key", "revoke", key.ID); code != 0 {
			t.Fatalf("key revoke: %d %s", code, stderr)
		}
		// SQLite: the very next request; PostgreSQL: as soon as the notification arrives.
		answer := func() string { status, code := call(); return fmt.Sprint(status, " ", code) }
		if strings.HasPrefix(dbURL, "file:") {
			if got := answer(); got != "401 api_key_revoked" {
				t.Fatalf("after revoke: %s", got)
			}
		} else {
			await.Equal(t, "the revocation to be heard", answer, "401 api_key_revoked")
		}
		if logs := stop(); strings.Contains(logs, key.Secret) {
			t.Fatal("the server logged a secret")
		}
	})
}

// testSecretKey is the server secret key of the servers the tests start (PostgreSQL requires one), so tests can
// seal webhook secrets the servers open.
const testSecretKey = "c3dpdGNoYm9hcmQtdGVzdC1zZXJ2ZXItc2VjcmV0LWs="

// server is a `switchboard serve` process started by a test.
type server struct {
	t    *testing.T
	url  string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan error
	// exited is set once the process ended (stop, kill, or a failed start).
	exited bool
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runServer starts `switchboard serve` on addr ("" for a free port) with DATABASE_URL, the test server key and
// extra environment ("NAME=value"; later values win), waits until it is ready and stops it with SIGTERM when the
// test ends (logging its output when the test failed).
func runServer(t *testing.T, dbURL, addr string, env ...string) *server {
	t.Helper()
	s := startServer(t, dbURL, addr, env...)
	s.awaitReady()
	return s
}

// startServer is runServer without the wait for readiness.
func startServer(t *testing.T, dbURL, addr string, env ...string) *server {
	t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	s := &server{t: t, url: "http://" + addr, cmd: exec.Command(binary, "serve", "--addr", addr), logs: &lockedBuffer{},
		done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + dbURL, "SWITCHBOARD_SECRET_KEY=" + testSecretKey}, env...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if logs := s.stop(); t.Failed() {
			t.Logf("output of the server at %s:\n%s", s.url, logs)
		}
	})
	return s
}

// awaitReady waits until the server answers /readyz with 200.
func (s *server) awaitReady() {
	s.t.Helper()
	await.Equal(s.t, "the server to be ready", func() string {
		select {
		case err := <-s.done:
			s.exited = true
			s.t.Fatalf("server exited before it was ready: %v", err)
		default:
		}
		res, err := http.Get(s.url + "/readyz")
		if err != nil {
			return err.Error()
		}
		res.Body.Close()
		return res.Status
	}, "200 OK")
}

// stop ends the server with SIGTERM, asserts a clean exit within 20 s and returns its logs; after kill or a first
// stop it only returns the logs.
func (s *server) stop() string {
	if s.exited {
		return s.logs.String()
	}
	s.exited = true
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("server exited with %v\n%s", err, s.logs.String())
		}
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("server did not stop on SIGTERM\n%s", s.logs.String())
	}
	return s.logs.String()
}

// kill ends the server with SIGKILL, as a crash would: nothing is drained or flushed.
func (s *server) kill() {
	if s.exited {
		return
	}
	s.exited = true
	_ = s.cmd.Process.Kill()
	<-s.done
}

func TestCLIErrors(t *testing.T) {
	dbURL := storetest.SQLiteURL(t)
	out, _, _ := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
	var ws struct{ ID string }
	mustJSON(t, out, &ws)

	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"workspace without name", []string{"workspace", "create"}, 2, "--name is required"},
		{"unknown scope", []string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", "billing:write"}, 2, `unknown scope "billing:write"`},
		{"no scopes", []string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", ""}, 2, "at least one scope"},
		{"missing workspace", []string{"key", "create", "--workspace", "ws_nope", "--name", "k", "--scopes", "models:read"}, 1, "no workspace ws_nope"},
		{"revoke unknown key", []string{"key", "revoke", "key_nope"}, 1, "no API key key_nope"},
		{"unknown model", []string{"workspace", "models", "--workspace", ws.ID, "--enable", "gpt-9"}, 2, `"gpt-9" is not in the model catalogue`},
		{"bad flag", []string{"key", "list", "--workspace"}, 2, "flag needs an argument"},
		{"unknown instance", []string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", "messaging:read",
			"--instances", "ins_nope"}, 2, `--instances: "ins_nope": no instance of the workspace has this ID`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cli(t, dbURL, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.msg)
			}
			if strings.Contains(stderr, "holds no workspace") {
				t.Errorf("stderr %q blames the database, which has a workspace", stderr)
			}
		})
	}

	// A command run against another database than the server's (the default file is relative to the working
	// directory) says so, and keeps its exit code.
	empty := storetest.SQLiteURL(t)
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", "models:read"}, 1},
		{[]string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", "models:read", "--kind", "weird"}, 2},
		{[]string{"key", "revoke", "key_nope"}, 1},
	} {
		_, stderr, code := cli(t, empty, tt.args...)
		if code != tt.code || !strings.Contains(stderr, "the database "+empty+" holds no workspace at all") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and the database named", tt.args, code, stderr, tt.code)
		}
	}
}

func TestShownDatabaseHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "the database file:data/switchboard.db",
		"file:/srv/sb.db":                       "the database file:/srv/sb.db",
		"postgres://sb:s3cret@db:5432/sb":       "the database postgres://sb:xxxxx@db:5432/sb",
		"postgres://db:5432/sb?sslmode=disable": "the database postgres://db:5432/sb?sslmode=disable",
	} {
		if got := shownDatabase(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("shownDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKeyExpiryAndWorkspaceModels(t *testing.T) {
	dbURL := storetest.SQLiteURL(t)
	out, _, _ := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
	var ws struct{ ID string }
	mustJSON(t, out, &ws)
	out, stderr, code := cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "short", "--scopes", "models:read,links:write", "--expires-in", "720h", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var key struct {
		Scopes    []string
		ExpiresAt time.Time `json:"expires_at"`
	}
	mustJSON(t, out, &key)
	if d := time.Until(key.ExpiresAt); d < 719*time.Hour || d > 721*time.Hour {
		t.Errorf("expires_at %v is not in 720h", key.ExpiresAt)
	}
	if strings.Join(key.Scopes, ",") != "models:read,links:write" {
		t.Errorf("scopes %v", key.Scopes)
	}
	out, stderr, code = cli(t, dbURL, "workspace", "models", "--workspace", ws.ID, "--enable", "gpt-4o,gpt-4o-mini", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var updated struct {
		EnabledModels []string `json:"enabled_models"`
	}
	mustJSON(t, out, &updated)
	if len(updated.EnabledModels) != 2 {
		t.Errorf("enabled_models %v", updated.EnabledModels)
	}

	// The operator's catalogue comes from the environment, as for serve.
	catalogue := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(catalogue, []byte("models:\n  - id: local-llama\n    owned_by: ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWITCHBOARD_MODELS_FILE", catalogue)
	out, stderr, code = cli(t, dbURL, "workspace", "models", "--workspace", ws.ID, "--enable", "local-llama", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	mustJSON(t, out, &updated)
	if strings.Join(updated.EnabledModels, ",") != "local-llama" {
		t.Errorf("enabled_models %v, want the operator's model", updated.EnabledModels)
	}
	t.Setenv("SWITCHBOARD_MODELS_FILE", "")
	if _, stderr, code = cli(t, dbURL, "workspace", "models", "--workspace", ws.ID, "--enable", "local-llama"); code != 2 {
		t.Errorf("without the catalogue: exit %d, stderr %q; want 2", code, stderr)
	}
}

// A start that cannot serve on its address (a port out of range, one in use) refuses before it opens the database:
// nothing is migrated and no key is written into the data directory.
func TestServeRefusesItsAddressFirst(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		addr, msg string
		code      int
	}{{"127.0.0.1:99999", "invalid port", 2}, {taken.Addr().String(), "address already in use", 1}} {
		dir := filepath.Join(t.TempDir(), "data")
		_, stderr, code := cli(t, "file:"+filepath.Join(dir, "switchboard.db"), "serve", "--addr", tt.addr)
		if code != tt.code || !strings.Contains(stderr, tt.msg) {
			t.Errorf("serve --addr %s: exit %d, stderr %q; want exit %d and %q", tt.addr, code, stderr, tt.code, tt.msg)
		}
		if entries, err := os.ReadDir(dir); !os.IsNotExist(err) {
			t.Errorf("serve --addr %s left the data directory behind: %v %v", tt.addr, entries, err)
		}
	}
}
