package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/store/storetest"
)

// A path that is not a slug answers 404 before any lookup: it never reaches the cache or the database. An unknown
// slug is looked up once and remembered.
func TestInvalidSlugsAreNotLookedUp(t *testing.T) {
	db := storetest.SQLite(t)
	rec, err := clicks.New(db, clicks.Config{SpoolDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	running, stop := context.WithCancel(context.Background())
	drained := make(chan error, 1)
	go func() { drained <- rec.Run(running) }()
	defer func() { stop(); <-drained }()
	svc, err := links.New(db, events.NewOutbox(db, events.Builtin()), links.Config{BaseURL: "http://sb.test"})
	if err != nil {
		t.Fatal(err)
	}
	cache := linkcache.New(svc.Resolve, db.LinkChanges, linkcache.Config{})
	if err := cache.Run(context.Background()); err != nil { // on SQLite: trusted at once
		t.Fatal(err)
	}
	s, err := New(Config{BaseURL: "http://sb.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Links: svc, Redirects: RedirectOptions{Clicks: rec, Cache: cache}}, db)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://sb.test"+path, nil))
		return w.Code
	}
	for _, path := range []string{"/-x", "/_x", "/a.b", "/a%2Fb", "/" + strings.Repeat("z", 64), "/a+b", "/a++"} {
		if code := get(path); code != http.StatusNotFound {
			t.Errorf("%s: %d", path, code)
		}
	}
	if n := cache.Len(); n != 0 {
		t.Fatalf("%d cache entries after paths that are no slugs", n)
	}
	for range 3 {
		if code := get("/unknown-slug"); code != http.StatusNotFound {
			t.Fatalf("unknown slug: %d", code)
		}
	}
	if n := cache.Len(); n != 1 {
		t.Fatalf("%d cache entries after an unknown slug, want its negative entry", n)
	}
}
