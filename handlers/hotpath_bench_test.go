package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/store/storetest"
)

// BenchmarkListModels runs the reference first call through the whole server in process (no network), beside a
// bare Echo handler answering the same body: the ratio of the two is the cost of the product's middleware (request
// ID, access log as `serve` writes it, metrics, key check, quotas, validation). `go test ./handlers -run - -bench ListModels -cpuprofile
// cpu.prof` shows where it goes.
func BenchmarkListModels(b *testing.B) {
	db := storetest.SQLite(b)
	e := newEnv(b, db, handlers.Config{Logger: telemetry.NewJSONLogger(io.Discard, nil), KeyRateLimit: 1 << 30, WorkspaceRateLimit: 1 << 30})
	ws := e.workspace("Acme")
	key, _ := e.key(ws.ID, "models:read")
	body := func() []byte {
		res := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		e.srv.ServeHTTP(res, req)
		if res.Code != http.StatusOK {
			b.Fatalf("status %d: %s", res.Code, res.Body)
		}
		return res.Body.Bytes()
	}()
	bare := echo.New()
	bare.GET("/api/v1/models", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, body) })

	for _, t := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"server", e.srv}} {
		b.Run(t.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				t.h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
