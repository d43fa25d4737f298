package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

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

		out, _, _ = cli(t, dbURL, "key", "list", "--workspace", ws.ID, "--json")
		if strings.Contains(out, key.Secret) || strings.Contains(out, `"secret"`) {
			t.Fatalf("key list shows the secret: %s", out)
		}
		var listed []map[string]any
		mustJSON(t, out, &listed)
		if len(listed) != 1 || listed[0]["id"] != key.ID || listed[0]["status"] != "active" {
			t.Fatalf("key list %s", out)
		}

		base, stop := startServer(t, dbURL)
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
		deadline := time.Now().Add(2 * time.Second)
		for {
			status, code := call()
			if status == http.StatusUnauthorized && code == "api_key_revoked" {
				break
			}
			if strings.HasPrefix(dbURL, "file:") || time.Now().After(deadline) {
				t.Fatalf("after revoke: %d %s", status, code)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if logs := stop(); strings.Contains(logs, key.Secret) {
			t.Fatal("the server logged a secret")
		}
	})
}

// startServer runs `switchboard serve` on a free port and returns its URL and a function that stops it with
// SIGTERM, asserts a clean exit and returns its logs.
func startServer(t *testing.T, dbURL string) (string, func() string) {
	t.Helper()
	p := runServer(t, dbURL, "")
	return p.base, p.stop
}

// serverProcess is a running `switchboard serve`.
type serverProcess struct {
	t    *testing.T
	base string
	cmd  *exec.Cmd
	logs *bytes.Buffer // read only once the process exited
	done chan error
	// exited is set by stop or kill.
	exited bool
}

// runServer starts `switchboard serve` on addr ("" for a free port) with DATABASE_URL and extra environment
// ("NAME=value"), waits until it is ready and stops it with SIGTERM when the test ends.
func runServer(t *testing.T, dbURL, addr string, env ...string) *serverProcess {
	t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	cmd := exec.Command(binary, "serve", "--addr", addr)
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+dbURL), env...)
	p := &serverProcess{t: t, base: "http://" + addr, cmd: cmd, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop() })
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(p.base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.done:
			p.exited = true
			t.Fatalf("server exited before it was ready: %v\n%s", err, p.logs.String())
		default:
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("server did not become ready")
		}
	}
}

// stop sends SIGTERM, asserts a clean exit within 20 s and returns the logs.
func (p *serverProcess) stop() string {
	if p.exited {
		return p.logs.String()
	}
	p.exited = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("server exited with %v\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("server did not stop on SIGTERM\n%s", p.logs.String())
	}
	return p.logs.String()
}

// kill ends the process with SIGKILL: no shutdown code runs.
func (p *serverProcess) kill() {
	if p.exited {
		return
	}
	p.exited = true
	_ = p.cmd.Process.Kill()
	<-p.done
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
		{"unknown scope", []string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", "models:write"}, 2, `unknown scope "models:write"`},
		{"no scopes", []string{"key", "create", "--workspace", ws.ID, "--name", "k", "--scopes", ""}, 2, "at least one scope"},
		{"missing workspace", []string{"key", "create", "--workspace", "ws_nope", "--name", "k", "--scopes", "models:read"}, 1, "no workspace ws_nope"},
		{"revoke unknown key", []string{"key", "revoke", "key_nope"}, 1, "no API key key_nope"},
		{"unknown model", []string{"workspace", "models", "--workspace", ws.ID, "--enable", "gpt-9"}, 2, `"gpt-9" is not in the model catalogue`},
		{"bad flag", []string{"key", "list", "--workspace"}, 2, "flag needs an argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cli(t, dbURL, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.msg)
			}
		})
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
}
