package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

const page = "https://www.acme.example"

// browserKey stores a browser key of a workspace for the pages of page, with one browser scope.
func browserKey(t testing.TB, db *store.DB, workspaceID, scope, target string, dailyQuota int) string {
	t.Helper()
	secret, err := apikey.GenerateBrowser()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.APIKeys.Create(context.Background(), store.NewAPIKey{WorkspaceID: workspaceID, Name: "embed",
		SecretHash: secret.Hash, DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: []string{scope},
		CreatedBy: "test", Kind: store.KindBrowser, Origins: []string{page}, ScopeTarget: target, DailyQuota: dailyQuota,
	}); err != nil {
		t.Fatal(err)
	}
	return secret.Plain
}

// A links:create browser key creates short links in its workspace from its page, up to its daily quota, and does
// nothing else: not list them, not read them, not publish, not send. Another workspace sees none of its links.
func TestBrowserKeyCreatesLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		acme, globex := e.workspace("Acme"), e.workspace("Globex")
		key := browserKey(t, db, acme.ID, "links:create", "", 2)
		acmeReader, _ := e.key(acme.ID, "links:read")
		globexReader, _ := e.key(globex.ID, "links:read")
		from := fromOrigin(page)

		res := e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: from,
			body: `{"destination_url":"https://www.acme.example/pricing"}`})
		if res.StatusCode != http.StatusCreated || res.Header.Get("Access-Control-Allow-Origin") != page {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		for _, policy := range []string{`"key";q=300;w=60`, `"visitor";q=20;w=60`, `"daily";q=2;w=86400`} {
			if !strings.Contains(res.Header.Get("RateLimit-Policy"), policy) {
				t.Errorf("RateLimit-Policy %q lacks %s", res.Header.Get("RateLimit-Policy"), policy)
			}
		}
		var link struct{ ID string }
		res.json(t, &link)

		for _, r := range []request{
			{path: "/api/v1/links"},
			{path: "/api/v1/links/" + link.ID},
			{path: "/api/v1/links/" + link.ID + "/stats"},
			{method: http.MethodDelete, path: "/api/v1/links/" + link.ID},
			{method: http.MethodPost, path: "/api/v1/events", body: `{"type":"custom.signup","data":{}}`},
			{path: "/api/v1/webhooks"},
		} {
			r.key, r.header = key, from
			res := e.do(r)
			p := res.problem(t, http.StatusForbidden, "insufficient_scope")
			if !strings.Contains(p.Detail, "browser key") || res.Header.Get("Access-Control-Allow-Origin") != page {
				t.Errorf("%s %s: %q", r.method, r.path, p.Detail)
			}
		}
		// Refusals outside the scope spend no daily quota: the second link is created, the third is over it.
		res = e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: from,
			body: `{"destination_url":"https://www.acme.example/"}`})
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("second create: %d %s", res.StatusCode, res.body)
		}
		res = e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: from,
			body: `{"destination_url":"https://www.acme.example/"}`})
		p := res.problem(t, http.StatusTooManyRequests, "rate_limited")
		if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "daily" || res.Header.Get("Retry-After") == "" {
			t.Errorf("over the daily quota: %+v, Retry-After %q", p, res.Header.Get("Retry-After"))
		}

		if res := e.do(request{path: "/api/v1/links/" + link.ID, key: acmeReader}); res.StatusCode != http.StatusOK {
			t.Errorf("the workspace reads its link: %d", res.StatusCode)
		}
		e.do(request{path: "/api/v1/links/" + link.ID, key: globexReader}).problem(t, http.StatusNotFound, "not_found")

		var me struct {
			Key struct {
				Kind    string
				Scopes  []string
				Browser struct {
					Scope      string
					DailyQuota int `json:"daily_quota"`
				}
			}
		}
		e.do(request{path: "/api/v1/me", key: key, header: from}).json(t, &me)
		if me.Key.Kind != "browser" || len(me.Key.Scopes) != 1 || me.Key.Browser.Scope != "links:create" ||
			me.Key.Browser.DailyQuota != 2 {
			t.Errorf("me: %+v", me.Key)
		}
	})
}

// One visitor (one client address) gets its own small quota with a browser key, below the key's.
func TestBrowserKeyVisitorQuota(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{BrowserVisitorRateLimit: 2})
		key := browserKey(t, db, e.workspace("Acme").ID, "links:create", "", 100)
		for i := range 3 {
			res := e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: fromOrigin(page),
				body: `{"destination_url":"https://www.acme.example/"}`})
			if i < 2 {
				if res.StatusCode != http.StatusCreated {
					t.Fatalf("request %d: %d %s", i+1, res.StatusCode, res.body)
				}
				continue
			}
			p := res.problem(t, http.StatusTooManyRequests, "rate_limited")
			if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "visitor" {
				t.Errorf("third request: violated %v", p.ViolatedPolicies)
			}
		}
	})
}

