package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

const (
	browserUA     = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.6; rv:133.0) Gecko/20100101 Firefox/133.0"
	browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
)

// newRedirectEnv is a link env whose server serves redirects, with a recorder that writes every 10 ms.
func newRedirectEnv(t *testing.T, db *store.DB, cfg handlers.Config) *linkEnv {
	t.Helper()
	return newRedirectEnvWith(t, db, cfg, links.Config{})
}

// newRedirectEnvWith is newRedirectEnv with a links service configured by lc.
func newRedirectEnvWith(t testing.TB, db *store.DB, cfg handlers.Config, lc links.Config) *linkEnv {
	t.Helper()
	cfg.Redirects.Clicks, _ = newClickRecorder(t, db)
	e := newLinkEnvWith(t, db, cfg, lc)
	e.recorder = cfg.Redirects.Clicks
	return e
}

// awaitRecorded waits until the recorder holds no click in memory: every click handed to it by the visits made so
// far (a redirect hands its click over before it answers) is written.
func (e *linkEnv) awaitRecorded() {
	e.t.Helper()
	await.Equal(e.t, "the recorder to write what it was handed", func() int { n, _ := e.recorder.Backlog(); return n }, 0)
}

// newClickRecorder is a running recorder, stopped (drained) after the servers using it stopped, or earlier by stop.
func newClickRecorder(t testing.TB, db *store.DB) (rec *clicks.Recorder, stop func() error) {
	t.Helper()
	rec, err := clicks.New(db, clicks.Config{SpoolDir: t.TempDir(), Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	var once sync.Once
	stop = func() (err error) {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return rec, stop
}

// visit is a request to the redirect route, as a browser or a program makes it; redirects are not followed.
type visit struct {
	method, path, host, ua, accept, referer string
}

type visitResult struct {
	status int
	header http.Header
	body   string
}

func (r visitResult) location() string { return r.header.Get("Location") }

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *linkEnv) visit(v visit) visitResult {
	e.t.Helper()
	if v.method == "" {
		v.method = http.MethodGet
	}
	req, err := http.NewRequest(v.method, e.url+v.path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = v.host
	if req.Host == "" {
		req.Host = e.domain
	}
	for name, value := range map[string]string{"User-Agent": v.ua, "Accept": v.accept, "Referer": v.referer} {
		if value != "" {
			req.Header.Set(name, value)
		}
	}
	if v.ua == "" {
		req.Header.Set("User-Agent", browserUA)
	}
	res, err := noFollow.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := visitResult{status: res.StatusCode, header: res.Header, body: string(body)}
	if res.StatusCode >= 400 && v.method != http.MethodHead && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		validateResponse(e.t, req, &response{Response: res, body: body}, "")
	}
	return out
}

// clickRows returns the recorded clicks of a link, oldest first.
func (e *linkEnv) clickRows(linkID string) []store.Click {
	e.t.Helper()
	var cs []store.Click
	if err := e.db.Bun().NewSelect().Model(&cs).Where("link_id = ?", linkID).Order("id").Scan(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// awaitClicks waits until the link has n recorded clicks, and fails if it has more.
func (e *linkEnv) awaitClicks(linkID string, n int) []store.Click {
	e.t.Helper()
	await.Until(e.t, fmt.Sprintf("%d recorded clicks", n), func() int { return len(e.clickRows(linkID)) },
		func(got int) bool { return got >= n })
	cs := e.clickRows(linkID)
	if len(cs) > n {
		e.t.Fatalf("%d clicks recorded, want %d", len(cs), n)
	}
	return cs
}

func TestRedirectTypesAndHeaders(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		for _, tt := range []struct {
			status int
			cache  string
		}{{301, "public, max-age=300"}, {302, "private, no-store"}, {307, "private, no-store"}, {308, "public, max-age=300"}} {
			l := e.create(fmt.Sprintf(`{"destination_url":"https://example.com/landing?ref=sb","redirect_type":%d}`, tt.status))
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				r := e.visit(visit{method: method, path: "/" + l.Slug})
				if r.status != tt.status || r.location() != "https://example.com/landing?ref=sb" ||
					r.header.Get("Cache-Control") != tt.cache || r.header.Get("X-Robots-Tag") != "noindex" || r.body != "" {
					t.Errorf("%s %d link: %d, Location %q, Cache-Control %q, X-Robots-Tag %q, body %q", method, tt.status,
						r.status, r.location(), r.header.Get("Cache-Control"), r.header.Get("X-Robots-Tag"), r.body)
				}
			}
			cs := e.awaitClicks(l.Id, 2)
			if classes := cs[0].Class + "," + cs[1].Class; classes != "human,head" && classes != "head,human" {
				t.Errorf("classes %s; want a human and a head", classes)
			}
		}
	})
}

// The slug is case-insensitive, a configured short domain answers only for its own links, and any other host
// (the product's, an address) answers as the default short domain.
func TestRedirectHostsAndCase(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		other := "go-" + strings.ToLower(store.NewID("d")[6:14]) + ".example"
		e := newRedirectEnvWith(t, db, handlers.Config{}, links.Config{Domains: []string{other}})
		def := e.create(`{"destination_url":"https://example.com/default","slug":"Promo-` + e.domain[:6] + `"}`)
		alt := e.create(`{"destination_url":"https://example.com/other","domain":"` + other + `","slug":"` + def.Slug + `"}`)
		for _, tt := range []struct{ host, path, want string }{
			{e.domain, "/" + def.Slug, def.DestinationUrl},
			{e.domain, "/" + strings.ToUpper(def.Slug), def.DestinationUrl},
			{"app.switchboard.test", "/" + def.Slug, def.DestinationUrl},
			{"127.0.0.1", "/" + def.Slug, def.DestinationUrl},
			{other, "/" + def.Slug, alt.DestinationUrl},
			{strings.ToUpper(other), "/" + strings.ToLower(def.Slug), alt.DestinationUrl},
		} {
			if r := e.visit(visit{host: tt.host, path: tt.path}); r.status != 302 || r.location() != tt.want {
				t.Errorf("%s%s: %d %q, want %q", tt.host, tt.path, r.status, r.location(), tt.want)
			}
		}
	})
}

