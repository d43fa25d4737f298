package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/store/storetest"
)

// The Location of every combination of destination, UTM parameters and visitor query: the destination's bytes are
// kept, UTM replaces the destination's parameters of the same name, the visitor only adds new names, and the
// fragment stays last.
func TestLocationMerge(t *testing.T) {
	tests := []struct {
		name, dest string
		utm        map[string]string
		forward    bool
		query      string
		want       string
	}{
		{"nothing to add", "https://example.com/a", nil, true, "", "https://example.com/a"},
		{"destination bytes kept", "https://Example.com/a%2Fb?q=x%20y&q=z", nil, true, "", "https://Example.com/a%2Fb?q=x%20y&q=z"},
		{"visitor query", "https://example.com/a", nil, true, "gclid=1&fbclid=2", "https://example.com/a?gclid=1&fbclid=2"},
		{"visitor query after the destination's", "https://example.com/a?x=1", nil, true, "y=2", "https://example.com/a?x=1&y=2"},
		{"destination wins", "https://example.com/a?x=1", nil, true, "x=2&X=3", "https://example.com/a?x=1&X=3"},
		{"encoded names compare decoded", "https://example.com/a?a%20b=1", nil, true, "a+b=2", "https://example.com/a?a%20b=1"},
		{"visitor values re-encoded", "https://example.com/a", nil, true, "q=%3Cb%3E+%26&r=a/b", "https://example.com/a?q=%3Cb%3E+%26&r=a%2Fb"},
		{"undecodable visitor pairs dropped", "https://example.com/a", nil, true, "bad=%zz&ok=1&=3&&", "https://example.com/a?ok=1"},
		{"name without value", "https://example.com/a", nil, true, "flag", "https://example.com/a?flag"},
		{"forward_query off", "https://example.com/a", nil, false, "x=1", "https://example.com/a"},
		{"fragment stays last", "https://example.com/a?x=1#sec", nil, true, "y=2", "https://example.com/a?x=1&y=2#sec"},
		{"empty query mark", "https://example.com/a?", nil, true, "y=2", "https://example.com/a?y=2"},
		{"UTM added", "https://example.com/a", map[string]string{"utm_source": "nl", "utm_campaign": "bf 26"}, true, "",
			"https://example.com/a?utm_campaign=bf+26&utm_source=nl"},
		{"UTM replaces the destination's", "https://example.com/a?utm_source=x&id=7#top", map[string]string{"utm_source": "nl"}, true, "",
			"https://example.com/a?id=7&utm_source=nl#top"},
		{"UTM wins over the visitor", "https://example.com/a", map[string]string{"utm_source": "nl"}, true, "utm_source=evil&utm_term=v",
			"https://example.com/a?utm_source=nl&utm_term=v"},
		{"no query added to other schemes", "mailto:team@example.com?subject=Hi", map[string]string{"utm_source": "nl"}, true, "x=1",
			"mailto:team@example.com?subject=Hi"},
		{"visitor cannot add a fragment or a path", "https://example.com/a", nil, true, "x=%23y&z=/../../evil",
			"https://example.com/a?x=%23y&z=%2F..%2F..%2Fevil"},
		{"oversized visitor query ignored", "https://example.com/a", nil, true, "x=" + strings.Repeat("a", maxForwardedQuery),
			"https://example.com/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := &redirectTarget{}
			tg.base, tg.fragment, tg.names, tg.hasQuery = withUTM(tt.dest, tt.utm)
			tg.location = tg.base + tg.fragment
			if !tt.forward {
				tg.names = nil
			}
			if got := tg.locationFor(tt.query); got != tt.want {
				t.Errorf("Location = %q, want %q", got, tt.want)
			}
		})
	}
}

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
	s, err := New(Config{BaseURL: "http://sb.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Redirects: RedirectOptions{Clicks: rec}}, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	if n := s.redirects.cache.Len(); n != 0 {
		t.Fatalf("%d cache entries after paths that are no slugs", n)
	}
	for range 3 {
		if code := get("/unknown-slug"); code != http.StatusNotFound {
			t.Fatalf("unknown slug: %d", code)
		}
	}
	if n := s.redirects.cache.Len(); n != 1 {
		t.Fatalf("%d cache entries after an unknown slug, want its negative entry", n)
	}
}
