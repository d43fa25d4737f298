package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store/storetest"
)

// The Grafana dashboard (docs/grafana/switchboard.json) and the metrics reference (docs/metrics.md) against what a
// serving process exposes after real traffic — an API call, a webhook delivery, a click, Redis-shared limits: every
// metric the dashboard queries exists (no panel stays empty because of a typo or a rename), and every switchboard_
// metric the server exposes is on the dashboard and in the reference.
func TestGrafanaDashboardAndMetricsReference(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dbURL := storetest.SQLiteURL(t)
	var deliveries atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries.Add(1)
	}))
	defer receiver.Close()

	secret := workspaceKey(t, dbURL, "Metrics", "links:write,webhooks:write")

	env := []string{"SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true", "SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8"}
	if redis := os.Getenv("SWITCHBOARD_TEST_REDIS_URL"); redis != "" {
		env = append(env, "SWITCHBOARD_REDIS_URL="+redis)
	} else {
		env = append(env, "SWITCHBOARD_REDIS_URL=redis://127.0.0.1:6379/0")
	}
	srv := runServer(t, dbURL, "", env...)
	srv.created(secret, "/api/v1/webhooks", `{"url":"`+receiver.URL+`/hook","events":["link.created"]}`)
	srv.created(secret, "/api/v1/links", `{"destination_url":"https://example.com/metrics","slug":"dash-click"}`)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if res, err := noRedirect.Get(srv.url + "/dash-click"); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode != http.StatusFound {
		t.Fatalf("visit: %d", res.StatusCode)
	}
	await.Equal(t, "the delivery and the click to be recorded", func() bool {
		return deliveries.Load() > 0 && metric(t, srv.url, "switchboard_clicks_persisted_total") > 0 &&
			strings.Contains(scrape(t, srv.url), "switchboard_webhook_deliveries_total{")
	}, true)

	served := map[string]bool{}
	for line := range strings.Lines(scrape(t, srv.url)) {
		if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			name, _, _ = strings.Cut(name, "{")
			served[name] = true
		}
	}

	raw, err := os.ReadFile("docs/grafana/switchboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	name := regexp.MustCompile(`\b(?:switchboard|go|process)_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, p := range dashboard.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range name.FindAllString(q.Expr, -1) {
				used[strings.TrimSuffix(m, "_bucket")] = true
				if !served[m] {
					t.Errorf("panel %q queries %s, which the server does not expose", p.Title, m)
				}
			}
		}
	}
	reference, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var exposed []string
	for m := range served {
		if !strings.HasPrefix(m, "switchboard_") {
			continue
		}
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && served[b+"_bucket"] {
				base = b
			}
		}
		if !slices.Contains(exposed, base) {
			exposed = append(exposed, base)
		}
	}
	slices.Sort(exposed)
	for _, m := range exposed {
		if !used[m] {
			t.Errorf("%s is exposed but on no panel of the dashboard", m)
		}
		if !strings.Contains(string(reference), "`"+m+"`") {
			t.Errorf("%s is exposed but not described in docs/metrics.md", m)
		}
	}
	if len(exposed) < 15 {
		t.Errorf("only %d switchboard_ metrics exposed: %v", len(exposed), exposed)
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
