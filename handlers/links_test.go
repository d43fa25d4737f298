package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// linkEnv is a server with a short domain of its own (slugs are global per domain and the PostgreSQL database is
// shared by the tests of a binary) and a workspace with a links:write key.
type linkEnv struct {
	*env
	ws     store.Workspace
	key    string
	domain string
	// recorder is the click recorder of a redirect env (newRedirectEnv), nil otherwise.
	recorder *clicks.Recorder
	// changes records the short URLs published by LinkChanges in this process.
	mu      sync.Mutex
	changes []store.LinkKey
}

func newLinkEnv(t *testing.T, db *store.DB, cfg handlers.Config) *linkEnv {
	t.Helper()
	return newLinkEnvWith(t, db, cfg, links.Config{})
}

// newLinkEnvWith is newLinkEnv with a links service configured by lc.
func newLinkEnvWith(t testing.TB, db *store.DB, cfg handlers.Config, lc links.Config) *linkEnv {
	t.Helper()
	domain := strings.ToLower("t" + ulid.Make().String()[20:] + ".sb.test")
	if lc.ShortBaseURL == "" {
		lc.ShortBaseURL = "https://" + domain
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://app.switchboard.test"
	}
	if cfg.Logger == nil { // internal errors show in the test's output
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	e := &linkEnv{env: newEnv(t, db, withLinks(t, db, cfg, lc)), domain: domain}
	e.ws = e.workspace("Links " + domain)
	e.key, _ = e.env.key(e.ws.ID, "links:write")
	db.LinkChanges.Subscribe(func(k store.LinkKey) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.changes = append(e.changes, k)
	})
	return e
}

// withLinks gives cfg the links service of lc (over cfg's outbox, made when cfg has none) and, when cfg has a click
// recorder, the redirect cache; as main does, it runs the service's expiry announcer and the cache's change watch
// (until the test ends) when redirects are served.
func withLinks(t testing.TB, db *store.DB, cfg handlers.Config, lc links.Config) handlers.Config {
	t.Helper()
	if cfg.Events == nil {
		cfg.Events = events.NewOutbox(db, events.Builtin())
	}
	if lc.BaseURL == "" {
		lc.BaseURL = cfg.BaseURL
	}
	lc.Logger = cfg.Logger
	svc, err := links.New(db, cfg.Events, lc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Links = svc
	if cfg.Redirects.Clicks == nil {
		return cfg
	}
	cfg.Redirects.Cache = linkcache.New(svc.Resolve, db.LinkChanges, linkcache.Config{})
	jobs := runner.New(cfg.Logger)
	jobs.Go(0, "link expiry announcer", svc.Run)
	jobs.Go(0, "redirect cache watch", cfg.Redirects.Cache.Run)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- jobs.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return cfg
}

// testLog writes log lines into the test's output.
type testLog struct{ t testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// published returns the keys published since the last call.
func (e *linkEnv) published() []store.LinkKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.changes
	e.changes = nil
	return out
}

// call sends a request with the env's key.
func (e *linkEnv) call(method, path, body string) *response {
	e.t.Helper()
	return e.do(request{method: method, path: path, key: e.key, body: body})
}

// create makes a link and returns it; the answer must be 201 with its Location.
func (e *linkEnv) create(body string) gen.Link {
	e.t.Helper()
	r := e.call(http.MethodPost, "/api/v1/links", body)
	if r.StatusCode != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", body, r.StatusCode, r.body)
	}
	var l gen.Link
	r.json(e.t, &l)
	if loc := r.Header.Get("Location"); loc != "/api/v1/links/"+l.Id {
		e.t.Fatalf("Location = %q, want /api/v1/links/%s", loc, l.Id)
	}
	return l
}

// events returns the workspace's events of a type, oldest first.
func (e *linkEnv) events(workspaceID, eventType string) []store.Event {
	e.t.Helper()
	var evs []store.Event
	if err := e.db.Bun().NewSelect().Model(&evs).Where("workspace_id = ? AND type = ?", workspaceID, eventType).
		Order("id").Scan(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// checkEventSchema validates event data against the spec's component schema of its type.
func checkEventSchema(t *testing.T, schema string, data []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if err := specDoc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Fatalf("event data does not match %s: %v\n%s", schema, err, data)
	}
}

func TestCreateLink(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com/launch"}`)
		if len(l.Slug) != links.GeneratedLength || strings.Trim(l.Slug, links.Alphabet) != "" {
			t.Errorf("generated slug %q: want %d characters of the alphabet", l.Slug, links.GeneratedLength)
		}
		if l.Domain != e.domain || l.ShortUrl != "https://"+e.domain+"/"+l.Slug || l.Status != "active" ||
			l.RedirectType != 302 || !l.ForwardQuery || l.Archived || l.Clicks != 0 || len(l.Tags) != 0 {
			t.Errorf("defaults: %+v", l)
		}
		if got := e.published(); !slices.Equal(got, []store.LinkKey{{Domain: e.domain, SlugKey: strings.ToLower(l.Slug)}}) {
			t.Errorf("published %v", got)
		}

		full := e.create(`{"destination_url":"https://example.com/pricing","slug":"Black-Friday","title":"BF",
			"tags":["campaign","bf"],"external_id":"crm-1","utm":{"source":"news","medium":"email","campaign":"bf",
			"term":"t","content":"c"},"expires_at":"2099-12-01T00:00:00.1234567Z","expired_url":"https://example.com/over",
			"max_clicks":10,"redirect_type":308,"forward_query":false,"metadata":{"owner":"growth","n":1.5},"archived":true}`)
		want := gen.Link{Slug: "Black-Friday", DestinationUrl: "https://example.com/pricing", RedirectType: 308}
		if full.Slug != want.Slug || *full.Title != "BF" || !slices.Equal(full.Tags, []string{"campaign", "bf"}) ||
			*full.ExternalId != "crm-1" || *full.Utm.Source != "news" || *full.Utm.Content != "c" ||
			!full.ExpiresAt.Equal(time.Date(2099, 12, 1, 0, 0, 0, 123456000, time.UTC)) ||
			*full.ExpiredUrl != "https://example.com/over" || *full.MaxClicks != 10 || full.RedirectType != 308 ||
			full.ForwardQuery || full.Metadata["owner"] != "growth" || !full.Archived {
			t.Errorf("full link: %+v", full)
		}
		got := e.call(http.MethodGet, "/api/v1/links/"+full.Id, "")
		var again gen.Link
		got.json(t, &again)
		if got.StatusCode != 200 || again.Id != full.Id || !again.ExpiresAt.Equal(*full.ExpiresAt) {
			t.Errorf("get: %d %s", got.StatusCode, got.body)
		}
		stored, err := db.Links.Get(context.Background(), e.ws.ID, full.Id)
		if err != nil || stored.UTM["utm_source"] != "news" || stored.SlugKey != "black-friday" {
			t.Errorf("stored %+v, %v", stored, err)
		}

		evs := e.events(e.ws.ID, "link.created")
		if len(evs) != 2 {
			t.Fatalf("%d link.created events, want 2", len(evs))
		}
		for _, ev := range evs {
			checkEventSchema(t, "LinkCreatedEvent", ev.Data)
		}
		var data gen.LinkCreatedEvent
		if err := json.Unmarshal(evs[1].Data, &data); err != nil || data.Link.Id != full.Id || data.Link.Slug != "Black-Friday" {
			t.Errorf("event data %s", evs[1].Data)
		}
	})
}

