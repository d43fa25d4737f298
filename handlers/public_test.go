package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard/switchboard/api"
	"github.com/switchboard/switchboard/handlers"
	problemtable "github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestSpecIsServed(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	yamlRes := e.do(request{path: "/openapi.yaml"})
	if yamlRes.StatusCode != http.StatusOK || string(yamlRes.body) != string(api.Spec) {
		t.Fatalf("/openapi.yaml must serve api/openapi.yaml byte for byte (status %d)", yamlRes.StatusCode)
	}
	jsonRes := e.do(request{path: "/openapi.json"})
	var fromJSON, fromYAML any
	if err := json.Unmarshal(jsonRes.body, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(api.Spec, &fromYAML); err != nil {
		t.Fatal(err)
	}
	normalised, _ := json.Marshal(fromYAML)
	var want any
	_ = json.Unmarshal(normalised, &want)
	if !reflect.DeepEqual(fromJSON, want) {
		t.Fatal("/openapi.json differs from openapi.yaml")
	}
	if !strings.HasPrefix(string(jsonRes.body), "{\n  \"openapi\": \"3.0.3\"") {
		t.Errorf("/openapi.json should keep the YAML's key order, starts %q", jsonRes.body[:40])
	}
}

func TestInteractiveReference(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	res := e.do(request{path: "/docs/"})
	page := string(res.body)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "swagger-ui") {
		t.Fatalf("status %d: %.200s", res.StatusCode, page)
	}
	for _, want := range []string{"/openapi.json", "requestSnippetsEnabled: true", "tryItOutEnabled: true"} {
		if !strings.Contains(page, want) {
			t.Errorf("/docs/ lacks %q", want)
		}
	}
	if strings.Contains(page, "cdn") || strings.Contains(page, "unpkg") {
		t.Error("/docs/ must work offline: no CDN assets")
	}
	asset := e.do(request{path: "/docs/swagger-ui-bundle.js"})
	if asset.StatusCode != http.StatusOK || len(asset.body) < 100_000 {
		t.Errorf("embedded Swagger UI bundle: status %d, %d bytes", asset.StatusCode, len(asset.body))
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := noFollow.Get(e.url + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/docs/" {
		t.Errorf("/docs → %d %s", r.StatusCode, r.Header.Get("Location"))
	}
}

// The interactive reference and the problem catalogue are pages like the console's: a Content-Security-Policy that
// lets only their own code run (the reference's inline scripts by hash, none on the catalogue) and no site frame
// them.
func TestPublicPagesHaveASecurityPolicy(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	for _, path := range []string{"/docs/", "/problems"} {
		res := e.do(request{path: path})
		csp := res.Header.Get("Content-Security-Policy")
		directives := map[string]string{}
		for d := range strings.SplitSeq(csp, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
			directives[name] = value
		}
		if directives["frame-ancestors"] != "'none'" || res.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: framing allowed: CSP %q, X-Frame-Options %q", path, csp, res.Header.Get("X-Frame-Options"))
		}
		script, ok := directives["script-src"]
		if !ok {
			script = directives["default-src"]
		}
		if script == "" || strings.Contains(script, "unsafe") || strings.Contains(script, "*") {
			t.Errorf("%s: scripts are not restricted: %q", path, csp)
		}
		for _, m := range regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(string(res.body), -1) {
			sum := sha256.Sum256([]byte(m[1]))
			if hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(script, hash) {
				t.Errorf("%s: an inline script of the page is not allowed by %q", path, script)
			}
		}
	}
}

