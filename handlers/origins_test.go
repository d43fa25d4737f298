package handlers_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// fromOrigin is the header of a request sent by a page of origin; none when origin is empty.
func fromOrigin(origin string) map[string]string {
	if origin == "" {
		return nil
	}
	return map[string]string{"Origin": origin}
}

// preflight sends a browser's CORS preflight for a POST with a key and a JSON body.
func (e *env) preflight(origin, path string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodOptions, e.url+path, nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// A key that lists origins is served only from pages of those origins — exact ones and subdomains of a
// "https://*." pattern, never "null", never without a page — and a page of any other origin reads why it was
// refused. Refusals spend the client address's quota, not the key's.
func TestKeyOrigins(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{KeyRateLimit: 3})
		ws := e.workspace("Acme")
		key, _ := createKey(t, db, ws.ID, &store.NewAPIKey{Origins: []string{"https://www.acme.example", "https://*.acme.dev"}},
			"models:read")
		for _, tc := range []struct {
			origin string
			want   int
		}{
			{"https://www.acme.example", 200},
			{"https://shop.acme.dev", 200},
			{"https://a.b.acme.dev", 200},
			{"https://acme.dev", 403},
			{"http://shop.acme.dev", 403},
			{"https://shop.acme.dev:8443", 403},
			{"https://www.acme.example.evil.example", 403},
			{"https://evil.example", 403},
			{"null", 403},
			{"", 403},
		} {
			res := e.do(request{path: "/api/v1/models", key: key, header: fromOrigin(tc.origin)})
			if tc.want == 200 {
				if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != tc.origin ||
					!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "RateLimit") {
					t.Errorf("from %q: %d, Access-Control-Allow-Origin %q", tc.origin, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
				}
				continue
			}
			p := res.problem(t, http.StatusForbidden, "origin_not_allowed")
			if p.Detail == "" || res.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Errorf("refused from %q: detail %q, Access-Control-Allow-Origin %q (the page must read why)",
					tc.origin, p.Detail, res.Header.Get("Access-Control-Allow-Origin"))
			}
			if strings.HasPrefix(res.Header.Get("RateLimit"), `"key"`) {
				t.Errorf("refused from %q: charged to the key: %q", tc.origin, res.Header.Get("RateLimit"))
			}
		}
		// Eight refusals and three successes: the key's quota of 3 is spent by the successes only.
		if res := e.do(request{path: "/api/v1/models", key: key, header: map[string]string{"Origin": "https://www.acme.example"}}); res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("fourth served request: %d, want 429 (the key's own quota)", res.StatusCode)
		}

		var me struct {
			Key struct {
				Origins []string `json:"origins"`
			} `json:"key"`
		}
		other, _ := createKey(t, db, ws.ID, &store.NewAPIKey{Origins: []string{"https://*.acme.dev"}}, "models:read")
		res := e.do(request{path: "/api/v1/me", key: other, header: map[string]string{"Origin": "https://x.acme.dev"}})
		res.json(t, &me)
		if !slices.Equal(me.Key.Origins, []string{"https://*.acme.dev"}) {
			t.Errorf("me: origins %v", me.Key.Origins)
		}
	})
}

// A key that lists no origins works from servers, from Switchboard's own pages and from the operator's origins
// (--cors-origins); a page of any other origin reads origin_not_allowed. The origins of one workspace's keys do
// nothing for another workspace's.
func TestKeyWithoutOrigins(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{CORSOrigins: []string{"https://ops.example"}})
		acme, globex := e.workspace("Acme"), e.workspace("Globex")
		key, _ := e.key(acme.ID, "models:read")
		createKey(t, db, globex.ID, &store.NewAPIKey{Origins: []string{"https://globex.example"}}, "models:read")
		for _, tc := range []struct {
			origin string
			want   int
		}{
			{"", 200},
			{e.url, 200},
			{"https://ops.example", 200},
			{"https://globex.example", 403},
			{"https://evil.example", 403},
			{"null", 403},
		} {
			res := e.do(request{path: "/api/v1/models", key: key, header: fromOrigin(tc.origin)})
			if tc.want == 200 {
				if res.StatusCode != 200 {
					t.Errorf("from %q: %d %s", tc.origin, res.StatusCode, res.body)
				}
				continue
			}
			res.problem(t, http.StatusForbidden, "origin_not_allowed")
			if res.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Errorf("refused from %q: Access-Control-Allow-Origin %q", tc.origin, res.Header.Get("Access-Control-Allow-Origin"))
			}
		}
	})
}

// A preflight carries no key: the API answers it for every origin (null included) and the request decides. The
// ingest URLs, which take no keys, answer only the operator's origins; the console answers none.
func TestPreflights(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db, handlers.Config{CORSOrigins: []string{"https://ops.example"}})
	for _, origin := range []string{"https://www.acme.example", "https://evil.example", "null", "https://ops.example"} {
		r := e.preflight(origin, "/api/v1/links")
		if r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
			r.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("API preflight from %q: %d %v", origin, r.StatusCode, r.Header)
		}
	}
	if r := e.preflight("https://evil.example", "/in/src_x"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("ingest preflight from another origin: %v", r.Header)
	}
	if r := e.preflight("https://ops.example", "/in/src_x"); r.Header.Get("Access-Control-Allow-Origin") != "https://ops.example" {
		t.Errorf("ingest preflight from the operator's origin: %v", r.Header)
	}
	if r := e.preflight("https://ops.example", "/user/api"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("the console answered a preflight: %v", r.Header)
	}
}