// Every field's refusal names its pointer: the schema's (kin-openapi) and the server's own rules alike.
func TestCreateLinkValidation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnvWith(t, db, handlers.Config{}, links.Config{
			Domains: []string{"Go.Example.org"}, AllowedSchemes: []string{"mailto"}, BlockedHosts: []string{"evil.example"},
		})
		deep := `{"a":{"b":{"c":{"d":{"e":{"f":1}}}}}}`
		for _, tc := range []struct {
			name, body, pointer, detail string
		}{
			{"no destination", `{}`, "/destination_url", ""},
			{"relative destination", `{"destination_url":"/x"}`, "/destination_url", "absolute"},
			{"javascript destination", `{"destination_url":"javascript:alert(1)"}`, "/destination_url", "not allowed"},
			{"userinfo", `{"destination_url":"https://u:p@example.com"}`, "/destination_url", "user name or password"},
			{"too long", `{"destination_url":"https://example.com/` + strings.Repeat("a", 2040) + `"}`, "/destination_url", ""},
			{"loop to short domain", `{"destination_url":"https://` + e.domain + `/abc"}`, "/destination_url", "loop"},
			{"loop to product", `{"destination_url":"http://app.switchboard.test/docs"}`, "/destination_url", "loop"},
			{"loop to other short domain", `{"destination_url":"https://go.example.org/x"}`, "/destination_url", "loop"},
			{"blocked host", `{"destination_url":"https://a.evil.example/x"}`, "/destination_url", "blocked"},
			{"slug pattern", `{"destination_url":"https://example.com","slug":"-x"}`, "/slug", ""},
			{"slug too long", `{"destination_url":"https://example.com","slug":"` + strings.Repeat("a", 64) + `"}`, "/slug", ""},
			{"reserved slug", `{"destination_url":"https://example.com","slug":"API"}`, "/slug", "reserved"},
			{"unknown domain", `{"destination_url":"https://example.com","domain":"other.example"}`, "/domain", "not a short domain"},
			{"domain pattern", `{"destination_url":"https://example.com","domain":"https://x"}`, "/domain", ""},
			{"title too long", `{"destination_url":"https://example.com","title":"` + strings.Repeat("t", 201) + `"}`, "/title", ""},
			{"too many tags", `{"destination_url":"https://example.com","tags":[` + strings.Repeat(`"t",`, 20) + `"u"]}`, "/tags", ""},
			{"duplicate tags", `{"destination_url":"https://example.com","tags":["a","a"]}`, "/tags", ""},
			{"control character in tag", `{"destination_url":"https://example.com","tags":["a\u0001"]}`, "/tags/0", ""},
			{"external id pattern", `{"destination_url":"https://example.com","external_id":"a b"}`, "/external_id", ""},
			{"utm unknown member", `{"destination_url":"https://example.com","utm":{"id":"x"}}`, "/utm/id", "unsupported"},
			{"expires_at format", `{"destination_url":"https://example.com","expires_at":"tomorrow"}`, "/expires_at", ""},
			{"expires_at in the past", `{"destination_url":"https://example.com","expires_at":"2020-01-01T00:00:00Z"}`, "/expires_at", "future"},
			{"expired_url", `{"destination_url":"https://example.com","expired_url":"ftp://example.com"}`, "/expired_url", "not allowed"},
			{"max_clicks zero", `{"destination_url":"https://example.com","max_clicks":0}`, "/max_clicks", ""},
			{"redirect_type", `{"destination_url":"https://example.com","redirect_type":303}`, "/redirect_type", ""},
			{"forward_query type", `{"destination_url":"https://example.com","forward_query":"yes"}`, "/forward_query", ""},
			{"metadata too large", `{"destination_url":"https://example.com","metadata":{"a":"` + strings.Repeat("x", 8200) + `"}}`, "/metadata", "8192"},
			{"metadata too deep", `{"destination_url":"https://example.com","metadata":` + deep + `}`, "/metadata", "deeper than 5"},
			{"archived type", `{"destination_url":"https://example.com","archived":1}`, "/archived", ""},
			{"unknown field", `{"destination_url":"https://example.com","clicks":5}`, "/clicks", "unsupported"},
			{"unknown field named like a pointer", `{"destination_url":"https://example.com","a/b~c":5}`, "/a~1b~0c", "unsupported"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := e.call(http.MethodPost, "/api/v1/links", tc.body).problem(t, http.StatusBadRequest, "validation_failed")
				found := false
				for _, fe := range p.Errors {
					if strings.HasPrefix(fe["pointer"], tc.pointer) && strings.Contains(fe["detail"], tc.detail) {
						found = true
					}
				}
				if !found {
					t.Errorf("errors %v: want pointer %q with %q", p.Errors, tc.pointer, tc.detail)
				}
			})
		}
		ok := e.create(`{"destination_url":"mailto:team@example.com","domain":"GO.example.org","slug":"mail"}`)
		if ok.Domain != "go.example.org" || ok.ShortUrl != "https://go.example.org/mail" {
			t.Errorf("second domain: %+v", ok)
		}
		if n := len(e.events(e.ws.ID, "link.created")); n != 1 {
			t.Errorf("%d link.created events, want only the one of the valid link", n)
		}
	})
}

