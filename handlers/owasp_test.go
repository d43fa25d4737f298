package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Requests without a valid API key are charged to their client address: a client that sends no key, or keys that
// do not verify, gets 401 with the address policy's RateLimit headers and, over the quota, 429. A valid key from
// the same address is not affected: it has quotas of its own.
func TestAddressQuotaWithoutKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{AddressRateLimit: 3})
		key, _ := e.key(e.workspace("Acme").ID, "models:read")
		bad := "sb_sk_" + strings.Repeat("x", 38)
		for i, k := range []string{"", bad, "not-a-key"} {
			res := e.do(request{path: "/api/v1/models", key: k})
			res.problem(t, http.StatusUnauthorized, []string{"missing_api_key", "invalid_api_key", "invalid_api_key"}[i])
			if got, want := res.Header.Get("RateLimit-Policy"), `"address";q=3;w=60`; got != want {
				t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
			}
			if want := `"address";r=` + string(rune('2'-i)) + ";"; !strings.HasPrefix(res.Header.Get("RateLimit"), want) {
				t.Errorf("request %d: RateLimit %q, want prefix %q", i+1, res.Header.Get("RateLimit"), want)
			}
		}
		res := e.do(request{path: "/api/v1/models", key: bad})
		p := res.problem(t, http.StatusTooManyRequests, "rate_limited")
		if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "address" || res.Header.Get("Retry-After") == "" {
			t.Errorf("over the address quota: violated %v, Retry-After %q", p.ViolatedPolicies, res.Header.Get("Retry-After"))
		}
		if res := e.do(request{path: "/api/v1/models", key: key}); res.StatusCode != http.StatusOK ||
			!strings.HasPrefix(res.Header.Get("RateLimit"), `"key";`) {
			t.Errorf("a valid key from the same address: %d, RateLimit %q", res.StatusCode, res.Header.Get("RateLimit"))
		}
	})
}

// Without --cors-origins no page of another site can read an answer made with a key that lists no origins: it
// reads only the refusal. With --cors-origins, the API and the ingest URLs answer the allowed origins; the console
// never answers CORS. (Preflights and keys with origins: origins_test.go.)
func TestCORS(t *testing.T) {
	db := storetest.SQLite(t)
	off := newEnv(t, db, handlers.Config{})
	key, _ := off.key(off.workspace("Acme").ID, "models:read")
	res := off.do(request{path: "/api/v1/models", key: key, header: map[string]string{"Origin": "https://app.example.com"}})
	res.problem(t, http.StatusForbidden, "origin_not_allowed")
	if res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || res.Header.Get("Vary") != "Origin" {
		t.Errorf("CORS off: the refusal is not readable: %v", res.Header)
	}

	on := newEnv(t, db, handlers.Config{CORSOrigins: []string{"https://app.example.com"}})
	res = on.do(request{path: "/api/v1/models", key: key, header: map[string]string{"Origin": "https://app.example.com"}})
	if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "RateLimit") || res.Header.Get("Vary") != "Origin" {
		t.Errorf("allowed origin: %d %v", res.StatusCode, res.Header)
	}
	// A problem is readable too (the page shows its detail).
	res = on.do(request{path: "/api/v1/models", header: map[string]string{"Origin": "https://app.example.com"}})
	res.problem(t, http.StatusUnauthorized, "missing_api_key")
	if res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("problem of an allowed origin: %v", res.Header)
	}
	// Without a valid key another origin learns nothing, not even why.
	res = on.do(request{path: "/api/v1/models", header: map[string]string{"Origin": "https://evil.example"}})
	if res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Vary") != "Origin" {
		t.Errorf("other origin: %v", res.Header)
	}
	if r := on.preflight("https://app.example.com", "/api/v1/links"); r.StatusCode != http.StatusNoContent ||
		r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight of an allowed origin: %d %v", r.StatusCode, r.Header)
	}
	if r := on.preflight("https://app.example.com", "/user/api"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("the console answered a preflight: %v", r.Header)
	}
}

// A sender's URL check (GET on the ingest URL) counts against the source's quota like a request does, and says so.
func TestIngestChallengeCountsAgainstTheSourceQuota(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		a := newAutomation(t, db)
		src := a.createSource(`{"name":"Hook","event_type":"custom.hook","verification":{"scheme":"none"},"limits":{"rate_limit_per_minute":2}}`)
		path := src.IngestURL[strings.Index(src.IngestURL, "/in/"):]
		for i := range 2 {
			res := a.do(request{path: path + "?challenge=abc"})
			if res.StatusCode != http.StatusOK || string(res.body) != "abc" ||
				res.Header.Get("RateLimit-Policy") != `"source";q=2;w=60` ||
				!strings.HasPrefix(res.Header.Get("RateLimit"), `"source";r=`+string(rune('1'-i))+";") {
				t.Errorf("check %d: %d %q %v", i+1, res.StatusCode, res.body, res.Header)
			}
		}
		res := a.do(request{path: path + "?challenge=abc"})
		res.problem(t, http.StatusTooManyRequests, "rate_limited")
		if res.Header.Get("Retry-After") == "" || !strings.HasPrefix(res.Header.Get("RateLimit"), `"source";r=0;`) {
			t.Errorf("over the quota: %v", res.Header)
		}
	})
}
