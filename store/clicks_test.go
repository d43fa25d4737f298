package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func strp(s string) *string { return &s }

// testClick is a click of a link at t; class human gets a visitor hash.
func testClick(linkID string, t time.Time, class, visitor string) store.Click {
	c := store.Click{ID: store.NewID("clk"), LinkID: linkID, ClickedAt: t.UTC().Truncate(time.Microsecond), Class: class,
		Device: "desktop", OS: "macOS", Browser: "Firefox", UserAgent: "Mozilla/5.0 test", IPPrefix: strp("203.0.113.0/24")}
	if class == store.ClickHuman {
		c.VisitorHash = strp(visitor)
		c.Country = strp("DE")
		c.ReferrerHost = strp("news.example")
	} else {
		c.Device = "bot"
	}
	return c
}

type rollupRow struct {
	Bucket       time.Time `bun:"bucket"`
	Humans       int64     `bun:"humans"`
	Bots         int64     `bun:"bots"`
	UniqueHumans int64     `bun:"unique_humans"`
}

func rollupsOf(t *testing.T, db *store.DB, linkID string) []rollupRow {
	t.Helper()
	var rows []rollupRow
	if err := db.Bun().NewSelect().Table("click_rollups").Column("bucket", "humans", "bots", "unique_humans").
		Where("link_id = ?", linkID).Order("bucket").Scan(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].Bucket = rows[i].Bucket.UTC()
	}
	return rows
}

func dimensionsOf(t *testing.T, db *store.DB, linkID, dimension string) map[string][2]int64 {
	t.Helper()
	var rows []struct {
		Value  string `bun:"value"`
		Humans int64  `bun:"humans"`
		Bots   int64  `bun:"bots"`
	}
	if err := db.Bun().NewSelect().Table("click_dimension_rollups").ColumnExpr("value, sum(humans) AS humans, sum(bots) AS bots").
		Where("link_id = ? AND dimension = ?", linkID, dimension).Group("value").Scan(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, r := range rows {
		out[r.Value] = [2]int64{r.Humans, r.Bots}
	}
	return out
}

func countRows(t *testing.T, db *store.DB, table, where string, args ...any) int {
	t.Helper()
	n, err := db.Bun().NewSelect().Table(table).Where(where, args...).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestRecordCountsInsertedClicksOnce(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "record")
		l := seedLink(t, db, ws.ID, nil)
		hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
		batch := []store.Click{
			testClick(l.ID, hour.Add(5*time.Minute), store.ClickHuman, "v1"),
			testClick(l.ID, hour.Add(6*time.Minute), store.ClickHuman, "v1"), // same visitor, same day: not unique
			testClick(l.ID, hour.Add(7*time.Minute), store.ClickHuman, "v2"),
			testClick(l.ID, hour.Add(8*time.Minute), store.ClickBot, ""),
			testClick(l.ID, hour.Add(65*time.Minute), store.ClickHuman, "v3"),
			testClick(l.ID, hour.Add(66*time.Minute), store.ClickPreview, ""),
		}
		res, err := db.Clicks.Record(ctx, batch, store.RecordOptions{})
		if err != nil || res != (store.RecordResult{Inserted: 6}) {
			t.Fatalf("Record = %+v, %v", res, err)
		}
		// A replay of the same clicks (a spool read twice) and one new click of a known visitor.
		again := append(batch[:len(batch):len(batch)], testClick(l.ID, hour.Add(70*time.Minute), store.ClickHuman, "v1"))
		if _, err := db.Clicks.Record(ctx, again, store.RecordOptions{}); err == nil {
			t.Fatal("clicks already stored were accepted as new")
		}
		res, err = db.Clicks.Record(ctx, again, store.RecordOptions{MayRepeat: true})
		if err != nil || res != (store.RecordResult{Inserted: 1, Duplicates: 6}) {
			t.Fatalf("replay: Record = %+v, %v", res, err)
		}

		want := []rollupRow{
			{Bucket: hour, Humans: 3, Bots: 1, UniqueHumans: 2},
			{Bucket: hour.Add(time.Hour), Humans: 2, Bots: 1, UniqueHumans: 1},
		}
		got := rollupsOf(t, db, l.ID)
		if len(got) != len(want) {
			t.Fatalf("rollups %+v, want %+v", got, want)
		}
		for i := range want {
			if !got[i].Bucket.Equal(want[i].Bucket) || got[i].Humans != want[i].Humans || got[i].Bots != want[i].Bots ||
				got[i].UniqueHumans != want[i].UniqueHumans {
				t.Errorf("rollup %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if n := countRows(t, db, "clicks", "link_id = ?", l.ID); n != 7 {
			t.Errorf("%d click rows, want 7", n)
		}
		link := readLink(t, db, l.ID)
		if link.Clicks != 5 || link.BotClicks != 2 {
			t.Errorf("links.clicks %d, bot_clicks %d; want 5 and 2", link.Clicks, link.BotClicks)
		}
		wantTimePtr(t, "last_clicked_at", link.LastClickedAt, &again[len(again)-1].ClickedAt)

		if got := dimensionsOf(t, db, l.ID, store.DimensionCountries); got["DE"] != [2]int64{5, 0} || got["unknown"] != [2]int64{0, 2} {
			t.Errorf("countries %v", got)
		}
		if got := dimensionsOf(t, db, l.ID, store.DimensionReferrers); got["news.example"] != [2]int64{5, 0} || got["direct"] != [2]int64{0, 2} {
			t.Errorf("referrers %v", got)
		}
		if got := dimensionsOf(t, db, l.ID, store.DimensionDevices); got["desktop"] != [2]int64{5, 0} || got["bot"] != [2]int64{0, 2} {
			t.Errorf("devices %v", got)
		}
		for _, d := range []string{store.DimensionBrowsers, store.DimensionOperatingSystems} {
			var sum int64
			for _, v := range dimensionsOf(t, db, l.ID, d) {
				sum += v[0] + v[1]
			}
			if sum != 7 {
				t.Errorf("%s sum to %d clicks, want 7", d, sum)
			}
		}
	})
}

// The last click time only moves forward, also when an older click arrives later (a late spool replay).
func TestRecordKeepsTheLatestClickTime(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "latest")
		l := seedLink(t, db, ws.ID, nil)
		late := time.Now().UTC().Truncate(time.Microsecond)
		early := late.Add(-90 * time.Minute)
		if _, err := db.Clicks.Record(ctx, []store.Click{testClick(l.ID, late, store.ClickHuman, "a")}, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Clicks.Record(ctx, []store.Click{testClick(l.ID, early, store.ClickHuman, "b"),
			testClick(l.ID, late.Add(time.Second), store.ClickBot, "")}, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		wantTimePtr(t, "last_clicked_at", readLink(t, db, l.ID).LastClickedAt, &late)
	})
}

func TestRecordLeavesOutClicksOfDeletedLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "deleted")
		l := seedLink(t, db, ws.ID, nil)
		res, err := db.Clicks.Record(ctx, []store.Click{
			testClick(l.ID, time.Now(), store.ClickHuman, "a"),
			testClick("lnk_01JDAC4D5E6F7G8H9J0K1M2N3P", time.Now(), store.ClickHuman, "a"),
		}, store.RecordOptions{})
		if err != nil || res != (store.RecordResult{Inserted: 1, LinkDeleted: 1}) {
			t.Fatalf("Record = %+v, %v", res, err)
		}
		if n := countRows(t, db, "clicks", "link_id = ?", "lnk_01JDAC4D5E6F7G8H9J0K1M2N3P"); n != 0 {
			t.Errorf("%d clicks of a missing link stored", n)
		}
	})
}

// Recorded runs inside the batch's transaction with the clicks actually inserted (a repeat is left out) and their
// links; its error rolls the whole batch back.
func TestRecordRunsRecordedInTheTransaction(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "recorded")
		l := seedLink(t, db, ws.ID, nil)
		first := testClick(l.ID, time.Now(), store.ClickHuman, "x")
		if _, err := db.Clicks.Record(ctx, []store.Click{first}, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		batch := []store.Click{first, testClick(l.ID, time.Now(), store.ClickBot, "")}
		boom := errors.New("event could not be written")
		_, err := db.Clicks.Record(ctx, batch, store.RecordOptions{MayRepeat: true,
			Recorded: func(ctx context.Context, tx bun.Tx, inserted []store.Click, links map[string]store.ClickedLink) error {
				if len(inserted) != 1 || inserted[0].ID != batch[1].ID || inserted[0].WorkspaceID != ws.ID ||
					links[l.ID].WorkspaceID != ws.ID || links[l.ID].Domain != "sb.test" {
					t.Errorf("Recorded with %+v and %+v", inserted, links)
				}
				return boom
			}})
		if !errors.Is(err, boom) {
			t.Fatalf("Record = %v, want the error of Recorded", err)
		}
		if n := countRows(t, db, "clicks", "link_id = ?", l.ID); n != 1 {
			t.Errorf("%d clicks after a rolled-back batch, want the first one only", n)
		}
	})
}

