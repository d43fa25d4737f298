package clicks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

const firefox = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.6; rv:133.0) Gecko/20100101 Firefox/133.0"

// testLink inserts a workspace and a link directly.
func testLink(t *testing.T, db *store.DB) store.Link {
	t.Helper()
	ws, err := db.Workspaces.Create(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := store.NewID("lnk")
	l := store.Link{ID: id, WorkspaceID: ws.ID, Domain: "sb.test", Slug: "c" + id[22:], SlugKey: "c" + id[22:],
		DestinationURL: "https://example.com/", Tags: []string{}, UTM: map[string]string{}, RedirectType: 302,
		ForwardQuery: true, Metadata: map[string]any{}, CreatedAt: now, UpdatedAt: now}
	l.SlugKey = store.SlugKey(l.Slug)
	if _, err := db.Bun().NewInsert().Model(&l).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// running is a Recorder whose Run runs until stop (or the end of the test).
type running struct {
	*Recorder
	// stop ends Run and returns its error (nil after the first call).
	stop func() error
}

func newRecorder(t *testing.T, db *store.DB, cfg Config) running {
	t.Helper()
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	var once sync.Once
	stop := func() (err error) {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return running{r, stop}
}

func hit(linkID, ua, ip string) Hit {
	now := time.Now()
	return Hit{ID: NewHitID(now), At: now, LinkID: linkID, UserAgent: ua, IP: ip, Referer: "https://News.Example/item?id=1"}
}

func clickCount(t *testing.T, db *store.DB, linkID string) int {
	t.Helper()
	n, err := db.Bun().NewSelect().Table("clicks").Where("link_id = ?", linkID).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// Clicks reach the database enriched: class, families, referrer host, network, country, and a visitor hash for
// humans only.
func TestRecorderWritesEnrichedClicks(t *testing.T) {
	geo := writeGeoIP(t)
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		r := newRecorder(t, db, Config{GeoIP: geo})
		human, bot := hit(l.ID, firefox, "203.0.113.9"), hit(l.ID, "curl/8.5.0", "2001:db8:1:2::7")
		head := hit(l.ID, firefox, "::ffff:198.51.100.7")
		head.Head = true
		for _, h := range []Hit{human, bot, head} {
			if err := r.Record(h); err != nil {
				t.Fatal(err)
			}
		}
		await.Equal(t, "three clicks", func() int { return clickCount(t, db, l.ID) }, 3)
		var got []store.Click
		if err := db.Bun().NewSelect().Model(&got).Where("link_id = ?", l.ID).Order("id").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		byID := map[string]store.Click{}
		for _, c := range got {
			byID[c.ID] = c
		}
		c := byID["clk_"+human.ID.String()]
		if c.Class != store.ClickHuman || c.Device != DeviceDesktop || c.OS != "macOS" || c.Browser != "Firefox" ||
			c.UserAgent != firefox || deref(c.ReferrerHost) != "news.example" || deref(c.IPPrefix) != "203.0.113.0/24" ||
			deref(c.Country) != "DE" || len(deref(c.VisitorHash)) != 64 || !c.ClickedAt.Equal(human.At.UTC().Truncate(time.Microsecond)) {
			t.Errorf("human click %+v", c)
		}
		c = byID["clk_"+bot.ID.String()]
		if c.Class != store.ClickBot || c.Device != DeviceBot || c.Browser != "curl" || deref(c.IPPrefix) != "2001:db8:1::/48" ||
			deref(c.Country) != "FR" || c.VisitorHash != nil {
			t.Errorf("bot click %+v", c)
		}
		c = byID["clk_"+head.ID.String()]
		if c.Class != store.ClickHead || c.Device != DeviceBot || deref(c.IPPrefix) != "198.51.100.0/24" || c.Country != nil {
			t.Errorf("HEAD click %+v", c)
		}
		// The metric counts a batch once its transaction has returned, a moment after its rows became visible.
		await.Equal(t, "persisted metric", func() float64 { return testutil.ToFloat64(r.m.persisted) }, 3)
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// writeGeoIP builds a tiny MaxMind database: 203.0.113.0/24 in Germany, 2001:db8::/32 registered in France.
func writeGeoIP(t *testing.T) *GeoIP {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-Country", IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range map[string]mmdbtype.Map{
		"203.0.113.0/24": {"country": mmdbtype.Map{"iso_code": mmdbtype.String("DE")}},
		"2001:db8::/32":  {"registered_country": mmdbtype.Map{"iso_code": mmdbtype.String("FR")}},
	} {
		_, network, _ := net.ParseCIDR(cidr)
		if err := tree.Insert(network, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "country.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	geo, err := OpenGeoIP(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = geo.Close() })
	return geo
}

func TestGeoIPCountries(t *testing.T) {
	geo := writeGeoIP(t)
	for ip, want := range map[string]string{"203.0.113.200": "DE", "2001:db8:ffff::1": "FR", "192.0.2.1": "", "::1": ""} {
		a, _ := parseIP(ip)
		if got := geo.Country(a); got != want {
			t.Errorf("Country(%s) = %q, want %q", ip, got, want)
		}
	}
	if got := (*GeoIP)(nil).Country(mustAddr("203.0.113.1")); got != "" {
		t.Errorf("no database answered %q", got)
	}
}

// breakClicks makes every click batch fail (the clicks table is renamed away) until the returned function repairs it.
func breakClicks(t *testing.T, db *store.DB) func() {
	t.Helper()
	if _, err := db.Bun().ExecContext(ctx, "ALTER TABLE clicks RENAME TO clicks_away"); err != nil {
		t.Fatal(err)
	}
	repaired := false
	repair := func() {
		if !repaired {
			repaired = true
			if _, err := db.Bun().ExecContext(ctx, "ALTER TABLE clicks_away RENAME TO clicks"); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(repair)
	return repair
}

// While the database fails, clicks go to the spool; when it is back they are replayed, each once.
func TestRecorderSpoolsDuringAnOutageAndReplays(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		repair := breakClicks(t, db)
		r := newRecorder(t, db, Config{BatchSize: 10})
		for range 25 {
			if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
				t.Fatal(err)
			}
		}
		await.Equal(t, "the clicks to be spooled", func() float64 { return testutil.ToFloat64(r.m.spooled) }, 25)
		if r.spool.bytes() == 0 {
			t.Fatal("nothing on disk")
		}
		repair()
		await.Equal(t, "the spool to be replayed", func() int { return clickCount(t, db, l.ID) }, 25)
		await.Equal(t, "the spool to be emptied", r.spool.bytes, 0)
		await.Equal(t, "the replayed metric", func() float64 { return testutil.ToFloat64(r.m.replayed) }, 25)
		if got := testutil.ToFloat64(r.m.dropped); got != 0 {
			t.Errorf("dropped = %v", got)
		}
		wantLinkClicks(t, db, l.ID, 25)
	})
}

// wantLinkClicks checks the link's counter and the rollups against the click rows.
func wantLinkClicks(t *testing.T, db *store.DB, linkID string, humans int64) {
	t.Helper()
	var sum struct {
		Humans int64 `bun:"humans"`
	}
	if err := db.Bun().NewSelect().Table("click_rollups").ColumnExpr("coalesce(sum(humans), 0) AS humans").
		Where("link_id = ?", linkID).Scan(ctx, &sum); err != nil {
		t.Fatal(err)
	}
	var l store.Link
	if err := db.Bun().NewSelect().Model(&l).Where("id = ?", linkID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if sum.Humans != humans || l.Clicks != humans {
		t.Errorf("rollups count %d humans, links.clicks %d; want %d", sum.Humans, l.Clicks, humans)
	}
}

// A spool holding the same clicks twice (a replay that crashed before removing its segment, then copied) and left
// by an earlier run is replayed at start, and every click counts once.
func TestRecorderReplaysALeftoverSpoolIdempotently(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		dir := t.TempDir()
		hits := visitorHits(l.ID, 30)
		writeSegments(t, dir, hits, hits)
		r := newRecorder(t, db, Config{SpoolDir: dir, BatchSize: 7})
		wantReplayedOnce(t, db, r.Recorder, l.ID, 30, 30)
		var uniques int64
		if err := db.Bun().NewSelect().Table("click_rollups").ColumnExpr("coalesce(sum(unique_humans), 0)").
			Where("link_id = ?", l.ID).Scan(ctx, &uniques); err != nil || uniques != 30 {
			t.Errorf("unique humans %d (%v), want 30", uniques, err)
		}
	})
}

// A replay writes a batch as fresh clicks first; a batch holding a click twice (a spool append that was written but
// reported failed, then spooled again) is written again looking for stored clicks, and every click counts once.
func TestRecorderReplaysASegmentHoldingAClickTwice(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		dir := t.TempDir()
		hits := visitorHits(l.ID, 12)
		writeSegments(t, dir, append(hits, hits[3:5]...))
		r := newRecorder(t, db, Config{SpoolDir: dir, BatchSize: 100})
		wantReplayedOnce(t, db, r.Recorder, l.ID, 12, 2)
	})
}

// visitorHits is a hit of the link by each of n visitors.
func visitorHits(linkID string, n int) []Hit {
	hits := make([]Hit, n)
	for i := range hits {
		hits[i] = hit(linkID, firefox, fmt.Sprintf("203.0.113.%d", i))
	}
	return hits
}

// writeSegments leaves one sealed spool segment in dir per list of hits, as earlier runs would.
func writeSegments(t *testing.T, dir string, segments ...[]Hit) {
	t.Helper()
	for _, hits := range segments {
		sp, err := openSpool(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.append(hits); err != nil {
			t.Fatal(err)
		}
		sp.seal()
	}
}

// wantReplayedOnce waits for r to replay clicks distinct clicks of the link and repeated copies of them, and checks
// that each was stored and counted once.
func wantReplayedOnce(t *testing.T, db *store.DB, r *Recorder, linkID string, clicks int, repeated float64) {
	t.Helper()
	await.Equal(t, "the replay", func() float64 { return testutil.ToFloat64(r.m.replayed) }, float64(clicks)+repeated)
	if n := clickCount(t, db, linkID); n != clicks {
		t.Fatalf("%d click rows, want %d", n, clicks)
	}
	if got := testutil.ToFloat64(r.m.discarded.WithLabelValues("already_recorded")); got != repeated {
		t.Errorf("already_recorded = %v, want %v", got, repeated)
	}
	wantLinkClicks(t, db, linkID, int64(clicks))
}

// A damaged record costs the clicks in it, counted as dropped; the others are replayed.
func TestRecorderCountsDamagedSpoolRecordsAsDropped(t *testing.T) {
	db := storetest.SQLite(t)
	l := testLink(t, db)
	dir := t.TempDir()
	var buf []byte
	for range 3 {
		h := hit(l.ID, firefox, "203.0.113.1")
		buf = appendRecord(buf, &h)
	}
	buf[len(buf)-3] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "clicks-01JDAC4D5E6F7G8H9J0K1M2N3P.spool"), buf, 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRecorder(t, db, Config{SpoolDir: dir})
	await.Equal(t, "the replay", func() int { return clickCount(t, db, l.ID) }, 2)
	await.Equal(t, "the dropped count", func() float64 { return testutil.ToFloat64(r.m.dropped) }, 1)
}

// A stopped recorder writes what is buffered to the database; when the database fails, to the spool, which the next
// recorder replays.
func TestRecorderStopDrains(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		r := newRecorder(t, db, Config{Interval: time.Hour})
		for range 5 {
			if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if n := clickCount(t, db, l.ID); n != 5 {
			t.Fatalf("%d clicks after the drain, want 5", n)
		}
		if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != ErrClosed {
			t.Fatalf("Record after the drain = %v, want ErrClosed", err)
		}

		dir := t.TempDir()
		repair := breakClicks(t, db)
		r = newRecorder(t, db, Config{Interval: time.Hour, SpoolDir: dir})
		for range 4 {
			if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(r.m.spooled); got != 4 {
			t.Fatalf("spooled at shutdown = %v, want 4", got)
		}
		repair()
		newRecorder(t, db, Config{SpoolDir: dir})
		await.Equal(t, "the replay at start", func() int { return clickCount(t, db, l.ID) }, 9)
	})
}

// A stalled database (a transaction that waits on a lock) does not hold clicks in memory: past the high-water
// mark, or once the writer has waited half a second, the buffer goes to the spool.
func TestRecorderSpillsWhileTheDatabaseStalls(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		r := newRecorder(t, db, Config{HighWater: 5, BatchSize: 2})
		release := make(chan struct{})
		locked := make(chan struct{})
		go func() {
			_ = db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				if db.Dialect() == store.Postgres {
					if _, err := tx.ExecContext(ctx, "LOCK TABLE clicks IN ACCESS EXCLUSIVE MODE"); err != nil {
						t.Error(err)
					}
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		for range 20 {
			if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
				t.Fatal(err)
			}
		}
		await.Until(t, "a spill", func() float64 { return testutil.ToFloat64(r.m.spooled) }, func(n float64) bool { return n > 0 })
		close(release)
		await.Equal(t, "every click in the database", func() int { return clickCount(t, db, l.ID) }, 20)
		await.Equal(t, "the spool to be emptied", r.spool.bytes, 0)
	})
}

// Clicks of a link deleted before they were written are counted as discarded, not stored and not lost.
func TestRecorderDiscardsClicksOfDeletedLinks(t *testing.T) {
	db := storetest.SQLite(t)
	l := testLink(t, db)
	r := newRecorder(t, db, Config{})
	if err := r.Record(hit("lnk_01JDAC4D5E6F7G8H9J0K1M2N3P", firefox, "203.0.113.9")); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
		t.Fatal(err)
	}
	await.Equal(t, "the discard (link_deleted discards, rows)", func() [2]int {
		return [2]int{int(testutil.ToFloat64(r.m.discarded.WithLabelValues("link_deleted"))), clickCount(t, db, l.ID)}
	}, [2]int{1, 1})
}