// An events:publish browser key publishes events of its one custom type, and no other; a messages:send key sends
// into its one instance only.
func TestBrowserKeyTargets(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		acme := e.workspace("Acme")
		admin, _ := e.key(acme.ID, "automation:write")
		for _, name := range []string{"custom.signup", "custom.refund"} {
			if res := e.do(request{method: http.MethodPost, path: "/api/v1/event-types", key: admin,
				body: `{"name":"` + name + `","description":"d","schema":{"type":"object"}}`}); res.StatusCode != http.StatusCreated {
				t.Fatalf("event type %s: %d %s", name, res.StatusCode, res.body)
			}
		}
		key := browserKey(t, db, acme.ID, "events:publish", "custom.signup", 0)
		from := fromOrigin(page)
		if res := e.do(request{method: http.MethodPost, path: "/api/v1/events", key: key, header: from,
			body: `{"type":"custom.signup","data":{"plan":"pro"}}`}); res.StatusCode != http.StatusCreated {
			t.Fatalf("publish its type: %d %s", res.StatusCode, res.body)
		}
		res := e.do(request{method: http.MethodPost, path: "/api/v1/events", key: key, header: from,
			body: `{"type":"custom.refund","data":{}}`})
		if p := res.problem(t, http.StatusForbidden, "insufficient_scope"); !strings.Contains(p.Detail, "custom.signup") {
			t.Errorf("another type: %q", p.Detail)
		}
		e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: from,
			body: `{"destination_url":"https://www.acme.example/"}`}).problem(t, http.StatusForbidden, "insufficient_scope")

		send := browserKey(t, db, acme.ID, "messages:send", "ins_01JDA9K3M2Q7B8C9D0E1F2G3H4", 0)
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/ins_01JDA9K3M2Q7B8C9D0E1F2G3H5/messages", key: send,
			header: from, body: `{"to":"x","type":"text","text":{"body":"hi"}}`}).problem(t, http.StatusForbidden, "insufficient_scope")
	})
}

// A links:read_stats browser key reads the statistics of its one link from its page (a public counter), with their
// breakdowns by every dimension, and nothing else: another link of its workspace, a link of another workspace and a
// link that does not exist are all not found to it, for the statistics and for each breakdown (one answer, so the
// key tells nothing about which links exist); the link itself, the list and every other operation are out of its
// scope.
func TestBrowserKeyReadsOneLinksStats(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		// One visitor makes every request here, more than a visitor's default minute allows.
		e := newEnv(t, db, handlers.Config{BrowserVisitorRateLimit: 100})
		acme, globex := e.workspace("Acme"), e.workspace("Globex")
		acmeWriter, _ := e.key(acme.ID, "links:write")
		globexWriter, _ := e.key(globex.ID, "links:write")
		newLink := func(key string) string {
			res := e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key,
				body: `{"destination_url":"https://www.acme.example/pricing"}`})
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("create a link: %d %s", res.StatusCode, res.body)
			}
			var l struct{ ID string }
			res.json(t, &l)
			return l.ID
		}
		public, private, theirs := newLink(acmeWriter), newLink(acmeWriter), newLink(globexWriter)
		key := browserKey(t, db, acme.ID, "links:read_stats", public, 0)
		from := fromOrigin(page)

		res := e.do(request{path: "/api/v1/links/" + public + "/stats?interval=day", key: key, header: from})
		if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != page {
			t.Fatalf("its link's stats: %d %s", res.StatusCode, res.body)
		}
		var stats struct {
			LinkID string `json:"link_id"`
		}
		if res.json(t, &stats); stats.LinkID != public {
			t.Errorf("stats of %q", stats.LinkID)
		}
		// The breakdowns of its link: its numbers, by each dimension.
		bucket := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
		rows := []dimensionRow{{public, "countries", bucket, "DE", 3, 1}, {private, "countries", bucket, "FR", 7, 0},
			{theirs, "countries", bucket, "US", 9, 0}}
		if _, err := db.Bun().NewInsert().Model(&rows).ModelTableExpr("click_dimension_rollups").Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		dimensions := []string{"countries", "referrers", "devices", "browsers", "operating_systems"}
		for _, d := range dimensions {
			res := e.do(request{path: "/api/v1/links/" + public + "/stats/" + d + "?limit=5", key: key, header: from})
			if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != page {
				t.Fatalf("its link's %s: %d %s", d, res.StatusCode, res.body)
			}
			var by gen.LinkDimensionStats
			if res.json(t, &by); by.LinkId != public || string(by.Dimension) != d {
				t.Errorf("%s of %q: %s", by.Dimension, by.LinkId, res.body)
			}
			if d == "countries" && (len(by.Data) != 1 || by.Data[0].Value != "DE" || by.Data[0].Humans != 3 || by.Data[0].Bots != 1) {
				t.Errorf("its link's countries: %s", res.body)
			}
		}
		for _, id := range []string{private, theirs, "lnk_01JDAC4D5E6F7G8H9J0K1M2N3P"} {
			for _, sub := range append([]string{""}, dimensions...) {
				path := "/api/v1/links/" + id + "/stats"
				if sub != "" {
					path += "/" + sub
				}
				res := e.do(request{path: path, key: key, header: from})
				if p := res.problem(t, http.StatusNotFound, "not_found"); res.Header.Get("Access-Control-Allow-Origin") != page {
					t.Errorf("%s: %+v without CORS", path, p)
				}
			}
		}
		for _, r := range []request{
			{path: "/api/v1/links/" + public},
			{path: "/api/v1/links"},
			{path: "/api/v1/links/" + public + "/clicks"},
			{method: http.MethodPatch, path: "/api/v1/links/" + public, body: `{"destination_url":"https://evil.example/"}`},
			{method: http.MethodPost, path: "/api/v1/links", body: `{"destination_url":"https://www.acme.example/"}`},
		} {
			r.key, r.header = key, from
			e.do(r).problem(t, http.StatusForbidden, "insufficient_scope")
		}
		// From another page, not even its own link.
		for _, path := range []string{"/stats", "/stats/countries"} {
			e.do(request{path: "/api/v1/links/" + public + path, key: key, header: fromOrigin("https://evil.example")}).
				problem(t, http.StatusForbidden, "origin_not_allowed")
		}

		var me struct {
			Key struct {
				Browser struct{ Scope, Target string }
			}
		}
		e.do(request{path: "/api/v1/me", key: key, header: from}).json(t, &me)
		if me.Key.Browser.Scope != "links:read_stats" || me.Key.Browser.Target != public {
			t.Errorf("me: %+v", me.Key.Browser)
		}
	})
}