func TestSaltsAreSharedAndPruned(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		today := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
		first, err := db.Clicks.Salt(ctx, "2026-11-22", today)
		if err != nil || len(first) != 32 {
			t.Fatalf("Salt = %x, %v", first, err)
		}
		again, err := db.Clicks.Salt(ctx, "2026-11-22", today)
		if err != nil || string(again) != string(first) {
			t.Fatalf("second Salt = %x, %v; want the first", again, err)
		}
		yesterday, err := db.Clicks.Salt(ctx, "2026-11-21", today)
		if err != nil || string(yesterday) == string(first) {
			t.Fatalf("yesterday's Salt = %x, %v", yesterday, err)
		}
		if _, err := db.Clicks.Salt(ctx, "2026-11-20", today); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Salt of a day past the retention = %v, want ErrNotFound", err)
		}

		ws := newWorkspace(t, db, "visitors")
		l := seedLink(t, db, ws.ID, nil)
		if _, err := db.Clicks.Record(ctx, []store.Click{testClick(l.ID, today.Add(-26*time.Hour), store.ClickHuman, "old"),
			testClick(l.ID, today, store.ClickHuman, "new")}, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Clicks.PruneVisitors(ctx, today.Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, db, "click_salts", "day = '2026-11-21'"); n != 0 {
			t.Error("a salt older than the retention survived the pruning")
		}
		if n := countRows(t, db, "click_salts", "day = '2026-11-22'"); n != 1 {
			t.Error("yesterday's salt was pruned")
		}
		if n := countRows(t, db, "click_visitors", "link_id = ?", l.ID); n != 1 {
			t.Errorf("%d visitors left, want today's", n)
		}
	})
}

func TestPurgeDeletedRemovesEverythingOfDeletedLinks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "purge")
		gone := seedLink(t, db, ws.ID, nil)
		kept := seedLink(t, db, ws.ID, nil)
		var batch []store.Click
		for i := range 25 {
			batch = append(batch, testClick(gone.ID, time.Now().Add(-time.Duration(i)*time.Hour), store.ClickHuman, "v"),
				testClick(kept.ID, time.Now(), store.ClickHuman, "w"))
		}
		if _, err := db.Clicks.Record(ctx, batch, store.RecordOptions{}); err != nil {
			t.Fatal(err)
		}
		deletedAt := time.Now().UTC().Truncate(time.Microsecond)
		if _, err := db.Bun().NewDelete().Table("links").Where("id = ?", gone.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().ExecContext(ctx, "INSERT INTO link_purges (link_id, deleted_at) VALUES (?, ?)", gone.ID, deletedAt); err != nil {
			t.Fatal(err)
		}
		n, err := db.Clicks.PurgeDeleted(ctx, time.Now(), 7, 24*time.Hour)
		if err != nil || n == 0 {
			t.Fatalf("PurgeDeleted = %d, %v", n, err)
		}
		for _, table := range []string{"clicks", "click_rollups", "click_dimension_rollups", "click_visitors"} {
			if got := countRows(t, db, table, "link_id = ?", gone.ID); got != 0 {
				t.Errorf("%d rows of the deleted link left in %s", got, table)
			}
			if got := countRows(t, db, table, "link_id = ?", kept.ID); got == 0 {
				t.Errorf("the other link's rows were purged from %s", table)
			}
		}
		if countRows(t, db, "link_purges", "link_id = ?", gone.ID) != 1 {
			t.Fatal("the purge row was removed before its day was over")
		}
		if _, err := db.Clicks.PurgeDeleted(ctx, time.Now().Add(25*time.Hour), 7, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		if countRows(t, db, "link_purges", "link_id = ?", gone.ID) != 0 {
			t.Fatal("the purge row outlived its day")
		}
	})
}