func TestRedirectMergesUTMAndVisitorQuery(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		tests := []struct {
			name, link, query, want string
		}{
			{"plain", `{"destination_url":"https://example.com/a"}`, "", "https://example.com/a"},
			{"visitor query forwarded", `{"destination_url":"https://example.com/a"}`, "?gclid=42&x=a%20b",
				"https://example.com/a?gclid=42&x=a+b"},
			{"destination's parameters win", `{"destination_url":"https://example.com/a?plan=pro"}`, "?plan=free&ref=tw",
				"https://example.com/a?plan=pro&ref=tw"},
			{"UTM replaces the destination's and wins over the visitor's",
				`{"destination_url":"https://example.com/a?utm_source=old&id=7#top","utm":{"source":"newsletter","campaign":"bf"}}`,
				"?utm_source=evil&utm_medium=visitor",
				"https://example.com/a?id=7&utm_campaign=bf&utm_source=newsletter&utm_medium=visitor#top"},
			{"forward_query off", `{"destination_url":"https://example.com/a?x=1","forward_query":false}`, "?y=2",
				"https://example.com/a?x=1"},
		}
		for _, tt := range tests {
			l := e.create(tt.link)
			if r := e.visit(visit{path: "/" + l.Slug + tt.query}); r.status != 302 || r.location() != tt.want {
				t.Errorf("%s: %d %q, want %q", tt.name, r.status, r.location(), tt.want)
			}
		}
	})
}

// No parameter or path trick can send a visitor anywhere but the link's destination.
func TestRedirectIsNoOpenRedirect(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com/a"}`)
		for _, q := range []string{
			"?url=https://evil.example", "?next=//evil.example", "?destination_url=https://evil.example",
			"?redirect=https%3A%2F%2Fevil.example&return_to=evil", "?%23=x", "?a=%0d%0aLocation:%20https://evil.example",
			"?@evil.example", "?x=#frag",
		} {
			r := e.visit(visit{path: "/" + l.Slug + q})
			loc := r.location()
			if r.status != 302 || !strings.HasPrefix(loc, "https://example.com/a") ||
				strings.ContainsAny(strings.TrimPrefix(loc, "https://example.com/a"), "#\r\n /") {
				t.Errorf("%s: %d %q", q, r.status, loc)
			}
		}
		for _, path := range []string{"//evil.example", "/%2F%2Fevil.example", "/" + l.Slug + "/https://evil.example",
			"/" + l.Slug + "%2F..", "/https:%2F%2Fevil.example"} {
			if r := e.visit(visit{path: path}); r.status != http.StatusNotFound {
				t.Errorf("%s: %d %q", path, r.status, r.location())
			}
		}
	})
}

