package links

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/problem/problemtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

// fixture is a service over a database, with a short domain and a workspace of its own: slugs are global per domain,
// and the PostgreSQL database is shared by the tests of the binary.
type fixture struct {
	t      *testing.T
	db     *store.DB
	s      *Service
	ws     string
	domain string
	drawn  int
	// published are the short URLs LinkChanges published in this process since the fixture was made.
	mu        sync.Mutex
	published []store.LinkKey
}

func newFixture(t *testing.T, db *store.DB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{t: t, db: db, domain: strings.ToLower(store.NewID("t")[18:]) + ".sb.test"}
	cfg.ShortBaseURL = "https://" + f.domain
	var err error
	if f.s, err = New(db, events.NewOutbox(db, events.Builtin()), cfg); err != nil {
		t.Fatal(err)
	}
	w, err := db.Workspaces.Create(ctx, "Links "+f.domain)
	if err != nil {
		t.Fatal(err)
	}
	f.ws = w.ID
	db.LinkChanges.Subscribe(func(k store.LinkKey) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if k.Domain == f.domain {
			f.published = append(f.published, k)
		}
	})
	return f
}

// draw makes the service draw these slugs, in order, the last one for ever after.
func (f *fixture) draw(slugs ...string) {
	f.drawn = 0
	f.s.drawSlug = func() string {
		slug := slugs[min(f.drawn, len(slugs)-1)]
		f.drawn++
		return slug
	}
}

func (f *fixture) create(in NewLink) Link {
	f.t.Helper()
	l, err := f.s.Create(ctx, f.ws, in)
	if err != nil {
		f.t.Fatalf("create %+v: %v", in, err)
	}
	return l
}

// events returns the data of the workspace's events of a type, oldest first.
func (f *fixture) events(eventType string) []json.RawMessage {
	f.t.Helper()
	var evs []store.Event
	if err := f.db.Bun().NewSelect().Model(&evs).Where("workspace_id = ? AND type = ?", f.ws, eventType).
		Order("id").Scan(ctx); err != nil {
		f.t.Fatal(err)
	}
	out := make([]json.RawMessage, len(evs))
	for i, ev := range evs {
		out[i] = ev.Data
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// A generated slug that collides is drawn again; when every draw collides the create fails with slug_taken. In a
// bulk create the redraw concerns only the items that collided, and two items of one call that drew the same slug
// are a collision too.
func TestGeneratedSlugRedraw(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{})
		f.create(NewLink{DestinationURL: "https://example.com", Slug: ptr("taken7")})

		f.draw("taken7", "TAKEN7", "fresh7")
		if l := f.create(NewLink{DestinationURL: "https://example.com/a"}); l.Slug != "fresh7" || f.drawn != 3 {
			t.Errorf("after two collisions: slug %q after %d draws, want fresh7 after 3", l.Slug, f.drawn)
		}

		f.draw("taken7")
		_, err := f.s.Create(ctx, f.ws, NewLink{DestinationURL: "https://example.com/b"})
		problemtest.Want(t, err, problem.SlugTaken)
		if f.drawn != maxSlugAttempts {
			t.Errorf("%d draws, want maxSlugAttempts (%d)", f.drawn, maxSlugAttempts)
		}

		f.draw("bulk7", "bulk7", "fresh7", "bulk8")
		out := f.s.CreateMany(ctx, f.ws, []NewLink{{DestinationURL: "https://example.com/c"}, {DestinationURL: "https://example.com/d"}})
		if out[0].Err != nil || out[1].Err != nil || out[0].Link.Slug != "bulk7" || out[1].Link.Slug != "bulk8" {
			t.Errorf("bulk outcomes %+v", out)
		}
	})
}

