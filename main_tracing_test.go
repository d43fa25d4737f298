package main

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/await"
)

// span is what the test's collector keeps of an exported span.
type span struct {
	name, trace, id, parent string
	attrs                   map[string]string
}

// otlpCollector is an OTLP/HTTP trace receiver: it decodes each export request (protobuf, gzip or not) and keeps
// its spans.
type otlpCollector struct {
	mu    sync.Mutex
	spans []span
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var req collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				kept := span{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), attrs: map[string]string{}}
				for _, a := range s.Attributes {
					if v, ok := a.Value.Value.(*common.AnyValue_IntValue); ok {
						kept.attrs[a.Key] = strconv.FormatInt(v.IntValue, 10)
					} else {
						kept.attrs[a.Key] = a.Value.GetStringValue()
					}
				}
				c.spans = append(c.spans, kept)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (c *otlpCollector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

// A server with an OTLP endpoint traces an API call from the caller's traceparent through its database statements,
// and the webhook attempt the call caused through the HTTP request to the receiver, which gets the trace in its own
// traceparent; no span holds the API key, the webhook secret or a path.
func TestTracesReachAnOTLPCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	databases(t, func(t *testing.T, dbURL string) {
		otlp := &otlpCollector{}
		collectorSrv := httptest.NewServer(otlp)
		defer collectorSrv.Close()
		var mu sync.Mutex
		var received []string
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			received = append(received, r.Header.Get("traceparent"))
			mu.Unlock()
		}))
		defer receiver.Close()

		secret := workspaceKey(t, dbURL, "Traces", "links:write,webhooks:write")
		srv := runServer(t, dbURL, "", "SWITCHBOARD_OTLP_ENDPOINT="+collectorSrv.URL,
			"SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true", "SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8")
		hook := srv.created(secret, "/api/v1/webhooks", `{"url":"`+receiver.URL+`/hook","events":["link.created"]}`,
			"traceparent", "00-11111111111111111111111111111111-1111111111111111-01")
		const trace, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		srv.created(secret, "/api/v1/links", `{"destination_url":"https://example.com/traced"}`, "traceparent", "00-"+trace+"-"+caller+"-01")

		var server, attempt, outbound span
		await.Equal(t, "the spans of the call and of the webhook attempt", func() bool {
			spans := otlp.all()
			for _, s := range spans {
				switch {
				case s.name == "createLink" && s.trace == trace:
					server = s
				case s.name == "webhook attempt" && s.attrs["switchboard.event_type"] == "link.created" &&
					strings.Contains(hook, `"id":"`+s.attrs["switchboard.webhook_id"]+`"`):
					attempt = s // this server's own (other tests' servers share the PostgreSQL database)
				}
			}
			for _, s := range spans {
				if s.name == "HTTP POST" && attempt.id != "" && s.parent == attempt.id {
					outbound = s
				}
			}
			return server.id != "" && outbound.id != ""
		}, true)

		if server.parent != caller || server.attrs["http.route"] != "/api/v1/links" {
			t.Errorf("server span %+v: want a child of the caller's span %s with the route", server, caller)
		}
		// The link is written in a transaction: a span from BEGIN to COMMIT under the request's, its statements under it.
		var statements []string
		for _, tx := range otlp.all() {
			if tx.name == "transaction" && tx.parent == server.id {
				for _, s := range otlp.all() {
					if s.parent == tx.id && s.attrs["db.system.name"] != "" {
						statements = append(statements, s.name)
					}
				}
			}
		}
		if joined := strings.Join(statements, " "); !strings.Contains(joined, "INSERT") || !strings.HasSuffix(joined, "COMMIT") {
			t.Errorf("statements traced in createLink's transaction: %v, want its INSERTs, then COMMIT", statements)
		}
		if attempt.attrs["switchboard.event_type"] != "link.created" || attempt.attrs["http.response.status_code"] == "" {
			t.Errorf("webhook attempt span %+v", attempt)
		}
		mu.Lock()
		got := strings.Join(received, " ")
		mu.Unlock()
		if !strings.Contains(got, "00-"+attempt.trace+"-"+outbound.id+"-01") {
			t.Errorf("the receiver got traceparent %q, want the attempt's trace %s and the outbound span %s", got, attempt.trace, outbound.id)
		}

		whsec := hook[strings.Index(hook, "whsec_"):][:20]
		for _, s := range otlp.all() {
			for k, v := range s.attrs {
				if strings.Contains(v, secret[:20]) || strings.Contains(v, whsec) || k == "url.path" || k == "url.full" || k == "db.query.text" {
					t.Errorf("span %q holds %s=%q", s.name, k, v)
				}
			}
		}
	})
}
