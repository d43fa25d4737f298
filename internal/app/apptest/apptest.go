// Package apptest builds the product for tests through app.New, as serve does, with a quiet logger.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/egress"
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