// Reserved words are every top-level route of the product, whatever the case, and the static list; routes mounted
// later (the console) are reserved too.
func TestReservedSlugs(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		e.srv.Mount(func(ec *echo.Echo) { ec.GET("/pricing-page/:x", func(echo.Context) error { return nil }) })
		for _, slug := range []string{"api", "API", "docs", "Docs", "user", "healthz", "readyz", "metrics",
			"problems", "static", "assets", "login", "logout", "admin", "www", "pricing-page"} {
			p := e.call(http.MethodPost, "/api/v1/links", `{"destination_url":"https://example.com","slug":"`+slug+`"}`).
				problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["pointer"] != "/slug" || !strings.Contains(p.Errors[0]["detail"], "reserved") {
				t.Errorf("slug %q: %v", slug, p.Errors)
			}
		}
		e.create(`{"destination_url":"https://example.com","slug":"apis"}`)
	})
}

// status sends a request outside the test goroutine's helpers (safe in goroutines) and returns its status.
func status(t *testing.T, url, method, path, key, body string) int {
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func TestSlugUniquenessAcrossWorkspaces(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		otherKey, _ := e.env.key(e.workspace("Other").ID, "links:write")
		l := e.create(`{"destination_url":"https://example.com","slug":"Promo","external_id":"x-1"}`)
		e.call(http.MethodPost, "/api/v1/links", `{"destination_url":"https://example.com","slug":"PROMO"}`).
			problem(t, http.StatusConflict, "slug_taken")
		e.do(request{method: http.MethodPost, path: "/api/v1/links", key: otherKey,
			body: `{"destination_url":"https://example.com","slug":"promo"}`}).problem(t, http.StatusConflict, "slug_taken")
		p := e.call(http.MethodPost, "/api/v1/links", `{"destination_url":"https://example.com","external_id":"x-1"}`).
			problem(t, http.StatusConflict, "external_id_taken")
		if !strings.Contains(p.Detail, "x-1") {
			t.Errorf("detail %q", p.Detail)
		}
		// Another workspace may use the same external ID.
		if s := status(t, e.url, http.MethodPost, "/api/v1/links", otherKey, `{"destination_url":"https://example.com","external_id":"x-1"}`); s != 201 {
			t.Errorf("other workspace, same external_id: %d", s)
		}
		r := e.call(http.MethodGet, "/api/v1/links/lookup?slug=pROMO", "")
		var found gen.Link
		r.json(t, &found)
		if r.StatusCode != 200 || found.Id != l.Id {
			t.Errorf("lookup: %d %s", r.StatusCode, r.body)
		}
		r = e.call(http.MethodGet, "/api/v1/links/lookup?slug=Promo&domain="+strings.ToUpper(e.domain), "")
		if r.StatusCode != 200 {
			t.Errorf("lookup with domain: %d %s", r.StatusCode, r.body)
		}
		e.do(request{path: "/api/v1/links/lookup?slug=promo", key: otherKey}).problem(t, http.StatusNotFound, "not_found")
		e.call(http.MethodGet, "/api/v1/links/lookup?slug=nope", "").problem(t, http.StatusNotFound, "not_found")
		e.call(http.MethodGet, "/api/v1/links/lookup?slug=-x", "").problem(t, http.StatusBadRequest, "validation_failed")
		if n := len(e.events(e.ws.ID, "link.created")); n != 1 {
			t.Errorf("%d link.created events; refused creates must emit nothing", n)
		}
	})
}

// Of 20 concurrent creates of one slug (from two workspaces) exactly one wins.
func TestConcurrentCustomSlug(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		otherKey, _ := e.env.key(e.workspace("Other").ID, "links:write")
		var wg sync.WaitGroup
		statuses := make([]int, 20)
		for i := range statuses {
			key := e.key
			if i%2 == 1 {
				key = otherKey
			}
			wg.Go(func() {
				statuses[i] = status(t, e.url, http.MethodPost, "/api/v1/links", key,
					fmt.Sprintf(`{"destination_url":"https://example.com/%d","slug":"Race"}`, i))
			})
		}
		wg.Wait()
		created, taken := 0, 0
		for _, s := range statuses {
			switch s {
			case 201:
				created++
			case 409:
				taken++
			}
		}
		if created != 1 || taken != 19 {
			t.Fatalf("statuses %v: want one 201 and nineteen 409", statuses)
		}
		var n int
		if err := db.Bun().NewSelect().Table("links").ColumnExpr("count(*)").
			Where("domain = ? AND slug_key = 'race'", e.domain).Scan(context.Background(), &n); err != nil || n != 1 {
			t.Fatalf("%d links with the slug, %v", n, err)
		}
	})
}