func TestUnknownSlugs(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		for _, path := range []string{"/no-such-link", "/-bad", "/" + strings.Repeat("a", 64), "/a.b", "/a%20b"} {
			r := e.visit(visit{path: path, ua: "curl/8.5.0", accept: "*/*"})
			var p problem
			_ = json.Unmarshal([]byte(r.body), &p)
			if r.status != 404 || p.Code != "not_found" {
				t.Errorf("%s: %d %s", path, r.status, r.body)
			}
			r = e.visit(visit{path: path, accept: browserAccept})
			if r.status != 404 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
				!strings.Contains(r.body, "does not exist") || r.header.Get("X-Robots-Tag") != "noindex" {
				t.Errorf("%s for a browser: %d %s %s", path, r.status, r.header.Get("Content-Type"), r.body)
			}
		}
		if r := e.visit(visit{method: http.MethodHead, path: "/no-such-link"}); r.status != 404 || r.body != "" {
			t.Errorf("HEAD of an unknown slug: %d %q", r.status, r.body)
		}
	})
}

// A visit that cannot be served right now answers 503 with Retry-After, as a problem to programs and as a page to
// browsers, whichever part failed: the lookup of a link that is not cached, the max_clicks admission, or the click
// recorder. A refused redirect is logged once, not once per visit.
func TestRedirectUnavailable(t *testing.T) {
	db := storetest.SQLite(t)
	logs := &errorLines{}
	rec, stopRecorder := newClickRecorder(t, db)
	e := newLinkEnv(t, db, handlers.Config{Redirects: handlers.RedirectOptions{Clicks: rec},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	exec := func(query string) {
		t.Helper()
		if _, err := db.Bun().ExecContext(context.Background(), query); err != nil {
			t.Fatal(err)
		}
	}
	want503 := func(what, path string) {
		t.Helper()
		// A person's browser asks for HTML; the same person's script does not (only people spend max_clicks).
		r := e.visit(visit{path: path, accept: "application/json"})
		var p problem
		_ = json.Unmarshal([]byte(r.body), &p)
		if r.status != 503 || r.header.Get("Retry-After") != "5" || r.header.Get("Content-Type") != "application/problem+json" ||
			p.Code != "service_unavailable" {
			t.Errorf("%s, for a program: %d, Retry-After %q, %s %s", what, r.status, r.header.Get("Retry-After"),
				r.header.Get("Content-Type"), r.body)
		}
		r = e.visit(visit{path: path, accept: browserAccept})
		if r.status != 503 || r.header.Get("Retry-After") != "5" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(r.body, "Try again shortly") || r.header.Get("Cache-Control") != "no-store" ||
			r.header.Get("X-Robots-Tag") != "noindex" {
			t.Errorf("%s, for a browser: %d, Retry-After %q, %s %s", what, r.status, r.header.Get("Retry-After"),
				r.header.Get("Content-Type"), r.body)
		}
	}

	// The database cannot be read and the link is not cached.
	l := e.create(`{"destination_url":"https://example.com/a"}`)
	exec("ALTER TABLE links RENAME TO links_away")
	want503("lookup failed", "/"+l.Slug)
	exec("ALTER TABLE links_away RENAME TO links")
	if r := e.visit(visit{path: "/" + l.Slug}); r.status != 302 {
		t.Errorf("after the database came back: %d", r.status)
	}

	// The admission of a person's click on a capped link fails.
	capped := e.create(`{"destination_url":"https://example.com/a","max_clicks":5}`)
	exec("CREATE TRIGGER refuse_admissions BEFORE UPDATE OF admitted_clicks ON links BEGIN SELECT RAISE(ABORT, 'unavailable'); END")
	want503("admission failed", "/"+capped.Slug)
	exec("DROP TRIGGER refuse_admissions")
	if r := e.visit(visit{path: "/" + capped.Slug}); r.status != 302 {
		t.Errorf("after the admission works again: %d", r.status)
	}
	if n := logs.count("redirects are refused"); n != 0 {
		t.Fatalf("%d refusals logged before any", n)
	}

	// The recorder refuses the click.
	if err := stopRecorder(); err != nil {
		t.Fatal(err)
	}
	want503("recorder closed", "/"+l.Slug)
	want503("recorder closed", "/"+l.Slug)
	if n := logs.count("redirects are refused"); n != 1 {
		t.Errorf("4 refused redirects logged %d times, want once", n)
	}
}

// errorLines is a log destination that counts lines by content.
type errorLines struct {
	mu    sync.Mutex
	lines []string
}

func (w *errorLines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(b))
	return len(b), nil
}

// count is how many lines contain text.
func (w *errorLines) count(text string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, text) {
			n++
		}
	}
	return n
}