// With the database and the spool both failing, memory holds four times the high-water mark, then Record refuses.
func TestRecorderRefusesWhenNothingCanTakeClicks(t *testing.T) {
	db := storetest.SQLite(t)
	l := testLink(t, db)
	breakClicks(t, db)
	dir := filepath.Join(t.TempDir(), "spool")
	r := newRecorder(t, db, Config{HighWater: 3, SpoolDir: dir})
	// The spool directory becomes a file: no segment can be created in it, whoever runs the test.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Clicks keep coming while the writer takes them and gives them back, failing both ways.
	await.Until(t, "a click refused", func() error { return r.Record(hit(l.ID, firefox, "203.0.113.9")) },
		func(err error) bool { return errors.Is(err, ErrOverloaded) })
	if n := r.inFlight(); n > 12 {
		t.Fatalf("%d clicks in memory, want at most 12", n)
	}
}

func mustAddr(s string) netip.Addr {
	a, _ := parseIP(s)
	return a
}

// Housekeeping purges the clicks of deleted links and old visitor salts.
func TestRecorderHousekeeping(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		r := newRecorder(t, db, Config{Housekeeping: 10 * time.Millisecond})
		if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
			t.Fatal(err)
		}
		await.Equal(t, "the click", func() int { return clickCount(t, db, l.ID) }, 1)
		if _, err := db.Bun().ExecContext(ctx, "INSERT INTO click_salts (day, salt) VALUES ('2020-01-01', 'aa')"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().NewDelete().Table("links").Where("id = ?", l.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().ExecContext(ctx, "INSERT INTO link_purges (link_id, deleted_at) VALUES (?, ?)", l.ID, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		count := func(q *bun.SelectQuery) int64 {
			n, err := q.Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		await.Equal(t, "the purge (rollups, clicks)", func() [2]int64 {
			return [2]int64{count(db.Bun().NewSelect().Table("click_rollups").Where("link_id = ?", l.ID)), int64(clickCount(t, db, l.ID))}
		}, [2]int64{0, 0})
		await.Equal(t, "the salt pruning", func() int64 {
			return count(db.Bun().NewSelect().Table("click_salts").Where("day = '2020-01-01'"))
		}, 0)
	})
}

// Clicks arriving faster than the writer writes go to the spool while it pauses, and reach the database from there.
func TestRecorderSpillsWhileBehind(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		l := testLink(t, db)
		r := newRecorder(t, db, Config{BatchSize: 2})
		for range 300 {
			if err := r.Record(hit(l.ID, firefox, "203.0.113.9")); err != nil {
				t.Fatal(err)
			}
		}
		await.Equal(t, "every click in the database", func() int { return clickCount(t, db, l.ID) }, 300)
		await.Equal(t, "the spool to be emptied", func() int64 { _, b := r.Backlog(); return b }, 0)
		if testutil.ToFloat64(r.m.spooled) == 0 {
			t.Error("nothing was spooled although the writer was behind")
		}
		wantLinkClicks(t, db, l.ID, 300)
	})
}