// Metadata is refused beyond 8 KiB of JSON or 5 levels of nesting, on create and on update alike.
func TestMetadataLimits(t *testing.T) {
	s, err := New(nil, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	nest := func(levels int) map[string]any {
		m := map[string]any{"leaf": 1}
		for range levels - 1 {
			m = map[string]any{"n": m}
		}
		return m
	}
	// {"s":"…"} is 8 bytes of JSON around the string.
	sized := func(n int) map[string]any { return map[string]any{"s": strings.Repeat("x", n-8)} }
	for _, tc := range []struct {
		name     string
		metadata map[string]any
		detail   string
	}{
		{"flat", map[string]any{"owner": "growth"}, ""},
		{"5 levels", nest(5), ""},
		{"6 levels", nest(6), "nests deeper than 5 levels"},
		{"arrays nest too", map[string]any{"a": []any{[]any{[]any{[]any{[]any{1}}}}}}, "nests deeper than 5 levels"},
		{"8 KiB", sized(8 << 10), ""},
		{"8 KiB and a byte", sized(8<<10 + 1), "is 8193 bytes as JSON; the limit is 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, createErr := s.newLink("ws", NewLink{DestinationURL: "https://example.com", Metadata: tc.metadata}, time.Now())
			_, updateErr := s.patcher(Update{Metadata: &tc.metadata})
			for _, err := range []error{createErr, updateErr} {
				if tc.detail == "" {
					if err != nil {
						t.Errorf("refused: %v", err)
					}
					continue
				}
				p := problemtest.Want(t, err, problem.ValidationFailed, "/metadata")
				if !strings.Contains(p.Fields[0].Detail, tc.detail) {
					t.Errorf("detail %q, want %q", p.Fields[0].Detail, tc.detail)
				}
			}
		})
	}
}

