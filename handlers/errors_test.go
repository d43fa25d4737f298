package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestRoutingFailuresAreProblems(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	key, _ := e.key(e.workspace("Acme").ID, "models:read")

	p := e.do(request{path: "/api/v1/nothing-here", key: key}).problem(t, http.StatusNotFound, "route_not_found")
	if p.Instance != "/api/v1/nothing-here" {
		t.Errorf("instance = %q", p.Instance)
	}
	e.do(request{path: "/nothing-here"}).problem(t, http.StatusNotFound, "route_not_found")

	res := e.do(request{method: http.MethodDelete, path: "/api/v1/models", key: key})
	res.problem(t, http.StatusMethodNotAllowed, "method_not_allowed")
	if got := res.Header.Get("Allow"); got != "GET" {
		t.Errorf("Allow = %q, want GET", got)
	}
}

// A path that no route serves, with any method, is route_not_found whatever the method; a route asked with a method
// it lacks is method_not_allowed with its Allow. The short-link route, which Echo matches for every path, serves no
// path of more than one segment.
func TestRouteNotFoundWhateverTheMethod(t *testing.T) {
	e := newRedirectEnv(t, storetest.SQLite(t), handlers.Config{})
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{"/api", "/api/v1/nope", "/api/v1/links/x/y/z", "/a/b", "/user/nope/deeper"} {
			e.do(request{method: method, path: path, key: e.key}).problem(t, http.StatusNotFound, "route_not_found")
		}
	}
	for path, allow := range map[string]string{"/api/v1/models": "GET", "/docs/": "OPTIONS, GET", "/some-slug": "OPTIONS, GET, HEAD"} {
		res := e.do(request{method: http.MethodDelete, path: path, key: e.key})
		res.problem(t, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := res.Header.Get("Allow"); got != allow {
			t.Errorf("DELETE %s: Allow = %q, want %q", path, got, allow)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{BodyLimit: 1024})
	key, _ := e.key(e.workspace("Acme").ID, "models:read")
	res := e.do(request{method: http.MethodPost, path: "/api/v1/models", key: key, body: `{"x":"` + strings.Repeat("a", 2048) + `"}`})
	p := res.problem(t, http.StatusRequestEntityTooLarge, "request_too_large")
	if !strings.Contains(p.Detail, "1024") {
		t.Errorf("detail %q does not name the limit", p.Detail)
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	res := e.do(request{path: "/api/v1/models", header: map[string]string{"X-Request-Id": "trace-abc.123"}})
	if p := res.problem(t, http.StatusUnauthorized, "missing_api_key"); p.RequestID != "trace-abc.123" {
		t.Errorf("request_id = %q, want the caller's", p.RequestID)
	}
	res = e.do(request{path: "/api/v1/models", header: map[string]string{"X-Request-Id": "has spaces and <html>"}})
	if id := res.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("X-Request-Id = %q: an unsafe caller ID must be replaced", id)
	}
	a := e.do(request{path: "/healthz"}).Header.Get("X-Request-Id")
	b := e.do(request{path: "/healthz"}).Header.Get("X-Request-Id")
	if a == "" || a == b {
		t.Errorf("request IDs %q and %q must be present and unique", a, b)
	}
}