func TestSlugTombstones(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnvWith(t, db, handlers.Config{}, links.Config{TombstonePeriod: time.Hour})
		otherKey, _ := e.env.key(e.workspace("Other").ID, "links:write")
		other := func(slug string) int {
			return status(t, e.url, http.MethodPost, "/api/v1/links", otherKey, `{"destination_url":"https://example.com","slug":"`+slug+`"}`)
		}
		l := e.create(`{"destination_url":"https://example.com","slug":"Gone","tags":["a"]}`)
		e.published()
		before := time.Now()
		if r := e.call(http.MethodDelete, "/api/v1/links/"+l.Id, ""); r.StatusCode != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.StatusCode, r.body)
		}
		key := store.LinkKey{Domain: e.domain, SlugKey: "gone"}
		if got := e.published(); !slices.Equal(got, []store.LinkKey{key}) {
			t.Errorf("published %v", got)
		}
		e.call(http.MethodGet, "/api/v1/links/"+l.Id, "").problem(t, http.StatusNotFound, "not_found")
		e.call(http.MethodDelete, "/api/v1/links/"+l.Id, "").problem(t, http.StatusNotFound, "not_found")
		var until time.Time
		if err := db.Bun().NewSelect().Table("slug_tombstones").Column("until").
			Where("domain = ? AND slug_key = 'gone' AND workspace_id = ?", e.domain, e.ws.ID).Scan(ctx, &until); err != nil {
			t.Fatalf("tombstone: %v", err)
		}
		if d := until.Sub(before); d < time.Hour-time.Second || d > time.Hour+5*time.Second {
			t.Errorf("tombstone until %v, want about an hour after %v", until, before)
		}
		for table, where := range map[string]string{"link_purges": "link_id = ?", "link_tags": "link_id = ?"} {
			n, err := db.Bun().NewSelect().Table(table).Where(where, l.Id).Count(ctx)
			want := map[string]int64{"link_purges": 1, "link_tags": 0}[table]
			if err != nil || n != want {
				t.Errorf("%s rows of the deleted link = %d, want %d (%v)", table, n, want, err)
			}
		}
		deleted := e.events(e.ws.ID, "link.deleted")
		if len(deleted) != 1 {
			t.Fatalf("%d link.deleted events", len(deleted))
		}
		checkEventSchema(t, "LinkDeletedEvent", deleted[0].Data)
		var data gen.LinkDeletedEvent
		if err := json.Unmarshal(deleted[0].Data, &data); err != nil || data.Link.Id != l.Id || data.Link.Tags[0] != "a" {
			t.Errorf("link.deleted data %s", deleted[0].Data)
		}

		if s := other("gone"); s != http.StatusConflict {
			t.Errorf("other workspace takes a tombstoned slug: %d, want 409", s)
		}
		back := e.create(`{"destination_url":"https://example.com","slug":"GONE"}`)
		if n, _ := db.Bun().NewSelect().Table("slug_tombstones").Where("domain = ? AND slug_key = 'gone'", e.domain).Count(ctx); n != 0 {
			t.Errorf("tombstone left after its workspace took the slug back")
		}
		e.call(http.MethodDelete, "/api/v1/links/"+back.Id, "")
		if _, err := db.Bun().NewUpdate().Table("slug_tombstones").Set("until = ?", time.Now().Add(-time.Second).UTC()).
			Where("domain = ? AND slug_key = 'gone'", e.domain).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if s := other("gone"); s != http.StatusCreated {
			t.Errorf("other workspace after the tombstone ran out: %d, want 201", s)
		}

		// A new slug frees the old one for this workspace only.
		moved := e.create(`{"destination_url":"https://example.com","slug":"old-name"}`)
		e.published()
		r := e.call(http.MethodPatch, "/api/v1/links/"+moved.Id, `{"slug":"new-name"}`)
		if r.StatusCode != 200 {
			t.Fatalf("re-slug: %d %s", r.StatusCode, r.body)
		}
		got := e.published()
		if !slices.Contains(got, store.LinkKey{Domain: e.domain, SlugKey: "old-name"}) ||
			!slices.Contains(got, store.LinkKey{Domain: e.domain, SlugKey: "new-name"}) {
			t.Errorf("re-slug published %v, want both keys", got)
		}
		if s := other("old-name"); s != http.StatusConflict {
			t.Errorf("other workspace takes a re-slugged link's old slug: %d", s)
		}
		e.create(`{"destination_url":"https://example.com","slug":"old-name"}`)
	})
}

