package redirector

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const firefox = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.6; rv:133.0) Gecko/20100101 Firefox/133.0"

// env is a redirector over a links service with a short domain of its own (slugs are global per domain and the
// PostgreSQL database is shared by the package's tests), a running click recorder and the link cache.
type env struct {
	t      *testing.T
	db     *store.DB
	links  *links.Service
	cache  *linkcache.Cache[*links.Target]
	r      *Redirector
	ws     string
	domain string
}

func newEnv(t *testing.T, db *store.DB) *env {
	t.Helper()
	e := &env{t: t, db: db, domain: strings.ToLower(store.NewID("r")[18:]) + ".sb.test"}
	var err error
	e.links, err = links.New(db, events.NewOutbox(db, events.Builtin()), links.Config{ShortBaseURL: "https://" + e.domain})
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Workspaces.Create(context.Background(), "Redirects")
	if err != nil {
		t.Fatal(err)
	}
	e.ws = w.ID
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := clicks.New(db, clicks.Config{SpoolDir: t.TempDir(), Interval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	running, stop := context.WithCancel(context.Background())
	drained := make(chan error, 1)
	go func() { drained <- rec.Run(running) }()
	t.Cleanup(func() { stop(); <-drained })
	e.cache = linkcache.New(e.links.Resolve, db.LinkChanges, linkcache.Config{})
	cacheCtx, stopCache := context.WithCancel(context.Background())
	t.Cleanup(stopCache)
	go func() { _ = e.cache.Run(cacheCtx) }()
	// Run empties the cache once it hears changes: a test that counts entries starts after that.
	await.Until(t, "the link cache to hear changes", e.cache.Trusted, func(ok bool) bool { return ok })
	if e.r, err = New(e.links, rec, e.cache, quiet); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) link(in gen.LinkCreate) links.Link {
	e.t.Helper()
	l, err := e.links.Create(context.Background(), e.ws, links.NewLinkOf(in))
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) visit(slug string, change ...func(*Visit)) Decision {
	v := Visit{Host: e.domain, Slug: slug, RequestURI: "/" + slug, UserAgent: firefox, IP: "203.0.113.7", At: time.Now()}
	for _, c := range change {
		c(&v)
	}
	return e.r.Decide(context.Background(), v)
}

func (e *env) clicks(linkID string) int {
	n, err := e.db.Bun().NewSelect().Table("clicks").Where("link_id = ?", linkID).Count(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(n)
}

func databases(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.Postgres(t)) })
}

func ptr[T any](v T) *T { return &v }

// A path segment that is no slug is not found without a lookup; an unknown slug is looked up once and remembered.
func TestInvalidSlugsAreNotLookedUp(t *testing.T) {
	databases(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		for _, slug := range []string{"-x", "_x", "a.b", "a/b", strings.Repeat("z", 64), "a+b", "a++"} {
			if d := e.visit(slug); d.Outcome != NotFound {
				t.Errorf("%q: %+v", slug, d)
			}
		}
		if n := e.cache.Len(); n != 0 {
			t.Fatalf("%d cache entries after segments that are no slugs", n)
		}
		for range 3 {
			if d := e.visit("unknown-slug"); d.Outcome != NotFound {
				t.Fatalf("unknown slug: %+v", d)
			}
		}
		if n := e.cache.Len(); n != 1 {
			t.Fatalf("%d cache entries after an unknown slug, want its negative entry", n)
		}
	})
}

// A visit is redirected with the link's status and the visitor's query forwarded, and counted once; the preview
// shows where it goes and counts nothing; a client following one of our redirects back here is redirected again
// without a click.
func TestVisitsPreviewsAndHops(t *testing.T) {
	databases(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.link(gen.LinkCreate{DestinationUrl: "https://example.com/end", Slug: ptr("hop-b"), RedirectType: ptr(gen.RedirectType(301))})
		// Another name of this server (links to the short domain itself are refused): it answers as the short domain.
		alias := "alias-" + e.domain
		a := e.link(gen.LinkCreate{DestinationUrl: "https://" + alias + "/hop-b", Slug: ptr("hop-a"), ForwardQuery: ptr(true)})

		d := e.visit("hop-a", func(v *Visit) { v.RawQuery = "ref=mail" })
		if d.Outcome != Redirect || d.Status != 302 || d.Location != "https://"+alias+"/hop-b?ref=mail" {
			t.Fatalf("visit: %+v", d)
		}
		d = e.visit("hop-b", func(v *Visit) { v.Host, v.RequestURI = alias, "/hop-b?ref=mail" }) // the client follows our Location
		if d.Outcome != Redirect || d.Status != 301 || d.Location != "https://example.com/end" {
			t.Fatalf("followed hop: %+v", d)
		}
		if d := e.visit("hop-a+"); d.Outcome != Preview || d.Preview.Destination != "https://"+alias+"/hop-b" || !d.Preview.Active {
			t.Fatalf("preview: %+v", d)
		}
		await.Equal(t, "the visit's click", func() int { return e.clicks(a.ID) }, 1)
		if n := e.clicks(b.ID); n != 0 {
			t.Errorf("the followed hop counted %d clicks", n)
		}
		if d := e.visit("hop-b", func(v *Visit) { v.IP = "198.51.100.9" }); d.Outcome != Redirect {
			t.Fatalf("a visit of its own: %+v", d)
		}
		await.Equal(t, "a visit of its own counted", func() int { return e.clicks(b.ID) }, 1)
	})
}

// Only people spend max_clicks: a bot is redirected and the cap stays; the human past the cap gets the expired
// answer with the link's expired_url; an expired link answers so, and its preview says it is no longer active.
func TestCapsAndExpiry(t *testing.T) {
	databases(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.link(gen.LinkCreate{DestinationUrl: "https://example.com/sale", Slug: ptr("capped"), MaxClicks: ptr(int64(1)),
			ExpiredUrl: ptr("https://example.com/sold-out")})
		if d := e.visit("capped", func(v *Visit) { v.UserAgent = "curl/8.5.0" }); d.Outcome != Redirect {
			t.Fatalf("a program's visit: %+v", d)
		}
		if d := e.visit("capped"); d.Outcome != Redirect {
			t.Fatalf("the first person: %+v", d)
		}
		if d := e.visit("capped", func(v *Visit) { v.IP = "198.51.100.2" }); d.Outcome != Expired || d.Location != "https://example.com/sold-out" {
			t.Fatalf("the second person: %+v", d)
		}
		e.link(gen.LinkCreate{DestinationUrl: "https://example.com/old", Slug: ptr("gone"), ExpiresAt: ptr(time.Now().Add(time.Second))})
		d := e.visit("gone", func(v *Visit) { v.At = time.Now().Add(2 * time.Second) })
		if d.Outcome != Expired || d.Location != "" {
			t.Fatalf("after expires_at: %+v", d)
		}
		if d := e.visit("gone+", func(v *Visit) { v.At = time.Now().Add(2 * time.Second) }); d.Outcome != Preview || d.Preview.Active {
			t.Fatalf("preview of an expired link: %+v", d)
		}
	})
}
