package main

// The replica rows: real `switchboard serve` processes on one PostgreSQL database and one Redis, behind Debian's
// HAProxy, with 1 and with 3 replicas, compared with bare Echo handlers behind the same HAProxy (so the proxy's own
// cost is divided out as the Go stack's is in the other rows).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// replicaCount is the size of the larger cluster of the replica rows.
const replicaCount = 3

// replicaSetup is what the replica rows need while they are measured.
type replicaSetup struct {
	scenarios []*scenario
	// drain waits until the clicks of a redirect row are all stored, on every replica.
	drain func(ctx context.Context) (time.Duration, error)
	close func()
}

// replicaRowNames are the names of the rows, for -rows before anything is started.
func replicaRowNames() []string {
	var names []string
	for _, n := range []int{1, replicaCount} {
		names = append(names, replicaModelsRow(n), replicaRedirectRow(n))
	}
	return names
}

func replicaModelsRow(n int) string {
	return fmt.Sprintf("GET /api/v1/models — HAProxy → %d replica(s), PostgreSQL + Redis", n)
}

func replicaRedirectRow(n int) string {
	return fmt.Sprintf("GET /{slug} hot link — HAProxy → %d replica(s), PostgreSQL + Redis", n)
}

// startReplicas builds the binary into tmp, starts replicaCount serve processes on a new PostgreSQL database with
// Redis, a workspace with a models key and a hot link, and one HAProxy with four frontends: the bare models handler,
// the bare redirect, one replica, and all of them. The error says why the rows cannot be measured.
func startReplicas(ctx context.Context, tmp, bareModels, bareRedirect, hotScript string, log io.Writer) (_ *replicaSetup, err error) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("haproxy not found in PATH: run `make proxy` (installs Debian's haproxy package)")
	}
	redisURL := os.Getenv("SWITCHBOARD_TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/15"
	}
	bin := filepath.Join(tmp, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build switchboard: %v\n%s", err, out)
	}
	pgURL, drop, err := createPostgresDB(ctx)
	if err != nil {
		return nil, err
	}
	var stops []func()
	setup := &replicaSetup{close: func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if err := drop(); err != nil {
			fmt.Fprintln(log, "bench:", err)
		}
	}}
	defer func() {
		if err != nil {
			setup.close()
		}
	}()
	env := append(os.Environ(), "DATABASE_URL="+pgURL, "SWITCHBOARD_REDIS_URL="+redisURL,
		"SWITCHBOARD_SECRET_KEY=YmVuY2gtYmVuY2gtYmVuY2gtYmVuY2gtYmVuY2gtMzI=",
		// High enough never to answer 429: the shared limiter's round trip is measured, its refusals are not.
		"SWITCHBOARD_RATE_LIMIT_PER_MINUTE=1000000000", "SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE=1000000000",
		"SWITCHBOARD_TRUSTED_PROXIES=127.0.0.1/32", "SWITCHBOARD_LOG_LEVEL=warn",
		// One public URL for all replicas, as behind a real proxy: they share the default short domain.
		"SWITCHBOARD_BASE_URL=http://switchboard.bench")
	replicas := make([]string, replicaCount)
	for i := range replicas {
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		replicas[i] = ln.Addr().String()
		_ = ln.Close()
		cmd := exec.Command(bin, "serve", "--addr", replicas[i], "--data-dir", filepath.Join(tmp, fmt.Sprintf("replica%d", i+1)))
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		stops = append(stops, func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
		if err := waitReady(ctx, "http://"+replicas[i]+"/readyz", done); err != nil {
			return nil, fmt.Errorf("replica %d: %w", i+1, err)
		}
	}
	cli := func(args ...string) (map[string]any, error) {
		cmd := exec.CommandContext(ctx, bin, append(args, "--json")...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("switchboard %s: %w", strings.Join(args, " "), err)
		}
		var v map[string]any
		return v, json.Unmarshal(out, &v)
	}
	ws, err := cli("workspace", "create", "--name", "bench")
	if err != nil {
		return nil, err
	}
	key, err := cli("key", "create", "--workspace", ws["id"].(string), "--name", "bench", "--scopes", "models:read,links:write")
	if err != nil {
		return nil, err
	}
	secret := key["secret"].(string)
	sb := &switchboard{httpServer: &httpServer{url: "http://" + replicas[0]}, key: secret, linksKey: secret}
	var link struct{ ID string }
	if err := sb.api(ctx, http.MethodPost, "/api/v1/links", map[string]any{"destination_url": redirectLocation, "slug": "hot"}, &link); err != nil {
		return nil, err
	}

	fronts := map[string][]string{"bare_models": {bareModels}, "bare_redirect": {bareRedirect}, "one": replicas[:1], "all": replicas}
	addrs := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("global\n  maxconn 8192\ndefaults\n  mode http\n  option forwardfor\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n")
	for name, backends := range fronts {
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		addrs[name] = ln.Addr().String()
		_ = ln.Close()
		fmt.Fprintf(&cfg, "frontend %s\n  bind %s\n  default_backend %s_servers\nbackend %s_servers\n  balance roundrobin\n", name, addrs[name], name, name)
		for i, b := range backends {
			fmt.Fprintf(&cfg, "  server s%d %s\n", i+1, strings.TrimPrefix(b, "http://"))
		}
	}
	cfgPath := filepath.Join(tmp, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	proxy := exec.Command(haproxy, "-db", "-f", cfgPath)
	if err := proxy.Start(); err != nil {
		return nil, err
	}
	proxyDone := make(chan struct{})
	go func() { _ = proxy.Wait(); close(proxyDone) }()
	stops = append(stops, func() { _ = proxy.Process.Kill(); <-proxyDone })
	for _, a := range addrs {
		if err := waitListening(ctx, a, proxyDone); err != nil {
			return nil, fmt.Errorf("haproxy: %w", err)
		}
	}

	headers := sb.headers()
	modelsBase := &scenario{name: "GET /api/v1/models — bare Echo behind HAProxy (baseline)", url: "http://" + addrs["bare_models"] + modelsPath, headers: headers}
	redirectBase := &scenario{name: "GET /{slug} 302 — bare Echo behind HAProxy (baseline)", url: "http://" + addrs["bare_redirect"] + "/hot", script: hotScript}
	setup.scenarios = []*scenario{modelsBase,
		{name: replicaModelsRow(1), url: "http://" + addrs["one"] + modelsPath, headers: headers, baseline: modelsBase, goal: modelsGoal},
		{name: replicaModelsRow(replicaCount), url: "http://" + addrs["all"] + modelsPath, headers: headers, baseline: modelsBase, goal: modelsGoal},
		redirectBase,
		{name: replicaRedirectRow(1), url: "http://" + addrs["one"] + "/hot", script: hotScript, baseline: redirectBase, goal: redirectGoal},
		{name: replicaRedirectRow(replicaCount), url: "http://" + addrs["all"] + "/hot", script: hotScript, baseline: redirectBase, goal: redirectGoal},
	}
	setup.drain = func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		for _, r := range replicas {
			for {
				backlog, err := clickBacklog(ctx, "http://"+r+"/metrics")
				if err != nil {
					return 0, err
				}
				if backlog == 0 {
					break
				}
				select {
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		return time.Since(start), nil
	}
	return setup, nil
}

// waitReady polls url until it answers 200, the process ends (done) or 30 s pass.
func waitReady(ctx context.Context, url string, done <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("the process exited")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if _, last = fetch(ctx, url, nil); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready within 30 s: %w", last)
}

// waitListening polls addr until it accepts a connection, the process ends (done) or 30 s pass.
func waitListening(ctx context.Context, addr string, done <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("the process exited")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		var c net.Conn
		if c, last = net.DialTimeout("tcp", addr, time.Second); last == nil {
			return c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not listening within 30 s: %w", last)
}

var backlogMetric = regexp.MustCompile(`(?m)^switchboard_clicks_(in_flight|spool_bytes) (\S+)$`)

// clickBacklog reads the clicks a replica holds in memory plus the bytes waiting in its spool, from its /metrics.
func clickBacklog(ctx context.Context, metricsURL string) (float64, error) {
	body, err := fetch(ctx, metricsURL, nil)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range backlogMetric.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// replicaDrain is the click drain of a replica redirect row, or nil for any other row.
func replicaDrain(r *replicaSetup, sc *scenario) func(context.Context) (time.Duration, error) {
	if r == nil || sc.script == "" || !slices.Contains(r.scenarios, sc) {
		return nil
	}
	return r.drain
}
