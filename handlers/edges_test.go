package handlers_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// raw sends a request without the spec check (HEAD has no operation of its own) and returns the answer and body.
func raw(t *testing.T, method, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// HEAD is answered wherever GET is, with the GET's status and headers (its length included) and no body: health
// checks that use HEAD see the service up.
func TestHeadWhereverGet(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Heads")
		key, _ := e.key(ws.ID, "models:read")
		for _, c := range []struct{ path, key string }{{"/healthz", ""}, {"/readyz", ""}, {"/metrics", ""},
			{"/openapi.json", ""}, {"/openapi.yaml", ""}, {"/problems", ""}, {"/docs/", ""}, {"/api/v1/models", key},
			{"/api/v1/models", ""}, {"/api/v1/models/no-such-model", key}} {
			get, body := raw(t, http.MethodGet, e.url+c.path, c.key)
			head, headBody := raw(t, http.MethodHead, e.url+c.path, c.key)
			if head.StatusCode != get.StatusCode || len(headBody) != 0 {
				t.Errorf("HEAD %s: %d with %d bytes; GET: %d", c.path, head.StatusCode, len(headBody), get.StatusCode)
			}
			if cl := head.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) && c.path != "/metrics" {
				t.Errorf("HEAD %s: Content-Length %q, the GET's body has %d bytes", c.path, cl, len(body))
			}
			if head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
				t.Errorf("HEAD %s: Content-Type %q, GET %q", c.path, head.Header.Get("Content-Type"), get.Header.Get("Content-Type"))
			}
		}
		// A route without GET is still refused, as a client error.
		if res, _ := raw(t, http.MethodHead, e.url+"/api/v1/links/bulk", key); res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Errorf("HEAD on a POST-only route: %d", res.StatusCode)
		}
	})
}

// Unknown paths under /api (and trailing slashes) get the route problem, not the short link visitor's page; every
// answer carries X-Content-Type-Options: nosniff.
func TestUnknownAPIRoutesAndNosniff(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		for _, path := range []string{"/api", "/api/v1/nope", "/api/v1/models/", "/api/v2/models", "/a/b"} {
			res := e.do(request{path: path})
			var p problem
			res.json(t, &p)
			if res.StatusCode != http.StatusNotFound || p.Code != "route_not_found" || !strings.Contains(p.Detail, "No route matches") {
				t.Errorf("GET %s: %d %s", path, res.StatusCode, res.body)
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: no nosniff", path)
			}
		}
		if res := e.do(request{path: "/healthz"}); res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Error("/healthz: no nosniff")
		}
	})
}

// U+0000 anywhere in a request (a JSON string of the body, written \u0000; a query parameter), or a parameter
// whose bytes are not UTF-8, is refused as validation_failed naming each place, per item in bulk — never a 500 from
// the database. A body whose bytes are not UTF-8 is no JSON text (RFC 8259 §8.1): malformed_json, never a body
// taken in with the bytes silently replaced.
func TestNULIsRefusedWhereverItIs(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		for _, c := range []struct {
			method, path, body string
			want               []string
		}{
			{"POST", "/api/v1/links", `{"destination":"https://example.com","title":"a\u0000b"}`, []string{"/title"}},
			{"POST", "/api/v1/links/bulk", `{"links":[{"destination":"https://example.com/1"},{"destination":"https://example.com/2","title":"x\u0000"}]}`, []string{"/links/1/title"}},
			{"GET", "/api/v1/links?q=a%00b", "", []string{"q"}},
			{"GET", "/api/v1/links?q=caf%E9", "", []string{"q"}},
		} {
			res := e.do(request{method: c.method, path: c.path, key: e.key, body: c.body})
			var p problem
			res.json(t, &p)
			if res.StatusCode != http.StatusBadRequest || p.Code != "validation_failed" {
				t.Errorf("%s %s: %d %s", c.method, c.path, res.StatusCode, res.body)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(string(res.body), `"`+w+`"`) {
					t.Errorf("%s %s: %s does not name %s", c.method, c.path, res.body, w)
				}
			}
		}
	})
}

func TestBodyThatIsNotUTF8IsMalformed(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		for _, body := range []string{
			"{\"destination_url\":\"https://example.com\",\"title\":\"caf\xe9\"}",
			"{\"destination_url\":\"https://example.com\",\"tags\":[\"\xff\xfe\"]}",
		} {
			p := e.do(request{method: "POST", path: "/api/v1/links", key: e.key, body: body}).problem(t, http.StatusBadRequest, "malformed_json")
			if !strings.Contains(p.Detail, "UTF-8") {
				t.Errorf("%q: %s", body, p.Detail)
			}
		}
		if res := e.do(request{path: "/api/v1/links", key: e.key}); strings.Contains(string(res.body), "caf") {
			t.Fatal("a link was created from a body that is not UTF-8")
		}
	})
}

