package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// fixture is a small spec with a body operation and a deprecated one; the real spec has neither yet.
const fixture = `
openapi: 3.0.3
info: {title: fixture, version: "1"}
paths:
  /api/v1/things:
    post:
      operationId: createThing
      x-required-scopes: [links:write]
      parameters:
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
        - {name: Idempotency-Key, in: header, schema: {type: string, maxLength: 8}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [name]
              properties:
                name: {type: string, maxLength: 5}
                "a/b": {type: integer}
      responses:
        '201': {description: created}
  /api/v1/old-things:
    get:
      operationId: listOldThings
      deprecated: true
      x-deprecated-at: "2026-01-01"
      x-sunset: "2027-06-30"
      x-required-scopes: [links:read]
      responses:
        '200': {description: ok}
components:
  securitySchemes:
    bearerAuth: {type: http, scheme: bearer}
security:
  - bearerAuth: []
`

func loadFixture(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(fixture))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// validate runs the request through kin-openapi the way the server's validator does and returns our problem.
func validate(t *testing.T, req *http.Request) *Problem {
	t.Helper()
	doc := loadFixture(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
	var me openapi3.MultiError
	if err == nil || !errorsAs(err, &me) {
		t.Fatalf("want a MultiError, got %v", err)
	}
	return validationProblem(me)
}

func errorsAs(err error, me *openapi3.MultiError) bool {
	m, ok := err.(openapi3.MultiError)
	*me = m
	return ok
}

func post(body, contentType string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/things?limit=1000", strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Idempotency-Key", "much-too-long")
	return req
}

func TestValidationProblems(t *testing.T) {
	t.Run("fields are located by parameter, header and JSON pointer", func(t *testing.T) {
		p := validate(t, post(`{"name":"far too long","a/b":"x","extra":1}`, "application/json"))
		if p.Code != "validation_failed" {
			t.Fatalf("code %s", p.Code)
		}
		got := map[string]bool{}
		for _, f := range p.Fields {
			switch {
			case f.Parameter != "":
				got["parameter "+f.Parameter] = true
			case f.Header != "":
				got["header "+f.Header] = true
			default:
				got["pointer "+f.Pointer] = true
			}
			if f.Detail == "" {
				t.Errorf("field error without detail: %+v", f)
			}
		}
		for _, want := range []string{"parameter limit", "header Idempotency-Key", "pointer /name", "pointer /a~1b", "pointer /extra"} {
			if !got[want] {
				t.Errorf("missing %q in %v", want, got)
			}
		}
		if !strings.Contains(p.Detail, "invalid fields") {
			t.Errorf("detail = %q", p.Detail)
		}
	})
	t.Run("wrong media type", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/things", strings.NewReader(`name=x`))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if p := validate(t, req); p.Code != "unsupported_media_type" {
			t.Errorf("code %s", p.Code)
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/things", strings.NewReader(`{"name":`))
		req.Header.Set("Content-Type", "application/json")
		if p := validate(t, req); p.Code != "malformed_json" {
			t.Errorf("code %s", p.Code)
		}
	})
	t.Run("missing body", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/things", nil)
		req.Header.Set("Content-Type", "application/json")
		p := validate(t, req)
		if p.Code != "validation_failed" || len(p.Fields) != 1 || p.Fields[0].Detail != "a request body is required" {
			t.Errorf("problem %+v", p)
		}
	})
	t.Run("body over the limit while reading", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/things", nil)
		req.Header.Set("Content-Type", "application/json")
		req.Body = http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(`{"name":"abc"}`)), 4)
		if p := validate(t, req); p.Code != "request_too_large" {
			t.Errorf("code %s", p.Code)
		}
	})
}