// Every route of the product keeps its path: /:slug only gets what no other route takes.
func TestRedirectRouteLeavesTheProductsRoutes(t *testing.T) {
	db := storetest.SQLite(t)
	e := newRedirectEnv(t, db, handlers.Config{})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/openapi.yaml": 200,
		"/openapi.json": 200, "/docs": 301, "/problems": 200, "/api/v1/models": 401} {
		if r := e.visit(visit{path: path}); r.status != want {
			t.Errorf("GET %s: %d, want %d", path, r.status, want)
		}
	}
}

func TestExpiredLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		withURL := e.create(`{"destination_url":"https://example.com/a","expired_url":"https://example.com/ended"}`)
		without := e.create(`{"destination_url":"https://example.com/a"}`)
		past := time.Now().Add(-time.Second).UTC()
		for _, l := range []gen.Link{withURL, without} {
			if _, err := db.Bun().NewUpdate().Table("links").Set("expires_at = ?", past).Where("id = ?", l.Id).Exec(context.Background()); err != nil {
				t.Fatal(err)
			}
			db.LinkChanges.Published(store.LinkKey{Domain: l.Domain, SlugKey: strings.ToLower(l.Slug)})
		}
		r := e.visit(visit{path: "/" + withURL.Slug})
		if r.status != 302 || r.location() != "https://example.com/ended" || r.header.Get("Cache-Control") != "private, no-store" {
			t.Errorf("expired with expired_url: %d %q %q", r.status, r.location(), r.header.Get("Cache-Control"))
		}
		r = e.visit(visit{path: "/" + without.Slug, accept: "application/json"})
		var p problem
		_ = json.Unmarshal([]byte(r.body), &p)
		if r.status != 410 || p.Code != "link_expired" {
			t.Errorf("expired without expired_url: %d %s", r.status, r.body)
		}
		if r = e.visit(visit{path: "/" + without.Slug, accept: browserAccept}); r.status != 410 || !strings.Contains(r.body, "expired") {
			t.Errorf("expired page: %d %s", r.status, r.body)
		}
		// A visitor of an expired link is not a click of it.
		l := e.create(`{"destination_url":"https://example.com/a"}`)
		e.visit(visit{path: "/" + l.Slug})
		e.awaitClicks(l.Id, 1)
		if n := len(e.clickRows(withURL.Id)) + len(e.clickRows(without.Id)); n != 0 {
			t.Errorf("%d clicks recorded for expired links", n)
		}
	})
}