// A browser key's daily quota counts the links it created, not its attempts: a body the spec refuses (400), a
// destination the link rules refuse (400), a taken slug (409), an Idempotency-Key reused with another body (422)
// and a replay of a created link (201, Idempotent-Replayed) spend none of it, so a page (or a visitor poking at it)
// cannot use up the quota without creating anything. Fails when the quota is spent before the outcome is known.
func TestBrowserKeyDailyQuotaCountsOnlyCreatedLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		acme := e.workspace("Acme")
		writer, _ := e.key(acme.ID, "links:write")
		if res := e.do(request{method: http.MethodPost, path: "/api/v1/links", key: writer,
			body: `{"destination_url":"https://www.acme.example/","slug":"taken"}`}); res.StatusCode != http.StatusCreated {
			t.Fatalf("the taken slug: %d %s", res.StatusCode, res.body)
		}
		key := browserKey(t, db, acme.ID, "links:create", "", 3)
		create := func(body, idempotencyKey string) *response {
			h := fromOrigin(page)
			if idempotencyKey != "" {
				h["Idempotency-Key"] = idempotencyKey
			}
			return e.do(request{method: http.MethodPost, path: "/api/v1/links", key: key, header: h, body: body})
		}
		const first = `{"destination_url":"https://www.acme.example/first"}`
		if res := create(first, "share-1"); res.StatusCode != http.StatusCreated {
			t.Fatalf("the first link: %d %s", res.StatusCode, res.body)
		}
		for range 3 {
			create(`{}`, "").problem(t, http.StatusBadRequest, "validation_failed")
			create(`{"destination_url":"http://127.0.0.1/admin"}`, "").problem(t, http.StatusBadRequest, "validation_failed")
			create(`{"destination_url":"https://www.acme.example/","slug":"taken"}`, "").problem(t, http.StatusConflict, "slug_taken")
			create(`{"destination_url":"https://www.acme.example/other"}`, "share-1").
				problem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
			if res := create(first, "share-1"); res.StatusCode != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the replay: %d %s", res.StatusCode, res.body)
			}
		}
		for i := range 2 {
			if res := create(`{"destination_url":"https://www.acme.example/"}`, ""); res.StatusCode != http.StatusCreated {
				t.Fatalf("link %d of a quota of 3, after 15 attempts that created nothing: %d %s", i+2, res.StatusCode, res.body)
			}
		}
		p := create(`{"destination_url":"https://www.acme.example/"}`, "").problem(t, http.StatusTooManyRequests, "rate_limited")
		if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "daily" {
			t.Errorf("the fourth link: %+v", p)
		}
	})
}