func TestCreateLinksBulk(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		otherKey, _ := e.env.key(e.workspace("Other").ID, "links:write")
		if s := status(t, e.url, http.MethodPost, "/api/v1/links", otherKey, `{"destination_url":"https://example.com","slug":"theirs"}`); s != 201 {
			t.Fatal(s)
		}
		e.create(`{"destination_url":"https://example.com","external_id":"ext-1"}`)
		e.published()
		r := e.call(http.MethodPost, "/api/v1/links/bulk", `{"links":[
			{"destination_url":"https://example.com/a","slug":"bulk-a"},
			{"destination_url":"https://`+e.domain+`/loop","expired_url":"https://evil.invalid"},
			{"destination_url":"https://example.com/c","slug":"docs"},
			{"destination_url":"https://example.com/d","slug":"dup"},
			{"destination_url":"https://example.com/e","slug":"DUP"},
			{"destination_url":"https://example.com/f","slug":"theirs"},
			{"destination_url":"https://example.com/g","external_id":"ext-1"},
			{"destination_url":"https://example.com/h"}]}`)
		if r.StatusCode != 200 {
			t.Fatalf("bulk: %d %s", r.StatusCode, r.body)
		}
		var res gen.LinkBulkResult
		r.json(t, &res)
		want := []struct{ status, code, pointer string }{
			{"created", "", ""}, {"failed", "validation_failed", "/destination_url"}, {"failed", "validation_failed", "/slug"},
			{"created", "", ""}, {"failed", "slug_taken", ""}, {"failed", "slug_taken", ""},
			{"failed", "external_id_taken", ""}, {"created", "", ""},
		}
		if res.Created != 3 || res.Failed != 5 || len(res.Data) != len(want) {
			t.Fatalf("result %s", r.body)
		}
		for i, w := range want {
			d := res.Data[i]
			if d.Index != i || string(d.Status) != w.status {
				t.Errorf("item %d: %+v, want %s", i, d, w.status)
				continue
			}
			if w.status == "created" {
				if d.Link == nil || d.Error != nil {
					t.Errorf("item %d: %s", i, r.body)
				}
				continue
			}
			if d.Error == nil || string(d.Error.Code) != w.code {
				t.Errorf("item %d: error %+v, want %s", i, d.Error, w.code)
				continue
			}
			if w.pointer != "" && (d.Error.Errors == nil || (*d.Error.Errors)[0].Pointer == nil || *(*d.Error.Errors)[0].Pointer != w.pointer) {
				t.Errorf("item %d: errors %+v, want pointer %s", i, d.Error.Errors, w.pointer)
			}
		}
		if errs := *res.Data[1].Error.Errors; len(errs) != 1 {
			t.Errorf("item 1: %d field errors, want 1 (the expired_url is fine): %s", len(errs), r.body)
		}
		evs := e.events(e.ws.ID, "link.created")
		if len(evs) != 1+3 {
			t.Errorf("%d link.created events, want one per created link (+1 before)", len(evs))
		}
		if n := len(e.published()); n != 3 {
			t.Errorf("%d keys published, want 3", n)
		}

		var b strings.Builder
		b.WriteString(`{"links":[`)
		for i := range 1000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"destination_url":"https://example.com/p/%d","tags":["bulk"],"title":"Item %d"}`, i, i)
		}
		b.WriteString(`]}`)
		start := time.Now()
		r = e.call(http.MethodPost, "/api/v1/links/bulk", b.String())
		elapsed := time.Since(start)
		r.json(t, &res)
		if r.StatusCode != 200 || res.Created != 1000 || res.Failed != 0 {
			t.Fatalf("1000 items: %d created %d failed", res.Created, res.Failed)
		}
		t.Logf("POST /api/v1/links/bulk with 1000 links on %s: %v", db.Dialect(), elapsed.Round(time.Millisecond))
		if n := len(e.events(e.ws.ID, "link.created")); n != 1004 {
			t.Errorf("%d link.created events, want 1004", n)
		}
	})
}

// A bulk item whose URL is not one fails alone, as the operation documents. For that the contract must not declare
// the items' URLs as format: uri: a client or gateway that follows the contract (Prism) would refuse the whole
// request before the server could judge each item.
func TestCreateLinksBulkBadURLFailsItsItem(t *testing.T) {
	item := specDoc.Components.Schemas["LinkBulkCreate"].Value.Properties["links"].Value.Items.Value
	for _, name := range []string{"destination_url", "expired_url"} {
		if f := item.Properties[name].Value.Format; f != "" {
			t.Errorf("a bulk item's %s has format %q: a spec-following client refuses the whole request", name, f)
		}
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		r := e.call(http.MethodPost, "/api/v1/links/bulk", `{"links":[
			{"destination_url":"not a url"},
			{"destination_url":"https://example.com/ok","expired_url":"also not one"},
			{"destination_url":"https://example.com/fine"}]}`)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("bulk: %d %s", r.StatusCode, r.body)
		}
		var res gen.LinkBulkResult
		r.json(t, &res)
		if res.Created != 1 || res.Failed != 2 {
			t.Fatalf("result %s", r.body)
		}
		for i, pointer := range []string{"/destination_url", "/expired_url"} {
			d := res.Data[i]
			if d.Error == nil || d.Error.Code != "validation_failed" || d.Error.Errors == nil ||
				(*d.Error.Errors)[0].Pointer == nil || *(*d.Error.Errors)[0].Pointer != pointer {
				t.Errorf("item %d: %s, want validation_failed at %s", i, r.body, pointer)
			}
		}
	})
}

// A database failure while a chunk is stored fails the items of that chunk, and only those, with internal_error;
// the answer is still 200, and nothing of the failed chunk was created, announced or emitted.
func TestCreateLinksBulkChunkFailure(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		poison := "https://example.com/poison-" + strings.ToLower(ulid.Make().String())
		storetest.FailInserts(t, db, "links", "destination_url", poison)
		const bulkChunk = 200   // the chunk size the spec states
		const n = bulkChunk + 5 // a full chunk, then a short one with the poisoned item
		var b strings.Builder
		b.WriteString(`{"links":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			destination := fmt.Sprintf("https://example.com/c/%d", i)
			if i == n-2 {
				destination = poison
			}
			fmt.Fprintf(&b, `{"destination_url":%q}`, destination)
		}
		b.WriteString(`]}`)
		r := e.call(http.MethodPost, "/api/v1/links/bulk", b.String())
		var res gen.LinkBulkResult
		r.json(t, &res)
		if r.StatusCode != 200 || res.Created != bulkChunk || res.Failed != n-bulkChunk || len(res.Data) != n {
			t.Fatalf("%d: %d created, %d failed of %d", r.StatusCode, res.Created, res.Failed, len(res.Data))
		}
		for i, d := range res.Data {
			if i < bulkChunk {
				if d.Status != gen.LinkBulkItemStatusCreated || d.Link == nil {
					t.Errorf("item %d of the stored chunk: %+v", i, d)
				}
				continue
			}
			if d.Status != gen.LinkBulkItemStatusFailed || d.Error == nil || d.Error.Code != "internal_error" ||
				d.Error.Status != http.StatusInternalServerError || strings.Contains(d.Error.Detail, "injected") {
				t.Errorf("item %d of the failed chunk: %+v %+v", i, d, d.Error)
			}
		}
		if got := len(e.events(e.ws.ID, "link.created")); got != bulkChunk {
			t.Errorf("%d link.created events, want %d (none of the failed chunk)", got, bulkChunk)
		}
		if got := len(e.published()); got != bulkChunk {
			t.Errorf("%d keys published, want %d", got, bulkChunk)
		}
		stored, err := db.Bun().NewSelect().Table("links").Where("workspace_id = ?", e.ws.ID).Count(context.Background())
		if err != nil || stored != bulkChunk {
			t.Errorf("%d links stored, want %d (%v)", stored, bulkChunk, err)
		}
	})
}

