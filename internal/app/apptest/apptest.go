// Package apptest builds the product for tests through app.New, as serve does, with a quiet logger.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/store"
)

// Loopback is the egress policy of tests: plain http to 127.0.0.0/8, where their receivers listen.
var Loopback = egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// New returns the product over db; cfg's zero fields take app.New's defaults (outbound connections to public https
// targets only: a test of receivers on this machine passes Loopback), and the logger discards. Nothing runs: a
// test runs the jobs it needs.
func New(t testing.TB, db *store.DB, cfg app.Config) *app.App {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	a, err := app.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Run runs jobs (an app's Runtime.Run, Bots.Run, …) until the test ends, and waits for each to return then.
func Run(t testing.TB, jobs ...func(context.Context) error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Go(func() { _ = job(ctx) })
	}
	t.Cleanup(func() { stop(); wg.Wait() })
}

// WithBots is New with a fake OpenAI-compatible upstream serving llama3.1 (returned, to see what it was asked), an
// unpaced channel runtime whose short lease a test's end frees, and the runtime and the bot engine running until the
// test ends. cfg's Egress defaults to Loopback (the upstream listens there).
func WithBots(t testing.TB, db *store.DB, cfg app.Config) (*app.App, *llmtest.Server) {
	t.Helper()
	upstream := llmtest.New(t, "sk-upstream", "llama3.1")
	cfg.ModelUpstreams = []llm.Upstream{{Name: "local", BaseURL: upstream.URL, APIKey: "sk-upstream"}}
	if cfg.Egress.AllowedNetworks == nil {
		cfg.Egress = Loopback
	}
	// Unpaced (pacing has its own tests), with a short lease so that a test's end frees it.
	cfg.Channels = hub.Options{Rate: -1, Lease: 3 * time.Second}
	a := New(t, db, cfg)
	Run(t, a.Runtime.Run, a.Bots.Run)
	return a, upstream
}