// UTM members become the link's utm_* query parameters (empty ones left out) and come back as the API's UTM.
func TestUTMMapping(t *testing.T) {
	u := &UTM{Source: ptr("newsletter"), Medium: ptr(""), Campaign: ptr("bf 26"), Content: ptr("top")}
	params := u.params()
	want := map[string]string{"utm_source": "newsletter", "utm_campaign": "bf 26", "utm_content": "top"}
	if len(params) != len(want) {
		t.Fatalf("params %v, want %v", params, want)
	}
	for k, v := range want {
		if params[k] != v {
			t.Errorf("params[%s] = %q, want %q", k, params[k], v)
		}
	}
	if p := (*UTM)(nil).params(); p == nil || len(p) != 0 {
		t.Errorf("no UTM: %v, want an empty map", p)
	}
	s, err := New(nil, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := s.API(Link{UTM: params}).Utm
	if got.Source == nil || *got.Source != "newsletter" || got.Campaign == nil || *got.Campaign != "bf 26" ||
		got.Content == nil || *got.Content != "top" || got.Medium != nil || got.Term != nil {
		t.Errorf("API UTM %+v", got)
	}
}

// An update changes what it names and nothing else: a nil member or a zero patch.Field leaves a field alone,
// patch.Clear clears it, patch.Set and pointers set it. link.updated names the fields that changed; an update that
// changes nothing writes nothing and emits nothing. Lifting a limit lets its event fire again.
func TestUpdatePatchSemantics(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{})
		expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
		l := f.create(NewLink{DestinationURL: "https://example.com/a", Title: ptr("T"), ExternalID: ptr("crm-" + f.domain),
			ExpiredURL: ptr("https://example.com/over"), MaxClicks: ptr(int64(3)), ExpiresAt: &expires,
			Tags: []string{"x"}, UTM: &UTM{Source: ptr("nl")}, Metadata: map[string]any{"k": "v"}})
		update := func(in Update) Link {
			t.Helper()
			out, err := f.s.Update(ctx, f.ws, l.ID, in)
			if err != nil {
				t.Fatalf("update %+v: %v", in, err)
			}
			return out
		}
		changed := func() []string {
			t.Helper()
			evs := f.events("link.updated")
			if len(evs) == 0 {
				return nil
			}
			var ev gen.LinkUpdatedEvent
			if err := json.Unmarshal(evs[len(evs)-1], &ev); err != nil {
				t.Fatal(err)
			}
			return ev.Changed
		}

		if got := update(Update{}); !got.UpdatedAt.Equal(l.UpdatedAt) || len(f.events("link.updated")) != 0 {
			t.Fatalf("an empty update wrote: %+v, %d events", got, len(f.events("link.updated")))
		}
		if got := update(Update{Title: patch.Set("T"), Archived: ptr(false)}); len(f.events("link.updated")) != 0 {
			t.Fatalf("an update to the same values wrote: %+v", got)
		}

		got := update(Update{Title: patch.Clear[string](), MaxClicks: patch.Set(int64(7))})
		if got.Title != nil || got.MaxClicks == nil || *got.MaxClicks != 7 || got.ExternalID == nil ||
			got.ExpiredURL == nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) ||
			!slices.Equal(got.Tags, []string{"x"}) || got.UTM["utm_source"] != "nl" || got.Metadata["k"] != "v" {
			t.Errorf("after clearing the title and setting max_clicks: %+v", got)
		}
		if c := changed(); !slices.Equal(c, []string{"title", "max_clicks"}) {
			t.Errorf("changed %v", c)
		}

		got = update(Update{ExpiredURL: patch.Clear[string](), Tags: &[]string{}, UTM: &UTM{}})
		if got.ExpiredURL != nil || len(got.Tags) != 0 || len(got.UTM) != 0 || got.Title != nil {
			t.Errorf("after clearing expired_url, tags and utm: %+v", got)
		}
		if c := changed(); !slices.Equal(c, []string{"tags", "utm", "expired_url"}) {
			t.Errorf("changed %v", c)
		}

		got = update(Update{ExpiresAt: patch.Set(time.Now().Add(-time.Minute))})
		if got.Status(time.Now()) != StatusExpired {
			t.Errorf("an update may expire a link at once: status %s", got.Status(time.Now()))
		}

		if _, err := db.Bun().NewUpdate().Table("links").Set("expired_event_at = ?, max_clicks_event_at = ?, admitted_clicks = 7",
			time.Now().UTC(), time.Now().UTC()).Where("id = ?", l.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		update(Update{MaxClicks: patch.Set(int64(8)), ExpiresAt: patch.Clear[time.Time]()})
		st, err := db.Links.Get(ctx, f.ws, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.ExpiredEventAt != nil || st.MaxClicksEventAt != nil || st.AdmittedClicks != 7 {
			t.Errorf("limits lifted, events not re-armed: %+v", st)
		}

		_, err = f.s.Update(ctx, f.ws, l.ID, Update{DestinationURL: ptr("javascript:alert(1)"), Slug: ptr("docs")})
		problemtest.Want(t, err, problem.ValidationFailed, "/slug", "/destination_url")
		_, err = f.s.Update(ctx, f.ws, "lnk_missing", Update{Title: patch.Set("x")})
		problemtest.Want(t, err, problem.NotFound)
	})
}

// A database failure while a chunk is stored fails the items of that chunk, and only those, with internal_error;
// nothing of the failed chunk is created, announced or emitted, and items refused before (by validation) keep their
// own problem.
func TestBulkChunkFailure(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{})
		poison := "https://example.com/poison-" + strings.ToLower(store.NewID("p"))
		storetest.FailInserts(t, db, "links", "destination_url", poison)
		ins := make([]NewLink, BulkChunk+5)
		for i := range ins {
			ins[i].DestinationURL = fmt.Sprintf("https://example.com/c/%d", i)
		}
		ins[BulkChunk].DestinationURL = "ftp://example.com/refused" // invalid: never in a chunk
		ins[BulkChunk+3].DestinationURL = poison                    // fails the second chunk: the last 4 valid items
		out := f.s.CreateMany(ctx, f.ws, ins)
		for i, o := range out {
			switch {
			case i < BulkChunk:
				if o.Err != nil || o.Link.ID == "" {
					t.Errorf("item %d of the stored chunk: %+v", i, o)
				}
			case i == BulkChunk:
				problemtest.Want(t, o.Err, problem.ValidationFailed, "/destination_url")
			default:
				if o.Err == nil || o.Err.Code != problem.InternalError || o.Link.ID != "" || strings.Contains(o.Err.Detail, "injected") {
					t.Errorf("item %d of the failed chunk: %+v", i, o)
				}
			}
		}
		if n := len(f.events("link.created")); n != BulkChunk {
			t.Errorf("%d link.created events, want %d", n, BulkChunk)
		}
		f.mu.Lock()
		published := len(f.published)
		f.mu.Unlock()
		if published != BulkChunk {
			t.Errorf("%d short URLs published, want %d", published, BulkChunk)
		}
	})
}