func TestUpsertLinkByExternalID(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		body := `{"destination_url":"https://example.com/deal","title":"Deal","tags":["crm"],"slug":"deal-1","max_clicks":5}`
		r := e.call(http.MethodPut, "/api/v1/links/external/crm-8841", body)
		var l gen.Link
		r.json(t, &l)
		if r.StatusCode != 201 || r.Header.Get("Location") != "/api/v1/links/"+l.Id || *l.ExternalId != "crm-8841" || l.Slug != "deal-1" {
			t.Fatalf("create: %d %s", r.StatusCode, r.body)
		}
		// The new short URL is published (so a cached "unknown slug" is dropped), with its slug key.
		deal := store.LinkKey{Domain: e.domain, SlugKey: "deal-1"}
		if got := e.published(); !slices.Equal(got, []store.LinkKey{deal}) {
			t.Errorf("create published %v, want %v", got, deal)
		}
		r = e.call(http.MethodPut, "/api/v1/links/external/crm-8841", body)
		var same gen.Link
		r.json(t, &same)
		if r.StatusCode != 200 || same.Id != l.Id || !same.UpdatedAt.Equal(l.UpdatedAt) {
			t.Fatalf("repeat: %d %s", r.StatusCode, r.body)
		}
		if got := e.published(); len(got) != 0 {
			t.Errorf("a repeat that changed nothing published %v", got)
		}
		if n := len(e.events(e.ws.ID, "link.updated")); n != 0 {
			t.Errorf("repeating the same body emitted %d link.updated", n)
		}
		r = e.call(http.MethodPut, "/api/v1/links/external/crm-8841", `{"destination_url":"https://example.com/deal-2"}`)
		var repl gen.Link
		r.json(t, &repl)
		if r.StatusCode != 200 || repl.Id != l.Id || repl.Slug != "deal-1" || repl.Title != nil || len(repl.Tags) != 0 ||
			repl.MaxClicks != nil || repl.DestinationUrl != "https://example.com/deal-2" {
			t.Fatalf("replace: %d %s", r.StatusCode, r.body)
		}
		if got := e.published(); !slices.Equal(got, []store.LinkKey{deal}) {
			t.Errorf("replace published %v, want %v", got, deal)
		}
		evs := e.events(e.ws.ID, "link.updated")
		if len(evs) != 1 {
			t.Fatalf("%d link.updated", len(evs))
		}
		checkEventSchema(t, "LinkUpdatedEvent", evs[0].Data)
		var upd gen.LinkUpdatedEvent
		_ = json.Unmarshal(evs[0].Data, &upd)
		if !slices.Equal(upd.Changed, []string{"destination_url", "title", "tags", "max_clicks"}) {
			t.Errorf("changed %v", upd.Changed)
		}
		e.call(http.MethodPut, "/api/v1/links/external/crm-2", `{"destination_url":"https://example.com","slug":"DEAL-1"}`).
			problem(t, http.StatusConflict, "slug_taken")
		if got := e.published(); len(got) != 0 {
			t.Errorf("a refused upsert published %v", got)
		}
		r = e.call(http.MethodPut, "/api/v1/links/external/crm-3", `{"destination_url":"https://example.com/drawn"}`)
		var drawn gen.Link
		r.json(t, &drawn)
		if r.StatusCode != 201 {
			t.Fatalf("create with a generated slug: %d %s", r.StatusCode, r.body)
		}
		if got, want := e.published(), (store.LinkKey{Domain: e.domain, SlugKey: strings.ToLower(drawn.Slug)}); !slices.Equal(got, []store.LinkKey{want}) {
			t.Errorf("create with a generated slug published %v, want %v", got, want)
		}

		var wg sync.WaitGroup
		statuses := make([]int, 10)
		for i := range statuses {
			wg.Go(func() {
				statuses[i] = status(t, e.url, http.MethodPut, "/api/v1/links/external/same", e.key,
					`{"destination_url":"https://example.com/same","slug":"same-slug"}`)
			})
		}
		wg.Wait()
		slices.Sort(statuses)
		if statuses[0] != 200 || statuses[8] != 200 || statuses[9] != 201 {
			t.Errorf("concurrent upserts: %v, want one 201 and nine 200", statuses)
		}
		n, err := db.Bun().NewSelect().Table("links").Where("workspace_id = ? AND external_id = 'same'", e.ws.ID).Count(context.Background())
		if err != nil || n != 1 {
			t.Errorf("%d links with the external ID, %v", n, err)
		}
	})
}

