package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard/switchboard/api"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// registerPublicRoutes adds the routes that need no API key: the reference, the spec, the problem catalogue,
// health, readiness and metrics.
func (s *Server) registerPublicRoutes(e *echo.Echo) error {
	specJSON, err := yamlToJSON(api.Spec)
	if err != nil {
		return fmt.Errorf("convert openapi.yaml to JSON: %w", err)
	}
	e.GET("/openapi.yaml", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, "application/yaml; charset=utf-8", api.Spec)
	})
	e.GET("/openapi.json", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, specJSON)
	})

	docs := v5emb.NewHandlerWithConfig(swgui.Config{
		Title:       "Switchboard API reference",
		SwaggerJSON: "/openapi.json",
		BasePath:    "/docs/",
		SettingsUI: map[string]string{
			"tryItOutEnabled":          "true",
			"requestSnippetsEnabled":   "true",
			"displayRequestDuration":   "true",
			"persistAuthorization":     "false",
			"filter":                   "true",
			"defaultModelsExpandDepth": "1",
			"docExpansion":             `"list"`,
		},
	})
	policy, err := docsSecurityPolicy(docs)
	if err != nil {
		return err
	}
	serveDocs := func(c echo.Context) error {
		setPageHeaders(c.Response().Header(), policy)
		docs.ServeHTTP(c.Response(), c.Request())
		return nil
	}
	e.GET("/docs", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/docs/") })
	e.GET("/docs/", serveDocs)
	e.GET("/docs/*", serveDocs)

	e.GET("/problems", s.problemsPage)
	e.GET("/problems/:code", s.problemsPage)

	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler()))
	return nil
}

// readyz reports whether the database answers and whether the server's recent work with it succeeded: a database
// that answers pings while writes fail with I/O errors is not ready either.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		loggerFrom(ctx, s.log).Warn("readiness check failed", "error", err)
		return newProblem(problem.ServiceUnavailable, "The database does not answer.").withHeader("Retry-After", "5")
	}
	if err := s.db.Health(); err != nil {
		loggerFrom(ctx, s.log).Warn("readiness check failed", "error", err)
		return newProblem(problem.ServiceUnavailable, "The server's work with its database is failing: "+err.Error()+".").
			withHeader("Retry-After", strconv.Itoa(int(store.FaultWindow.Seconds())))
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "database": string(s.db.Dialect())})
}

var problemsTemplate = template.Must(template.New("problems").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Switchboard error codes</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1f2937}
code{background:#f3f4f6;padding:.1rem .3rem;border-radius:4px}tr:target{background:#fef3c7}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.4rem;border-bottom:1px solid #e5e7eb;vertical-align:top}</style>
</head><body><h1>Error codes</h1>
<p>Every Switchboard API error is an <a href="https://www.rfc-editor.org/rfc/rfc9457">RFC 9457</a> problem document
(<code>application/problem+json</code>) whose <code>type</code> points here. Switch on <code>code</code>; it never changes meaning.
The <a href="/docs/">API reference</a> lists which operation returns which.</p>
<table><thead><tr><th>Status</th><th>Code</th><th>Meaning</th></tr></thead><tbody>
{{range .}}<tr id="{{.Code}}"><td>{{.Status}}</td><td><code>{{.Code}}</code><br>{{.Title}}</td><td>{{.Description}}</td></tr>
{{end}}</tbody></table></body></html>`))

// problemsPage documents every problem code; /problems/{code} is the page's anchor for that code.
func (s *Server) problemsPage(c echo.Context) error {
	if code := c.Param("code"); code != "" {
		if _, ok := problem.Lookup(problem.Code(code)); !ok {
			return newProblem(problem.NotFound, fmt.Sprintf("There is no error code %q.", code))
		}
		return c.Redirect(http.StatusFound, "/problems#"+code)
	}
	var buf bytes.Buffer
	if err := problemsTemplate.Execute(&buf, problem.All()); err != nil {
		return err
	}
	setPageHeaders(c.Response().Header(), pageSecurityPolicy[0])
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}

// setPageHeaders gives a page of the server its Content-Security-Policy and keeps other sites from framing it
// (clickjacking), as the console's pages do.
func setPageHeaders(h http.Header, policy string) {
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// inlineScript matches the inline scripts of a page (a <script> without src).
var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// docsSecurityPolicy is the Content-Security-Policy of the interactive reference. Swagger UI's page starts the
// bundle with inline scripts; rather than allowing every inline script, the policy allows exactly those the page
// has, by hash (the page is the same on every request: it depends only on the handler's fixed configuration).
// Swagger UI styles its elements inline, and calls this server (the spec's server is "/") for "Try it out".
func docsSecurityPolicy(docs http.Handler) (string, error) {
	rec := httptest.NewRecorder()
	docs.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs/", nil))
	scripts := inlineScript.FindAllSubmatch(rec.Body.Bytes(), -1)
	if rec.Code != http.StatusOK || len(scripts) == 0 {
		return "", fmt.Errorf("the interactive reference's page: status %d, %d inline scripts", rec.Code, len(scripts))
	}
	var hashes strings.Builder
	for _, m := range scripts {
		sum := sha256.Sum256(m[1])
		fmt.Fprintf(&hashes, " 'sha256-%s'", base64.StdEncoding.EncodeToString(sum[:]))
	}
	return "default-src 'self'; script-src 'self'" + hashes.String() + "; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'", nil
}

// yamlToJSON converts a YAML document to JSON, keeping the key order of mappings so the JSON reads like the YAML.
func yamlToJSON(in []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSONNode(&buf, &doc); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func writeJSONNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSONNode(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSONNode(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := writeJSONNode(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSONNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if n.Tag == "!!str" || strings.HasPrefix(n.Tag, "!!timestamp") {
			v = n.Value
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.Write(b)
	}
	return nil
}