// /slug+ shows the destination, escaped, and neither redirects nor counts.
func TestPreviewPage(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com/a?x=\"><script>alert(1)</script>","title":"<b>Offer</b> & more"}`)
		r := e.visit(visit{path: "/" + l.Slug + "+", accept: browserAccept})
		if r.status != 200 || r.location() != "" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("preview: %d %q %s", r.status, r.location(), r.header.Get("Content-Type"))
		}
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "<b>Offer") ||
			!strings.Contains(r.body, "&lt;b&gt;Offer&lt;/b&gt; &amp; more") || !strings.Contains(r.body, "https://example.com/a?x=") ||
			!strings.Contains(r.body, "Continue to the destination") {
			t.Errorf("preview body:\n%s", r.body)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
		if r := e.visit(visit{method: http.MethodHead, path: "/" + l.Slug + "+"}); r.status != 200 || r.body != "" {
			t.Errorf("HEAD preview: %d %q", r.status, r.body)
		}
		// A real click afterwards is the only one recorded.
		e.visit(visit{path: "/" + l.Slug})
		e.awaitClicks(l.Id, 1)
	})
}

// A change made through the API is seen by the very next redirect; a slug created after a 404 is found at once.
func TestRedirectCacheFollowsChanges(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		slug := "later-" + strings.ToLower(e.domain[1:7])
		if r := e.visit(visit{path: "/" + slug}); r.status != 404 {
			t.Fatalf("before creation: %d", r.status)
		}
		l := e.create(`{"destination_url":"https://example.com/v1","slug":"` + slug + `"}`)
		if r := e.visit(visit{path: "/" + slug}); r.location() != "https://example.com/v1" {
			t.Fatalf("after creation: %d %q", r.status, r.location())
		}
		if r := e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{"destination_url":"https://example.com/v2","redirect_type":307}`); r.StatusCode != 200 {
			t.Fatalf("update: %d %s", r.StatusCode, r.body)
		}
		if r := e.visit(visit{path: "/" + slug}); r.status != 307 || r.location() != "https://example.com/v2" {
			t.Fatalf("after update: %d %q", r.status, r.location())
		}
		if r := e.call(http.MethodDelete, "/api/v1/links/"+l.Id, ""); r.StatusCode != 204 {
			t.Fatalf("delete: %d %s", r.StatusCode, r.body)
		}
		if r := e.visit(visit{path: "/" + slug}); r.status != 404 {
			t.Fatalf("after delete: %d %q", r.status, r.location())
		}
	})
}

// On PostgreSQL a change committed by another process reaches this process's cache through NOTIFY.
func TestRedirectCacheHearsOtherProcesses(t *testing.T) {
	db := storetest.Postgres(t)
	e := newRedirectEnv(t, db, handlers.Config{})
	l := e.create(`{"destination_url":"https://example.com/before"}`)
	if r := e.visit(visit{path: "/" + l.Slug}); r.location() != "https://example.com/before" {
		t.Fatalf("first visit: %q", r.location())
	}
	other, err := store.Open(context.Background(), storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	key := store.LinkKey{Domain: l.Domain, SlugKey: strings.ToLower(l.Slug)}
	if err := other.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Table("links").Set("destination_url = ?", "https://example.com/after").Where("id = ?", l.Id).Exec(ctx); err != nil {
			return err
		}
		return other.LinkChanges.Announce(ctx, tx, key)
	}); err != nil {
		t.Fatal(err)
	}
	await.Equal(t, "the other process's change to reach the cache",
		func() string { return e.visit(visit{path: "/" + l.Slug}).location() }, "https://example.com/after")
}

// Every visit is recorded with its class; bots, previews, monitors and HEAD requests are flagged, never dropped.
func TestRedirectRecordsEveryClassOfVisit(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com/a"}`)
		want := map[string]string{
			browserUA: store.ClickHuman,
			"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)": store.ClickBot,
			"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)":               store.ClickPreview,
			"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)":   store.ClickMonitor,
			"python-requests/2.32.3": store.ClickBot,
		}
		for ua := range want {
			e.visit(visit{path: "/" + l.Slug, ua: ua, referer: "https://news.example/item"})
		}
		e.visit(visit{method: http.MethodHead, path: "/" + l.Slug})
		cs := e.awaitClicks(l.Id, len(want)+1)
		got := map[string]int{}
		for _, c := range cs {
			got[c.Class]++
			if c.Class != store.ClickHead && c.Class != want[c.UserAgent] {
				t.Errorf("%q recorded as %s, want %s", c.UserAgent, c.Class, want[c.UserAgent])
			}
			if c.ReferrerHost != nil && *c.ReferrerHost != "news.example" {
				t.Errorf("referrer host %q", *c.ReferrerHost)
			}
		}
		if got[store.ClickHead] != 1 || got[store.ClickHuman] != 1 || got[store.ClickBot] != 2 {
			t.Errorf("classes %v", got)
		}
	})
}