func TestUpdateLink(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnvWith(t, db, handlers.Config{}, links.Config{Domains: []string{"go.example.org"}})
		l := e.create(`{"destination_url":"https://example.com","slug":"upd","title":"T","external_id":"e-1",
			"utm":{"source":"s"},"expires_at":"2099-01-01T00:00:00Z","expired_url":"https://example.com/over","max_clicks":3}`)
		e.create(`{"destination_url":"https://example.com","slug":"busy","external_id":"e-2"}`)
		e.published()
		for _, tc := range []struct {
			body    string
			changed []string
			check   func(gen.Link) bool
		}{
			{`{"destination_url":"https://example.com/2"}`, []string{"destination_url"}, func(l gen.Link) bool { return l.DestinationUrl == "https://example.com/2" }},
			{`{"title":null}`, []string{"title"}, func(l gen.Link) bool { return l.Title == nil }},
			{`{"title":"New"}`, []string{"title"}, func(l gen.Link) bool { return *l.Title == "New" }},
			{`{"tags":["x","y"]}`, []string{"tags"}, func(l gen.Link) bool { return slices.Equal(l.Tags, []string{"x", "y"}) }},
			{`{"external_id":null}`, []string{"external_id"}, func(l gen.Link) bool { return l.ExternalId == nil }},
			{`{"external_id":"e-3"}`, []string{"external_id"}, func(l gen.Link) bool { return *l.ExternalId == "e-3" }},
			{`{"utm":{"medium":"m"}}`, []string{"utm"}, func(l gen.Link) bool { return l.Utm.Source == nil && *l.Utm.Medium == "m" }},
			{`{"utm":{}}`, []string{"utm"}, func(l gen.Link) bool { return l.Utm == gen.LinkUTM{} }},
			{`{"expires_at":null}`, []string{"expires_at"}, func(l gen.Link) bool { return l.ExpiresAt == nil }},
			{`{"expires_at":"2020-01-01T00:00:00Z"}`, []string{"expires_at"}, func(l gen.Link) bool { return l.Status == "expired" }},
			{`{"expired_url":null}`, []string{"expired_url"}, func(l gen.Link) bool { return l.ExpiredUrl == nil }},
			{`{"max_clicks":null}`, []string{"max_clicks"}, func(l gen.Link) bool { return l.MaxClicks == nil }},
			{`{"metadata":{"k":[1,2]},"archived":true}`, []string{"metadata", "archived"}, func(l gen.Link) bool { return l.Archived && l.Metadata["k"] != nil }},
			{`{"max_clicks":7,"forward_query":false}`, []string{"max_clicks", "forward_query"},
				func(l gen.Link) bool { return *l.MaxClicks == 7 && !l.ForwardQuery }},
			{`{"slug":"UPD"}`, []string{"slug"}, func(l gen.Link) bool { return l.Slug == "UPD" }},
			{`{"domain":"go.example.org","slug":"moved"}`, []string{"domain", "slug"}, func(l gen.Link) bool { return l.ShortUrl == "https://go.example.org/moved" }},
			{`{"archived":true,"title":"New"}`, nil, func(l gen.Link) bool { return l.Archived }},
			{`{"redirect_type":307}`, []string{"redirect_type"}, func(l gen.Link) bool { return l.RedirectType == 307 }},
		} {
			before := len(e.events(e.ws.ID, "link.updated"))
			r := e.call(http.MethodPatch, "/api/v1/links/"+l.Id, tc.body)
			var got gen.Link
			r.json(t, &got)
			if r.StatusCode != 200 || !tc.check(got) {
				t.Errorf("PATCH %s: %d %s", tc.body, r.StatusCode, r.body)
				continue
			}
			evs := e.events(e.ws.ID, "link.updated")
			if tc.changed == nil {
				if len(evs) != before || len(e.published()) != 0 {
					t.Errorf("PATCH %s changed nothing but emitted or published", tc.body)
				}
				continue
			}
			if len(evs) != before+1 {
				t.Errorf("PATCH %s: %d new events", tc.body, len(evs)-before)
				continue
			}
			checkEventSchema(t, "LinkUpdatedEvent", evs[len(evs)-1].Data)
			var data gen.LinkUpdatedEvent
			_ = json.Unmarshal(evs[len(evs)-1].Data, &data)
			if !slices.Equal(data.Changed, tc.changed) || data.Link.UpdatedAt.Before(data.Link.CreatedAt) {
				t.Errorf("PATCH %s: changed %v, want %v", tc.body, data.Changed, tc.changed)
			}
			if len(e.published()) == 0 {
				t.Errorf("PATCH %s published nothing", tc.body)
			}
		}
		for body, code := range map[string]string{
			`{"slug":"busy","domain":"` + e.domain + `"}`: "slug_taken",
			`{"external_id":"e-2"}`:                       "external_id_taken",
			`{"slug":"BUSY","domain":"` + e.domain + `"}`: "slug_taken",
			`{"slug":"api"}`:                              "validation_failed",
			`{"destination_url":null}`:                    "validation_failed",
			`{"domain":"nope.example"}`:                   "validation_failed",
			`{"expired_url":"javascript:x"}`:              "validation_failed",
		} {
			want := http.StatusConflict
			if code == "validation_failed" {
				want = http.StatusBadRequest
			}
			e.call(http.MethodPatch, "/api/v1/links/"+l.Id, body).problem(t, want, code)
		}

		// Lifting a limit lets its event fire again.
		at := time.Now().UTC()
		if _, err := db.Bun().NewUpdate().Table("links").Set("expired_event_at = ?, max_clicks_event_at = ?, admitted_clicks = 7", at, at).
			Where("id = ?", l.Id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{"max_clicks":7}`)
		st, _ := db.Links.Get(ctx, e.ws.ID, l.Id)
		if st.MaxClicksEventAt == nil || st.ExpiredEventAt == nil {
			t.Errorf("unchanged limits re-armed their events: %+v", st)
		}
		e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{"max_clicks":8,"expires_at":"2099-01-01T00:00:00Z"}`)
		st, _ = db.Links.Get(ctx, e.ws.ID, l.Id)
		if st.MaxClicksEventAt != nil || st.ExpiredEventAt != nil || st.AdmittedClicks != 7 {
			t.Errorf("lifted limits: %+v", st)
		}
		e.call(http.MethodPatch, "/api/v1/links/lnk_01JDAC4D5E6F7G8H9J0K1M2N3P", `{"title":"x"}`).problem(t, http.StatusNotFound, "not_found")
	})
}

// Another workspace's links do not exist for a key; scopes decide what a key may do.
func TestLinkTenantIsolationAndScopes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com","slug":"mine","external_id":"mine"}`)
		otherKey, _ := e.env.key(e.workspace("Other").ID, "links:write")
		base := "/api/v1/links/" + l.Id
		for _, r := range []request{
			{path: base}, {method: http.MethodPatch, path: base, body: `{"title":"x"}`}, {method: http.MethodDelete, path: base},
			{path: base + "/stats"}, {path: base + "/stats/countries"}, {path: base + "/clicks"},
			{path: "/api/v1/links/lookup?slug=mine"},
		} {
			r.key = otherKey
			e.do(r).problem(t, http.StatusNotFound, "not_found")
		}
		r := e.do(request{path: "/api/v1/links?external_id=mine", key: otherKey})
		var list gen.LinkList
		r.json(t, &list)
		if len(list.Data) != 0 {
			t.Errorf("another workspace lists %d links", len(list.Data))
		}

		readKey, _ := e.env.key(e.ws.ID, "links:read")
		for _, r := range []request{
			{method: http.MethodPost, path: "/api/v1/links", body: `{"destination_url":"https://example.com"}`},
			{method: http.MethodPost, path: "/api/v1/links/bulk", body: `{"links":[{"destination_url":"https://example.com"}]}`},
			{method: http.MethodPut, path: "/api/v1/links/external/x", body: `{"destination_url":"https://example.com"}`},
			{method: http.MethodPatch, path: base, body: `{"title":"x"}`}, {method: http.MethodDelete, path: base},
		} {
			r.key = readKey
			e.do(r).problem(t, http.StatusForbidden, "insufficient_scope")
		}
		for _, p := range []string{base, base + "/stats", base + "/clicks", "/api/v1/links"} {
			if r := e.do(request{path: p, key: readKey}); r.StatusCode != 200 {
				t.Errorf("links:read GET %s: %d", p, r.StatusCode)
			}
		}
		modelsKey, _ := e.env.key(e.ws.ID, "models:read")
		for _, p := range []string{base, base + "/stats", base + "/stats/devices", base + "/clicks", "/api/v1/links", "/api/v1/links/lookup?slug=mine"} {
			e.do(request{path: p, key: modelsKey}).problem(t, http.StatusForbidden, "insufficient_scope")
		}
	})
}

