package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver for the admin connection
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

const modelsPath = "/api/v1/models"

// httpServer serves a handler on a loopback port.
type httpServer struct {
	url string
	srv *http.Server
}

// listen takes a random port on 127.0.0.1.
func listen() (net.Listener, error) {
	return net.Listen("tcp", "127.0.0.1:0")
}

// serve serves h on ln with the timeouts of `switchboard serve`. They put deadlines on every connection, part of the
// cost of each request, so the baseline pays them too and the ratio compares handlers only.
func serve(ln net.Listener, h http.Handler) *httpServer {
	s := &httpServer{url: "http://" + ln.Addr().String(), srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}}
	// Serve ends only when the server is closed or accepting fails; the latter shows as errors in the preflight
	// request or in wrk's socket errors, which fail the run.
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

func (s *httpServer) close() { _ = s.srv.Close() }

// startBare serves body on GET /api/v1/models from an Echo router with no middleware: the least work any Echo
// server can do for the request, and the baseline of the models rows.
func startBare(body []byte) (*httpServer, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET(modelsPath, func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	return serve(ln, e), nil
}

// startBareRedirect answers GET /:slug with a 302 to location, with the cache headers of a Switchboard redirect,
// from an Echo router with no middleware: the baseline of the redirect rows.
func startBareRedirect(location string) (*httpServer, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/:slug", func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Cache-Control", "private, no-store")
		h.Set("X-Robots-Tag", "noindex")
		return c.Redirect(http.StatusFound, location)
	})
	return serve(ln, e), nil
}

// switchboard is the real server over one migrated database, with a workspace, a key that may read models, a key
// that may write links, and a click recorder.
type switchboard struct {
	*httpServer
	key      string
	linksKey string
	handler  *handlers.Server
	recorder *clicks.Recorder
	// stopJobs stops the server's background jobs as serve does (the recorder drains after the link jobs, the key
	// verifier last) and waits for them.
	stopJobs func()
	db       *store.DB
	// box and outbox are the server's, for a webhook dispatcher run beside it (the ingest → delivery row).
	box    *sealbox.Box
	outbox *events.Outbox
	ws     store.Workspace
}

// startSwitchboard opens and migrates the database at dbURL, creates a workspace and its keys the way
// `switchboard workspace create` and `switchboard key create` do, runs a click recorder with its spool in spoolDir
// and a key verifier, and serves handlers.New on a loopback port.
func startSwitchboard(ctx context.Context, dbURL, spoolDir string) (_ *switchboard, err error) {
	db, err := openMigrated(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = db.Close()
		}
	}()
	ws, err := db.Workspaces.Create(ctx, "bench")
	if err != nil {
		return nil, err
	}
	modelsKey, err := createKey(ctx, db, ws.ID, "models:read")
	if err != nil {
		return nil, err
	}
	linksKey, err := createKey(ctx, db, ws.ID, "links:write", "automation:write")
	if err != nil {
		return nil, err
	}
	// Access logs are formatted as in production; only the write to a terminal or file is left out.
	log := telemetry.NewJSONLogger(io.Discard, nil) // production's logger (serve), writing nowhere
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	// The product as serve builds it (the ingest rows' source seals its secret with the app's key, as in
	// production); of its jobs only those of links and keys run: the rows here measure requests, and the other
	// engines have rows of their own.
	a, err := app.New(ctx, db, app.Config{BaseURL: "http://" + ln.Addr().String(), Logger: log,
		Clicks: &clicks.Config{SpoolDir: spoolDir}})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	h, err := handlers.New(handlers.Config{
		BaseURL: "http://" + ln.Addr().String(),
		// High enough never to answer 429: the limiter's bookkeeping is measured, its refusals are not.
		KeyRateLimit:       1_000_000_000,
		WorkspaceRateLimit: 1_000_000_000,
		Verifier:           a.Verifier,
		Logger:             log,
		Box:                a.Box,
		Events:             a.Events,
		Links:              a.Links,
		Webhooks:           a.Webhooks,
		Channels:           a.Messaging,
		LLM:                a.LLM,
		Bots:               a.Bots,
		Automation:         a.Automation,
		Limiter:            a.Limiter,
		Redirects:          handlers.RedirectOptions{Clicks: a.Clicks, Cache: a.Redirects},
	}, db)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	rec, linkService, cache, verifier, box, outbox := a.Clicks, a.Links, a.Redirects, a.Verifier, a.Box, a.Events
	jobs := runner.New(log)
	jobs.Go(1, "link expiry announcer", linkService.Run)
	jobs.Go(1, "redirect cache watch", cache.Run)
	jobs.Go(1, "click recorder", rec.Run)
	jobs.Go(2, "api key verifier", verifier.Run)
	running, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() { _ = jobs.Run(running); close(stopped) }()
	return &switchboard{httpServer: serve(ln, h), key: modelsKey, linksKey: linksKey, handler: h, recorder: rec,
		stopJobs: func() { stop(); <-stopped }, db: db, box: box, outbox: outbox, ws: ws}, nil
}