func TestIndexOperationsRejectsIncompleteSpecs(t *testing.T) {
	tests := map[string]string{
		"no scopes":           "x-required-scopes: [links:write]",
		"unknown scope":       "x-required-scopes: [links:write]",
		"deprecated, no date": `x-sunset: "2027-06-30"`,
	}
	replace := map[string]string{
		"no scopes":           "",
		"unknown scope":       "x-required-scopes: [links:delete]",
		"deprecated, no date": "",
	}
	for name, old := range tests {
		t.Run(name, func(t *testing.T) {
			doc, err := openapi3.NewLoader().LoadFromData([]byte(strings.Replace(fixture, old, replace[name], 1)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := indexOperations(doc); err == nil {
				t.Error("indexOperations accepted the spec")
			}
		})
	}
	if _, err := indexOperations(loadFixture(t)); err != nil {
		t.Fatal(err)
	}
}

func newTestServer(t *testing.T) *Server {
	t.Helper()
	db := storetest.SQLite(t)
	s, err := New(withServices(t, db, Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, nil), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Deprecated operations answer with Deprecation (RFC 9745) and Sunset (RFC 8594) headers, from the spec alone.
func TestDeprecationHeaders(t *testing.T) {
	s := newTestServer(t)
	ops, err := indexOperations(loadFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	s.ops = ops
	s.echo.GET("/api/v1/old-things", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	s.echo.POST("/api/v1/things", func(c echo.Context) error { return c.NoContent(http.StatusCreated) })

	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/old-things", nil))
	if got := rec.Header().Get("Deprecation"); got != "@1767225600" {
		t.Errorf("Deprecation = %q, want @1767225600 (2026-01-01)", got)
	}
	if got := rec.Header().Get("Sunset"); got != "Wed, 30 Jun 2027 00:00:00 GMT" {
		t.Errorf("Sunset = %q", got)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/things", nil))
	if rec.Header().Get("Deprecation") != "" || rec.Header().Get("Sunset") != "" {
		t.Error("a current operation carries deprecation headers")
	}
}

// A panic becomes a 500 problem that reveals nothing, and is logged with the request ID.
func TestPanicIsAnInternalProblem(t *testing.T) {
	var logs bytes.Buffer
	db := storetest.SQLite(t)
	s, err := New(withServices(t, db, Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil), db)
	if err != nil {
		t.Fatal(err)
	}
	s.echo.GET("/boom", func(echo.Context) error { panic("secret internal detail") })
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if rec.Code != http.StatusInternalServerError || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("the problem leaks the panic: %s", rec.Body)
	}
	var p struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != "internal_error" {
		t.Errorf("body %s", rec.Body)
	}
	if !strings.Contains(logs.String(), "secret internal detail") || !strings.Contains(logs.String(), rec.Header().Get("X-Request-Id")) {
		t.Errorf("the panic was not logged with the request id: %s", logs.String())
	}
}

// An ingest URL's token is shown as its prefix and last four characters wherever the path is shown; other paths
// are shown as they are.
func TestPublicPath(t *testing.T) {
	for in, want := range map[string]string{
		"/in/in_4kTq2m9XbV7cR1sL0pW3yZ8aE5uN6hJdFgx9Qz":       "/in/in_***x9Qz",
		"/in/in_4kTq2m9XbV7cR1sL0pW3yZ8aE5uN6hJdFgx9Qz/extra": "/in/in_***x9Qz/extra",
		"/in/AnyTokenWithoutItsPrefix0123456789":              "/in/***6789",
		"/in/short":                                           "/in/***",
		"/in/":                                                "/in/",
		"/api/v1/sources/src_01JDAB3C4D5E6F7G8H9J0K1M2P":      "/api/v1/sources/src_01JDAB3C4D5E6F7G8H9J0K1M2P",
		"/inbox/in_4kTq2m9XbV7cR1sL0pW3yZ8aE5uN6hJdFgx9Qz":    "/inbox/in_4kTq2m9XbV7cR1sL0pW3yZ8aE5uN6hJdFgx9Qz",
	} {
		if got := publicPath(in); got != want {
			t.Errorf("publicPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// withServices gives cfg the product's services, built by apptest.New over db with the egress guard given (nil:
// the default policy).
func withServices(t *testing.T, db *store.DB, cfg Config, guard *egress.Guard) Config {
	t.Helper()
	a := apptest.New(t, db, app.Config{Logger: cfg.Logger, Guard: guard})
	cfg.Verifier, cfg.Box, cfg.Events, cfg.Links, cfg.Webhooks = a.Verifier, a.Box, a.Events, a.Links, a.Webhooks
	cfg.Channels, cfg.Automation, cfg.LLM, cfg.Bots = a.Messaging, a.Automation, a.LLM, a.Bots
	return cfg
}

// The API builds no service of its own: a configuration without one is refused, naming it, so that every process
// shares the services its composition root built (the console and the jobs use the same ones).
func TestNewRefusesMissingServices(t *testing.T) {
	db := storetest.SQLite(t)
	full := withServices(t, db, Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, nil)
	if _, err := New(full, db); err != nil {
		t.Fatalf("with every service: %v", err)
	}
	for name, drop := range map[string]func(*Config){
		"Verifier": func(c *Config) { c.Verifier = nil }, "Box": func(c *Config) { c.Box = nil },
		"Events": func(c *Config) { c.Events = nil }, "Links": func(c *Config) { c.Links = nil },
		"Webhooks": func(c *Config) { c.Webhooks = nil }, "Channels": func(c *Config) { c.Channels = nil },
		"Automation": func(c *Config) { c.Automation = nil }, "LLM": func(c *Config) { c.LLM = nil },
		"Bots": func(c *Config) { c.Bots = nil },
	} {
		cfg := full
		drop(&cfg)
		if _, err := New(cfg, db); err == nil || !strings.Contains(err.Error(), "Config."+name+" is required") {
			t.Errorf("without %s: %v", name, err)
		}
	}
}