// Only people spend max_clicks: of human visits exactly the cap is admitted, and the admission that reaches it
// emits link.max_clicks_reached once; afterwards the target refuses without asking the database. A target whose
// link lost its cap meanwhile reports the change.
func TestAdmit(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{})
		l := f.create(NewLink{DestinationURL: "https://example.com/prize", MaxClicks: ptr(int64(2))})
		tg, found, err := f.s.Resolve(ctx, f.s.Key(f.domain, strings.ToUpper(l.Slug)))
		if err != nil || !found || !tg.Capped() || tg.ID() != l.ID {
			t.Fatalf("resolve: %+v %v %v", tg, found, err)
		}
		var answers []Admission
		for _, class := range []string{store.ClickBot, store.ClickHuman, store.ClickHead, store.ClickHuman, store.ClickHuman, store.ClickBot} {
			a, err := f.s.Admit(ctx, tg, class)
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, a)
		}
		if want := []Admission{Admitted, Admitted, Admitted, Admitted, Refused, Refused}; !slices.Equal(answers, want) {
			t.Errorf("admissions %v, want %v", answers, want)
		}
		if !tg.Expired(time.Now()) || tg.Preview(time.Now()).Active {
			t.Error("a target whose cap was found reached is not expired")
		}
		if evs := f.events("link.max_clicks_reached"); len(evs) != 1 {
			t.Errorf("%d link.max_clicks_reached events, want 1", len(evs))
		}

		other := f.create(NewLink{DestinationURL: "https://example.com/other", MaxClicks: ptr(int64(5))})
		tg, _, err = f.s.Resolve(ctx, f.s.Key(other.Domain, other.Slug))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Update(ctx, f.ws, other.ID, Update{MaxClicks: patch.Clear[int64]()}); err != nil {
			t.Fatal(err)
		}
		if a, err := f.s.Admit(ctx, tg, store.ClickHuman); err != nil || a != Changed {
			t.Errorf("admission after the cap was lifted: %v %v, want Changed", a, err)
		}
	})
}

// Run emits link.expired once per link whose expires_at passed, and returns when its context ends.
func TestRunAnnouncesExpiries(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{ExpiryCheck: 10 * time.Millisecond})
		l := f.create(NewLink{DestinationURL: "https://example.com/a"})
		if _, err := f.s.Update(ctx, f.ws, l.ID, Update{ExpiresAt: patch.Set(time.Now().Add(-time.Second))}); err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.s.Run(runCtx) }()
		await.Equal(t, "link.expired of the first link", func() int { return len(f.events("link.expired")) }, 1)
		// A second link expiring later proves that the announcer kept checking after the first announcement: once
		// its event is there, a repeat of the first would have been written too.
		later := f.create(NewLink{DestinationURL: "https://example.com/b"})
		if _, err := f.s.Update(ctx, f.ws, later.ID, Update{ExpiresAt: patch.Set(time.Now().Add(-time.Second))}); err != nil {
			t.Fatal(err)
		}
		await.Equal(t, "link.expired of the second link", func() int { return len(f.events("link.expired")) }, 2)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs := f.events("link.expired")
		var first, second gen.LinkExpiredEvent
		if len(evs) != 2 || json.Unmarshal(evs[0], &first) != nil || json.Unmarshal(evs[1], &second) != nil ||
			first.Link.Id != l.ID || first.Link.Status != "expired" || second.Link.Id != later.ID {
			t.Fatalf("link.expired events %s, want one for each link", evs)
		}
	})
}