// A segment written by WriteSegment (as an outage leaves one) is replayed link by link: every click of every link
// counted once, each visitor once, on both databases (PostgreSQL in two concurrent transactions).
func TestRecorderReplaysAWrittenSegmentLinkByLink(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		links := []store.Link{testLink(t, db), testLink(t, db), testLink(t, db)}
		dir := t.TempDir()
		var hits []Hit
		for i := range 90 {
			hits = append(hits, hit(links[i%3].ID, firefox, fmt.Sprintf("203.0.113.%d", i/3)))
		}
		if err := WriteSegment(dir, hits); err != nil {
			t.Fatal(err)
		}
		r := newRecorder(t, db, Config{SpoolDir: dir, BatchSize: 10})
		await.Equal(t, "the replay", func() float64 { return testutil.ToFloat64(r.m.replayed) }, 90)
		for _, l := range links {
			if n := clickCount(t, db, l.ID); n != 30 {
				t.Errorf("%s: %d click rows, want 30", l.ID, n)
			}
			wantLinkClicks(t, db, l.ID, 30)
			var uniques int64
			if err := db.Bun().NewSelect().Table("click_rollups").ColumnExpr("coalesce(sum(unique_humans), 0)").
				Where("link_id = ?", l.ID).Scan(ctx, &uniques); err != nil || uniques != 30 {
				t.Errorf("%s: unique humans %d (%v), want 30", l.ID, uniques, err)
			}
		}
		if _, spooled := r.Backlog(); spooled != 0 {
			t.Errorf("%d bytes still spooled", spooled)
		}
	})
}