// The problem table in code is the truth; the spec's ProblemCode enum, the error table of the spec's introduction
// and the /problems page must say the same, code for code and status for status.
func TestProblemCatalogue(t *testing.T) {
	want := map[string]int{}
	for _, pt := range problemtable.All() {
		want[string(pt.Code)] = pt.Status
	}

	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, v := range doc.Components.Schemas["ProblemCode"].Value.Enum {
		enum[v.(string)] = true
	}
	for code := range want {
		if !enum[code] {
			t.Errorf("ProblemCode enum of the spec lacks %s", code)
		}
	}
	for code := range enum {
		if _, ok := want[code]; !ok {
			t.Errorf("ProblemCode enum of the spec has %s, which is not in the problem table", code)
		}
	}

	// Rows of the introduction's table: | 409 | `conflict`, `slug_taken` | meaning |
	row := regexp.MustCompile("(?m)^\\s*\\| (\\d{3}) \\| ((?:`[a-z_]+`(?:, )?)+) \\|")
	documented := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(doc.Info.Description, -1) {
		status, _ := strconv.Atoi(m[1])
		for _, code := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[2], -1) {
			if _, twice := documented[code[1]]; twice {
				t.Errorf("the spec's error table lists %s twice", code[1])
			}
			documented[code[1]] = status
		}
	}
	for code, status := range want {
		if got, ok := documented[code]; !ok || got != status {
			t.Errorf("the spec's error table has %s at %d, want %d", code, got, status)
		}
	}
	for code := range documented {
		if _, ok := want[code]; !ok {
			t.Errorf("the spec's error table lists %s, which is not in the problem table", code)
		}
	}

	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	page := string(e.do(request{path: "/problems"}).body)
	for _, pt := range problemtable.All() {
		if !strings.Contains(page, fmt.Sprintf(`<tr id="%s"><td>%d</td>`, pt.Code, pt.Status)) {
			t.Errorf("/problems lacks %s with status %d", pt.Code, pt.Status)
		}
	}
	e.do(request{path: "/problems/no_such_code"}).problem(t, http.StatusNotFound, "not_found")
}

func TestHealthReadinessMetrics(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		if res := e.do(request{path: "/healthz"}); res.StatusCode != http.StatusOK {
			t.Errorf("/healthz %d", res.StatusCode)
		}
		res := e.do(request{path: "/readyz"})
		if res.StatusCode != http.StatusOK || !strings.Contains(string(res.body), string(db.Dialect())) {
			t.Errorf("/readyz %d %s", res.StatusCode, res.body)
		}
		key, _ := e.key(e.workspace("Acme").ID, "models:read")
		e.do(request{path: "/api/v1/models", key: key})
		e.do(request{path: "/api/v1/models"})
		metrics := string(e.do(request{path: "/metrics"}).body)
		for _, want := range []string{
			`switchboard_http_requests_total{method="GET",operation="listModels",status="200"} 1`,
			`switchboard_http_requests_total{method="GET",operation="listModels",status="401"} 1`,
			`switchboard_http_request_duration_seconds_bucket{operation="listModels"`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}

		// A statement the database refuses says nothing about the database; an operation that fails because of it
		// (here: a file PostgreSQL cannot read, a write SQLite refuses to the read-only pool) makes the server unready
		// although the database still answers pings.
		ctx := context.Background()
		if _, err := db.Bun().NewRaw("SELEC 1").Exec(ctx); err == nil {
			t.Fatal("a syntax error was accepted")
		}
		if res := e.do(request{path: "/readyz"}); res.StatusCode != http.StatusOK {
			t.Errorf("/readyz after a refused statement: %d %s", res.StatusCode, res.body)
		}
		var err error
		if db.Dialect() == store.Postgres {
			_, err = db.Bun().NewRaw("SELECT pg_read_file('/nonexistent/switchboard')").Exec(ctx)
		} else {
			_, err = db.Reader().NewRaw("INSERT INTO workspaces (id, name) VALUES ('ws_x', 'x')").Exec(ctx)
		}
		if err == nil {
			t.Fatal("the faulty operation succeeded")
		}
		p := e.do(request{path: "/readyz"}).problem(t, http.StatusServiceUnavailable, "service_unavailable")
		if !strings.Contains(p.Detail, "1 since the server started") {
			t.Errorf("/readyz after a fault: %+v", p)
		}
		if metrics := string(e.do(request{path: "/metrics"}).body); !strings.Contains(metrics, "switchboard_store_faults_total 1\n") {
			t.Error("/metrics does not count the fault")
		}

		_ = db.Close()
		if res := e.do(request{path: "/readyz"}); res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz with the database closed: %d", res.StatusCode)
		}
	})
}