// Under 50 concurrent visits of a link with max_clicks 5, exactly 5 people reach the destination; bots before them
// spend nothing; link.max_clicks_reached is emitted once.
func TestMaxClicksUnderConcurrency(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com/prize","max_clicks":5,"expired_url":"https://example.com/gone"}`)
		for range 3 {
			if r := e.visit(visit{path: "/" + l.Slug, ua: "facebookexternalhit/1.1"}); r.location() != "https://example.com/prize" {
				t.Fatalf("preview fetch: %d %q", r.status, r.location())
			}
		}
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				r := e.visit(visit{path: fmt.Sprintf("/%s?n=%d", l.Slug, i)})
				mu.Lock()
				defer mu.Unlock()
				got[strings.Split(r.location(), "?")[0]]++
			})
		}
		wg.Wait()
		if got["https://example.com/prize"] != 5 || got["https://example.com/gone"] != 45 {
			t.Fatalf("answers %v; want 5 to the destination and 45 expired", got)
		}
		evs := e.events(e.ws.ID, "link.max_clicks_reached")
		if len(evs) != 1 {
			t.Fatalf("%d link.max_clicks_reached events, want 1", len(evs))
		}
		checkEventSchema(t, "LinkMaxClicksReachedEvent", evs[0].Data)
		var ev gen.LinkMaxClicksReachedEvent
		if err := json.Unmarshal(evs[0].Data, &ev); err != nil || ev.Link.Status != "max_clicks_reached" || ev.Link.Clicks != 5 {
			t.Errorf("event %s (%v)", evs[0].Data, err)
		}
		cs := e.awaitClicks(l.Id, 8)
		humans := 0
		for _, c := range cs {
			if c.Class == store.ClickHuman {
				humans++
			}
		}
		if humans != 5 {
			t.Errorf("%d human clicks recorded, want 5", humans)
		}
		if r := e.visit(visit{path: "/" + l.Slug, ua: "facebookexternalhit/1.1"}); r.location() != "https://example.com/gone" {
			t.Errorf("a bot after the cap: %q", r.location())
		}
	})
}

// Concurrent visits of an expired link all get the expired answer, and two notifiers emit link.expired once.
func TestExpiryUnderConcurrency(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		check := links.Config{ExpiryCheck: 20 * time.Millisecond}
		e := newRedirectEnvWith(t, db, handlers.Config{}, check)
		// A second server over the same database: two notifiers race for the same expired link.
		check.ShortBaseURL = "https://" + e.domain
		second, _ := newClickRecorder(t, db)
		newEnv(t, db, withLinks(t, db, handlers.Config{BaseURL: "http://app.switchboard.test",
			Redirects: handlers.RedirectOptions{Clicks: second}}, check))
		// The link expires once created: an expiry a moment ahead could pass before a loaded server validates it.
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
		l := e.create(`{"destination_url":"https://example.com/a","expires_at":"` + later + `"}`)
		if _, err := db.Bun().NewUpdate().Table("links").Set("expires_at = ?", time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)).
			Where("id = ?", l.Id).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		await.Until(t, "link.expired", func() int { return len(e.events(e.ws.ID, "link.expired")) },
			func(n int) bool { return n > 0 })
		var wg sync.WaitGroup
		var mu sync.Mutex
		answers := map[int]int{}
		for range 50 {
			wg.Go(func() {
				r := e.visit(visit{path: "/" + l.Slug, accept: "application/json"})
				mu.Lock()
				answers[r.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if answers[http.StatusGone] != 50 {
			t.Errorf("answers after expiry %v, want 50 × 410", answers)
		}
		evs := e.events(e.ws.ID, "link.expired")
		if len(evs) != 1 {
			t.Fatalf("%d link.expired events, want 1", len(evs))
		}
		checkEventSchema(t, "LinkExpiredEvent", evs[0].Data)
	})
}

// Statistics and link.clicked events agree with the clicks recorded: totals by class equal the click rows, and
// every event matches the LinkClickedEvent schema.
func TestClicksReachStatsAndEvents(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		if _, err := db.Webhooks.Create(context.Background(), store.NewWebhookEndpoint{WorkspaceID: e.ws.ID,
			URL: "https://receiver.example/hook", Events: []string{"link.clicked"},
			SealSecret: func(id string) string { return "sealed-" + id }}); err != nil {
			t.Fatal(err)
		}
		l := e.create(`{"destination_url":"https://example.com/a","external_id":"crm-1"}`)
		visits := []visit{
			{path: "/" + l.Slug, referer: "https://news.example/x"},
			{path: "/" + l.Slug},
			{path: "/" + l.Slug, ua: "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"},
			{path: "/" + l.Slug, ua: "curl/8.5.0"},
			{path: "/" + l.Slug, ua: "Twitterbot/1.0"},
			{path: "/" + l.Slug, method: http.MethodHead},
		}
		for _, v := range visits {
			if r := e.visit(v); r.location() != "https://example.com/a" {
				t.Fatalf("visit %+v: %d %q", v, r.status, r.location())
			}
		}
		cs := e.awaitClicks(l.Id, len(visits))
		var humans, others int64
		for _, c := range cs {
			if c.Class == store.ClickHuman {
				humans++
			} else {
				others++
			}
		}
		r := e.call(http.MethodGet, "/api/v1/links/"+l.Id+"/stats?interval=day", "")
		var st gen.LinkStats
		r.json(t, &st)
		if st.Totals.Humans != humans || st.Totals.Bots != others || st.Totals.UniqueHumans != 2 || humans != 3 {
			t.Errorf("stats totals %+v; clicks: %d humans, %d others (want 3 humans, 2 unique)", st.Totals, humans, others)
		}
		r = e.call(http.MethodGet, "/api/v1/links/"+l.Id, "")
		var got gen.Link
		r.json(t, &got)
		if got.Clicks != humans || got.LastClickedAt == nil {
			t.Errorf("link clicks %d, last clicked %v", got.Clicks, got.LastClickedAt)
		}
		evs := e.events(e.ws.ID, "link.clicked")
		if len(evs) != len(visits) {
			t.Fatalf("%d link.clicked events, want %d", len(evs), len(visits))
		}
		for _, ev := range evs {
			checkEventSchema(t, "LinkClickedEvent", ev.Data)
			var data gen.LinkClickedEvent
			if err := json.Unmarshal(ev.Data, &data); err != nil || data.Link.Id != l.Id || data.Link.ExternalId == nil ||
				*data.Link.ExternalId != "crm-1" || data.Click.LinkId != l.Id {
				t.Errorf("event data %s (%v)", ev.Data, err)
			}
		}
	})
}

