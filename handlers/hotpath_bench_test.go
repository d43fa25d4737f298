package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
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

// BenchmarkRedirect follows a hot short link through the whole server in process (no network), as a browser does,
// with a running click recorder of the production defaults writing every click to SQLite, beside a bare Echo
// handler answering the same redirect. The timed part ends once every click is stored (the spool replayed too), and cpu-ns/op is the whole
// process's CPU time (user and system) per redirect, the writer's included: on a machine shared with other work it
// moves far less than ns/op.
func BenchmarkRedirect(b *testing.B) {
	db := storetest.SQLite(b)
	rec, err := clicks.New(db, clicks.Config{SpoolDir: b.TempDir(), Logger: telemetry.NewJSONLogger(io.Discard, nil)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	e := newLinkEnvWith(b, db, handlers.Config{Logger: telemetry.NewJSONLogger(io.Discard, nil),
		Redirects: handlers.RedirectOptions{Clicks: rec}}, links.Config{})
	l := e.create(`{"destination_url":"https://example.com/landing?utm_source=bench"}`)
	bare := echo.New()
	bare.GET("/:slug", func(c echo.Context) error {
		h := c.Response().Header()
		h["Cache-Control"] = []string{"private, no-store"}
		h["X-Robots-Tag"] = []string{"noindex"}
		return c.Redirect(http.StatusFound, l.DestinationUrl)
	})
	for _, t := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"server", e.srv}} {
		b.Run(t.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/"+l.Slug, nil)
			req.Host = e.domain
			req.RemoteAddr = "203.0.113.7:40000"
			req.Header.Set("User-Agent", browserUA)
			req.Header.Set("Accept", browserAccept)
			b.ReportAllocs()
			cpu := processCPU()
			b.ResetTimer()
			for range b.N {
				w := httptest.NewRecorder()
				t.h.ServeHTTP(w, req)
				if w.Code != http.StatusFound {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			for n, spooled := rec.Backlog(); n > 0 || spooled > 0; n, spooled = rec.Backlog() {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system CPU time this process has spent so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