// An update leaves the fields it does not send alone. The request validator fills in schema defaults, so a default
// of redirect_type on LinkUpdate would make a PATCH without it arrive with 302 and reset a 301/307/308 link; the
// default lives on LinkCreate and LinkUpsert only, and this test guards that.
func TestUpdateLinkKeepsUnsentRedirectType(t *testing.T) {
	e := newLinkEnv(t, storetest.SQLite(t), handlers.Config{})
	l := e.create(`{"destination_url":"https://example.com","redirect_type":308}`)
	r := e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{"title":"x"}`)
	var got gen.Link
	r.json(t, &got)
	if got.RedirectType != 308 {
		t.Errorf("redirect_type = %d after a PATCH that did not send it, want 308", got.RedirectType)
	}
	// An empty patch is refused (minProperties: 1) rather than silently filled with defaults.
	e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{}`).problem(t, http.StatusBadRequest, "validation_failed")
}

func TestListLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnvWith(t, db, handlers.Config{}, links.Config{Domains: []string{"go.example.org"}})
		a := e.create(`{"destination_url":"https://example.com/Alpha","title":"Sale 100% off","tags":["x"]}`)
		b := e.create(`{"destination_url":"https://example.com/b","slug":"beta_1","tags":["x","y"],"external_id":"b"}`)
		c := e.create(`{"destination_url":"https://example.com/c","domain":"go.example.org","max_clicks":2}`)
		d := e.create(`{"destination_url":"https://example.com/d","archived":true,"expires_at":"2099-01-01T00:00:00Z"}`)
		if _, err := db.Bun().NewUpdate().Table("links").Set("admitted_clicks = 2").Where("id = ?", c.Id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		e.call(http.MethodPatch, "/api/v1/links/"+d.Id, `{"expires_at":"2020-01-01T00:00:00Z"}`)
		ids := func(q string) []string {
			t.Helper()
			r := e.call(http.MethodGet, "/api/v1/links"+q, "")
			var l gen.LinkList
			r.json(t, &l)
			if r.StatusCode != 200 {
				t.Fatalf("GET %s: %d %s", q, r.StatusCode, r.body)
			}
			var out []string
			for _, x := range l.Data {
				out = append(out, x.Id)
			}
			return out
		}
		for q, want := range map[string][]string{
			"":                            {c.Id, b.Id, a.Id},
			"?q=ALPHA":                    {a.Id},
			"?q=100%25":                   {a.Id},
			"?q=%25":                      {a.Id},
			"?q=a_1":                      {b.Id},
			"?q=_":                        {b.Id},
			"?tag=x":                      {b.Id, a.Id},
			"?tag=y":                      {b.Id},
			"?domain=GO.example.org":      {c.Id},
			"?external_id=b":              {b.Id},
			"?archived=true":              {d.Id},
			"?expired=true":               {c.Id},
			"?expired=false":              {b.Id, a.Id},
			"?archived=true&expired=true": {d.Id},
			"?created_after=" + a.CreatedAt.Add(time.Microsecond).Format(time.RFC3339Nano): {c.Id, b.Id},
			"?created_before=" + b.CreatedAt.Format(time.RFC3339Nano):                      {a.Id},
		} {
			if got := ids(q); !slices.Equal(got, want) {
				t.Errorf("GET /api/v1/links%s = %v, want %v", q, got, want)
			}
		}

		// Pages of one, newest first, until has_more is false.
		var seen []string
		next := ""
		for range 5 {
			r := e.call(http.MethodGet, "/api/v1/links?limit=1"+next, "")
			var l gen.LinkList
			r.json(t, &l)
			seen = append(seen, l.Data[0].Id)
			if !l.HasMore {
				if l.NextCursor != nil {
					t.Errorf("last page has a cursor")
				}
				break
			}
			next = "&cursor=" + *l.NextCursor
		}
		if !slices.Equal(seen, []string{c.Id, b.Id, a.Id}) {
			t.Errorf("pages %v", seen)
		}
		for _, bad := range []string{"bm90LWEtY3Vyc29y", "!!", "Y2xrXzAxSkRBQzRENUU2RjdHOEg5SjBLMU0yTjNQ"} {
			p := e.call(http.MethodGet, "/api/v1/links?cursor="+bad, "").problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["parameter"] != "cursor" {
				t.Errorf("cursor %q: %v", bad, p.Errors)
			}
		}

		// link.listed is recorded only while an endpoint subscribes to it.
		if n := len(e.events(e.ws.ID, "link.listed")); n != 0 {
			t.Fatalf("%d link.listed events without a subscriber", n)
		}
		_, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: e.ws.ID, URL: "https://hooks.example.com/x",
			Events: []string{"link.*"}, SealSecret: func(string) string { return "sealed" }})
		if err != nil {
			t.Fatal(err)
		}
		reader, readerKey := e.env.key(e.ws.ID, "links:read")
		e.do(request{path: "/api/v1/links?tag=x&limit=5", key: reader})
		evs := e.events(e.ws.ID, "link.listed")
		if len(evs) != 1 {
			t.Fatalf("%d link.listed events", len(evs))
		}
		checkEventSchema(t, "LinkListedEvent", evs[0].Data)
		var listed gen.LinkListedEvent
		_ = json.Unmarshal(evs[0].Data, &listed)
		if listed.ResultCount != 2 || listed.Filters["tag"] != "x" || listed.Filters["limit"] != float64(5) || listed.KeyId != readerKey.ID {
			t.Errorf("link.listed %s", evs[0].Data)
		}
	})
}

// A link whose title is the text `\u0000` (a backslash and "u0000", as a client may send it escaped) is created,
// changed and read back as that text on both databases; PostgreSQL refused the event of it (a 500) while the store
// wrote JSON with Bun's own escaping.
func TestLinkTitleWithAnEscapedNULText(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com","title":"\\u0000 and \\\\u0000"}`)
		if deref(l.Title) != `\u0000 and \\u0000` {
			t.Fatalf("title = %q", deref(l.Title))
		}
		res := e.call(http.MethodPatch, "/api/v1/links/"+l.Id, `{"title":"it's \\u0000"}`)
		var got gen.Link
		if res.json(t, &got); res.StatusCode != http.StatusOK || deref(got.Title) != `it's \u0000` {
			t.Fatalf("patch: %d %s", res.StatusCode, res.body)
		}
	})
}