// Methods a client makes up do not grow /metrics: they share one label value, and unmatched paths share another.
func TestMetricLabelsAreBounded(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	for i := range 50 {
		raw(t, "BREW"+strconv.Itoa(i), e.url+"/x/"+strconv.Itoa(i), "")
	}
	_, body := raw(t, http.MethodGet, e.url+"/metrics", "")
	if strings.Contains(string(body), "BREW") {
		t.Fatal("a made-up method is a label value")
	}
	if !strings.Contains(string(body), `method="other"`) {
		t.Fatal("made-up methods are not counted as other")
	}
	for i := range 50 {
		if strings.Contains(string(body), "/x/"+strconv.Itoa(i)+`"`) {
			t.Fatal("an unmatched path is a label value")
		}
	}
}

// While the database cannot be reached, API calls answer 503 service_unavailable with Retry-After, not 500.
func TestDatabaseOutageIs503(t *testing.T) {
	check := func(t *testing.T, e *linkEnv, down func()) {
		if res := e.do(request{path: "/api/v1/links", key: e.key}); res.StatusCode != http.StatusOK {
			t.Fatalf("before the outage: %d %s", res.StatusCode, res.body)
		}
		down()
		res := e.do(request{method: http.MethodPost, path: "/api/v1/links", key: e.key, body: `{"destination":"https://example.com"}`})
		var p problem
		res.json(t, &p)
		if res.StatusCode != http.StatusServiceUnavailable || p.Code != "service_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Fatalf("during the outage: %d %s (Retry-After %q)", res.StatusCode, res.body, res.Header.Get("Retry-After"))
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		db := storetest.SQLite(t)
		e := newLinkEnv(t, db, handlers.Config{})
		check(t, e, func() { _ = db.Close() })
	})
	t.Run("postgres", func(t *testing.T) {
		url := storetest.EmptyPostgresURL(t)
		db, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		e := newLinkEnv(t, db, handlers.Config{})
		check(t, e, func() {
			// The server goes away: every connection is terminated and none can be made.
			name := url[strings.LastIndex(url, "/")+1:]
			if i := strings.IndexByte(name, '?'); i >= 0 {
				name = name[:i]
			}
			admin, err := store.Open(context.Background(), strings.Replace(url, "/"+name, "/postgres", 1))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			if _, err := admin.Bun().Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// Problems from the OpenAI-compatible /api/v1/models also carry {"error": {message, type, code}}, which OpenAI's
// SDKs show; other endpoints' problems do not.
func TestModelsProblemsSpeakOpenAI(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	var body struct {
		Code  string `json:"code"`
		Error *struct {
			Message, Type, Code string
		} `json:"error"`
	}
	res := e.do(request{path: "/api/v1/models"})
	res.json(t, &body)
	if body.Error == nil || body.Error.Type != "authentication_error" || body.Error.Code != "missing_api_key" || body.Error.Message == "" {
		t.Fatalf("models problem %s", res.body)
	}
	body.Error = nil
	e.do(request{path: "/api/v1/links"}).json(t, &body)
	if body.Error != nil {
		t.Fatal("a links problem carries the OpenAI member")
	}
}

// Every answer to a request with a valid key carries RateLimit and RateLimit-Policy: a refused scope (403), a method
// the route does not take (405) and a body over the limit (413) too.
func TestRateLimitHeadersOnEveryAuthenticatedAnswer(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{BodyLimit: 1024})
	ws := e.workspace("Limits")
	key, _ := e.key(ws.ID, "models:read")
	for i, r := range []request{
		{method: http.MethodGet, path: "/api/v1/links", key: key},                                                         // 403
		{method: http.MethodPut, path: "/api/v1/models", key: key},                                                        // 405
		{method: http.MethodPost, path: "/api/v1/links", key: key, body: `{"title":"` + strings.Repeat("x", 2048) + `"}`}, // 413
	} {
		res := e.do(r)
		if want := []int{403, 405, 413}[i]; res.StatusCode != want {
			t.Errorf("%s %s: %d, want %d", r.method, r.path, res.StatusCode, want)
		}
		if res.Header.Get("RateLimit") == "" || res.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("%s %s: %d without RateLimit headers (%v)", r.method, r.path, res.StatusCode, res.Header)
		}
	}
}