// createKey stores a new key of the workspace with the scopes and returns its secret.
func createKey(ctx context.Context, db *store.DB, workspaceID string, scopes ...string) (string, error) {
	secret, err := apikey.Generate()
	if err != nil {
		return "", err
	}
	_, err = db.APIKeys.Create(ctx, store.NewAPIKey{
		WorkspaceID: workspaceID, Name: "bench", SecretHash: secret.Hash, DisplayPrefix: secret.DisplayPrefix,
		Last4: secret.Last4, Scopes: scopes, CreatedBy: "bench",
	})
	return secret.Plain, err
}

// openMigrated opens and migrates the database at dbURL.
func openMigrated(ctx context.Context, dbURL string) (*store.DB, error) {
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// headers are the request headers of an authenticated API client.
func (s *switchboard) headers() []string {
	return []string{"Authorization: Bearer " + s.key, "Accept: application/json"}
}

// close stops serving, then the server's background jobs (the recorder drains, the verifier writes last-use times),
// then closes the database they write to.
func (s *switchboard) close() {
	s.httpServer.close()
	s.stopJobs()
	_ = s.db.Close()
}

// benchPostgres is the PostgreSQL database of a section's rows when they are wanted: a new one (createPostgresDB),
// with the function that drops it (reporting a failure to log), or the reason the rows are skipped. drop is never
// nil; dbURL is empty when there is no database.
func benchPostgres(ctx context.Context, o options, wanted bool, log io.Writer) (dbURL string, drop func(), skipped string) {
	drop = func() {}
	switch {
	case !wanted:
		return "", drop, ""
	case o.skipPostgres:
		return "", drop, "-skip-postgres was given"
	}
	dbURL, dropDB, err := createPostgresDB(ctx)
	if err != nil {
		return "", drop, err.Error()
	}
	return dbURL, func() {
		if err := dropDB(); err != nil {
			fmt.Fprintln(log, "bench:", err)
		}
	}, ""
}

// createPostgresDB creates an empty database switchboard_bench_<random> on the server of the PostgreSQL tests
// (SWITCHBOARD_TEST_POSTGRES_URL, default storetest.DefaultPostgresURL) and returns its URL and the function that
// drops it. The error says why PostgreSQL cannot be used.
func createPostgresDB(ctx context.Context) (dbURL string, drop func() error, err error) {
	adminURL := os.Getenv("SWITCHBOARD_TEST_POSTGRES_URL")
	if adminURL == "" {
		adminURL = storetest.DefaultPostgresURL
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("SWITCHBOARD_TEST_POSTGRES_URL is not a URL: %w", err)
	}
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		return "", nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.PingContext(pingCtx); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("PostgreSQL at %s is not reachable (set SWITCHBOARD_TEST_POSTGRES_URL): %w", u.Redacted(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	name := "switchboard_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("create database %s on %s: %w", name, u.Redacted(), err)
	}
	u.Path = "/" + name
	drop = func() error {
		// Not ctx: the database must be dropped after an interrupt too. FORCE ends connections still open.
		dropCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := admin.ExecContext(dropCtx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		if err != nil {
			err = fmt.Errorf("could not drop the benchmark's PostgreSQL database %s: %w", name, err)
		}
		return errors.Join(err, admin.Close())
	}
	return u.String(), drop, nil
}