// A redirect's host names its short domain: a configured one answers as itself (whatever its case or a trailing
// dot), any other host as the default short domain. Slugs compare case-insensitively.
func TestKey(t *testing.T) {
	s, err := New(nil, nil, Config{ShortBaseURL: "https://sb.example", Domains: []string{"Go.Example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, domain := range map[string]string{
		"sb.example": "sb.example", "go.example.org": "go.example.org", "GO.example.org.": "go.example.org",
		"app.example": "sb.example", "127.0.0.1:8080": "sb.example",
	} {
		if k := s.Key(host, "Promo"); k != (store.LinkKey{Domain: domain, SlugKey: "promo"}) {
			t.Errorf("Key(%q) = %+v, want domain %s", host, k, domain)
		}
	}
}

// A statistics request is refused before any read when its zone, period or number of buckets is wrong, naming
// the parameter.
func TestStatsQueryProblems(t *testing.T) {
	s, err := New(nil, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name      string
		q         StatsQuery
		parameter string
	}{
		{"unknown zone", StatsQuery{TimeZone: ptr("Mars/Olympus")}, "tz"},
		{"the server's zone", StatsQuery{TimeZone: ptr("Local")}, "tz"},
		{"to before from", StatsQuery{Period: Period{From: ptr(now), To: ptr(now.Add(-time.Hour))}}, "to"},
		{"too many buckets", StatsQuery{Period: Period{From: ptr(now.Add(-90 * 24 * time.Hour))}, Interval: Hour}, "interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Stats(ctx, "ws", "lnk_x", tc.q)
			problemtest.Want(t, err, problem.ValidationFailed, tc.parameter)
		})
	}
}

// Browse lists what List lists, with the same filters and pages, and records no link.listed even while an endpoint
// of the workspace subscribes to it (the event names the API key that listed).
func TestBrowseIsListWithoutTheAudit(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, Config{})
		if _, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: f.ws, URL: "https://hooks.example.com/",
			Events: []string{"link.listed"}, SealSecret: func(string) string { return "sealed" }}); err != nil {
			t.Fatal(err)
		}
		a := f.create(NewLink{DestinationURL: "https://example.com/a", Tags: []string{"spring"}})
		f.create(NewLink{DestinationURL: "https://example.com/b"})
		c := f.create(NewLink{DestinationURL: "https://example.com/c", Tags: []string{"spring"}})
		q := ListQuery{Tag: ptr("spring"), Page: store.Page{Limit: 1}}
		first, more, err := f.s.Browse(ctx, f.ws, q)
		if err != nil || !more || len(first) != 1 || first[0].ID != c.ID {
			t.Fatalf("first page %v (more %v, err %v), want %s and more", first, more, err, c.ID)
		}
		q.Page.Before = first[0].ID
		second, more, err := f.s.Browse(ctx, f.ws, q)
		if err != nil || more || len(second) != 1 || second[0].ID != a.ID {
			t.Fatalf("second page %v (more %v, err %v), want %s and no more", second, more, err, a.ID)
		}
		if n := len(f.events("link.listed")); n != 0 {
			t.Fatalf("Browse recorded %d link.listed events", n)
		}
		listed, _, err := f.s.List(ctx, f.ws, "key_01JDA9M3N4P5Q6R7S8T9V0W1X2", q)
		if err != nil || len(listed) != 1 || listed[0].ID != a.ID {
			t.Fatalf("List %v, %v", listed, err)
		}
		if n := len(f.events("link.listed")); n != 1 {
			t.Fatalf("List recorded %d link.listed events, want 1", n)
		}
	})
}

// Domains names the default short domain first, then the further ones in order, lower-case.
func TestDomains(t *testing.T) {
	s, err := New(nil, nil, Config{ShortBaseURL: "https://sb.example", Domains: []string{"Go.Example", "a.example", " "}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Domains(); !slices.Equal(got, []string{"sb.example", "a.example", "go.example"}) {
		t.Fatalf("Domains() = %v", got)
	}
}