// A link whose destination leads back to this server under a name the create check cannot know (a name that
// resolves here) makes a loop: a client following it counts one click, not one per hop. A chain through such a
// name counts the first link only; a visit of the second link of its own counts as usual.
func TestRedirectsWeMadeAreNoClicks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newRedirectEnv(t, db, handlers.Config{})
		alias := "alias-" + strings.ToLower(store.NewID("d")[6:14]) + ".example"
		slug := "loop-" + strings.ToLower(store.NewID("s")[6:14])
		loop := e.create(`{"destination_url":"http://` + alias + `/` + slug + `","slug":"` + slug + `"}`)
		// A client that follows redirects as browsers do, for which every host is this server.
		addr := strings.TrimPrefix(e.url, "http://")
		follower := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.domain+"/"+slug, nil)
		req.Header.Set("User-Agent", browserUA)
		_, err := follower.Do(req)
		if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
			t.Fatalf("following the loop: %v, want the client's hop limit", err)
		}
		e.awaitClicks(loop.Id, 1)
		e.awaitRecorded() // hops counted by mistake would be written now
		if n := len(e.clickRows(loop.Id)); n != 1 {
			t.Errorf("%d clicks recorded for one visit of a loop of 11 requests, want 1", n)
		}

		second := e.create(`{"destination_url":"https://example.com/final"}`)
		first := e.create(`{"destination_url":"http://` + alias + `/` + second.Slug + `"}`)
		r := e.visit(visit{path: "/" + first.Slug})
		hop := e.visit(visit{path: "/" + second.Slug, host: alias})
		if r.location() != "http://"+alias+"/"+second.Slug || hop.status != http.StatusFound || hop.location() != "https://example.com/final" {
			t.Fatalf("chain: %d %q, then %d %q", r.status, r.location(), hop.status, hop.location())
		}
		e.awaitClicks(first.Id, 1)
		e.awaitRecorded()
		if n := len(e.clickRows(second.Id)); n != 0 {
			t.Errorf("the hop of a chain was counted as %d clicks of its second link", n)
		}
		e.visit(visit{path: "/" + second.Slug, host: alias})
		e.awaitClicks(second.Id, 1)
	})
}
