package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/store/storetest"
)

// TestAccessLineIsSlogs holds the access log's own formatter to the line slog's JSON handler writes for the same
// record, byte for byte, strings that need escaping included.
func TestAccessLineIsSlogs(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 4, 49, 123456000, time.FixedZone("", 3600))
	for _, l := range []accessLine{
		{requestID: "req_01", method: "GET", path: "/api/v1/models", status: 200, elapsed: 1234567 * time.Nanosecond,
			operation: "listModels", keyID: "key_1", workspaceID: "ws_1"},
		{requestID: "r", method: "POST", path: "/in/in_***Qz3k", status: 401, operation: "unmatched"},
		{requestID: `a"b\c`, method: "BREW", path: "/x\x00\x1f\t\n\r\x7f/é/\u2028\u2029/<&>", status: 599,
			elapsed: -time.Microsecond, operation: "/:slug", keyID: "\xff\xfe", workspaceID: "日本"},
	} {
		var want bytes.Buffer
		h := slog.NewJSONHandler(&want, nil)
		r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
		r.AddAttrs(slog.String("request_id", l.requestID), slog.String("method", l.method), slog.String("path", l.path),
			slog.Int("status", l.status), slog.Int64("duration_us", l.elapsed.Microseconds()),
			slog.String("operation", l.operation))
		if l.keyID != "" {
			r.AddAttrs(slog.String("key_id", l.keyID), slog.String("workspace_id", l.workspaceID))
		}
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got := appendAccessLine(nil, at, l); string(got) != want.String() {
			t.Errorf("access line\n got %s\nwant %s", got, want.String())
		}
	}
}

// TestAccessLogThroughTheProcessLogger: with the logger serve builds (telemetry.NewJSONLogger over a LogWriter),
// every request still gets its line — formatted by the access log itself, buffered, and written by Close at the
// latest — and a level above info still silences it.
func TestAccessLogThroughTheProcessLogger(t *testing.T) {
	db := storetest.SQLite(t)
	var out bytes.Buffer                            // written under the writer's lock, read after its Close
	w := telemetry.NewLogWriter(&out, time.Hour, 0) // only Close writes
	s, err := New(withServices(t, db, Config{Logger: telemetry.NewJSONLogger(w, nil)}, nil), db)
	if err != nil {
		t.Fatal(err)
	}
	if s.accessOut == nil {
		t.Fatal("the access log goes through slog under the process's logger")
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/models?x=1", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d", rec.Code)
	}
	if out.String() != "" {
		t.Fatalf("written before the interval or Close: %s", out.String())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	for k, want := range map[string]any{"level": "INFO", "msg": "request", "request_id": rec.Header().Get("X-Request-Id"),
		"method": "GET", "path": "/api/v1/models", "status": 401.0, "operation": "listModels"} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v (%s)", k, line[k], want, out.String())
		}
	}
	if _, ok := line["duration_us"].(float64); !ok {
		t.Errorf("no duration_us: %s", out.String())
	}

	var quiet bytes.Buffer
	s, err = New(withServices(t, db, Config{Logger: telemetry.NewJSONLogger(&quiet, slog.LevelWarn)}, nil), db)
	if err != nil {
		t.Fatal(err)
	}
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/models", nil))
	if strings.Contains(quiet.String(), `"msg":"request"`) {
		t.Errorf("an access line at --log-level warn: %s", quiet.String())
	}
}
