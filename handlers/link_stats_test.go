package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// rollupRow and dimensionRow are hand-made rollups, as the click recorder writes them.
type rollupRow struct {
	LinkID       string    `bun:"link_id"`
	Bucket       time.Time `bun:"bucket"`
	Humans       int64     `bun:"humans"`
	Bots         int64     `bun:"bots"`
	UniqueHumans int64     `bun:"unique_humans"`
}

type dimensionRow struct {
	LinkID    string    `bun:"link_id"`
	Dimension string    `bun:"dimension"`
	Bucket    time.Time `bun:"bucket"`
	Value     string    `bun:"value"`
	Humans    int64     `bun:"humans"`
	Bots      int64     `bun:"bots"`
}

func (e *linkEnv) stats(path string) gen.LinkStats {
	e.t.Helper()
	r := e.call(http.MethodGet, path, "")
	if r.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d %s", path, r.StatusCode, r.body)
	}
	var s gen.LinkStats
	r.json(e.t, &s)
	return s
}

func TestLinkStats(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com"}`)
		// One human click (and unique visitor) per UTC hour from 24 to 27 October 2026 and two bot clicks at
		// 12:00Z on the 26th; Berlin leaves summer time on the 25th at 01:00Z (03:00 CEST becomes 02:00 CET).
		var rows []rollupRow
		for h := time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC); h.Before(time.Date(2026, 10, 27, 0, 0, 0, 0, time.UTC)); h = h.Add(time.Hour) {
			rows = append(rows, rollupRow{LinkID: l.Id, Bucket: h, Humans: 1, UniqueHumans: 1})
		}
		rows[60].Bots = 2 // 2026-10-26T12:00Z
		if _, err := db.Bun().NewInsert().Model(&rows).ModelTableExpr("click_rollups").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		base := "/api/v1/links/" + l.Id + "/stats"

		s := e.stats(base + "?from=2026-10-24T22:00:00Z&to=2026-10-26T23:00:00Z&tz=Europe/Berlin")
		if s.Interval != "day" || s.Tz != "Europe/Berlin" || len(s.Series) != 2 {
			t.Fatalf("day series %+v", s)
		}
		// The 25th in Berlin has 25 hours.
		if !s.Series[0].Start.Equal(time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC)) || s.Series[0].Humans != 25 ||
			!s.Series[1].Start.Equal(time.Date(2026, 10, 25, 23, 0, 0, 0, time.UTC)) || s.Series[1].Humans != 24 ||
			s.Series[1].Bots != 2 || s.Totals.Humans != 49 || s.Totals.Bots != 2 || s.Totals.UniqueHumans != 49 {
			t.Errorf("Berlin days across the DST change: %+v", s)
		}
		s = e.stats(base + "?from=2026-10-24T22:00:00Z&to=2026-10-25T23:00:00Z&tz=Europe/Berlin&interval=hour")
		if len(s.Series) != 25 || s.Totals.Humans != 25 {
			t.Errorf("hours of the long day: %d buckets, %d humans", len(s.Series), s.Totals.Humans)
		}
		s = e.stats(base + "?from=2026-10-24T00:00:00Z&to=2026-10-27T00:00:00Z")
		if len(s.Series) != 3 || s.Series[0].Humans != 24 || s.Tz != "UTC" {
			t.Errorf("UTC days: %+v", s.Series)
		}

		// Weeks start on Monday (26 October 2026), months on the 1st, in the zone; empty buckets are zeros.
		s = e.stats(base + "?from=2026-10-21T00:00:00Z&to=2026-11-03T00:00:00Z&interval=week&tz=Europe/Berlin")
		if len(s.Series) != 3 || !s.Series[0].Start.Equal(time.Date(2026, 10, 18, 22, 0, 0, 0, time.UTC)) ||
			!s.Series[1].Start.Equal(time.Date(2026, 10, 25, 23, 0, 0, 0, time.UTC)) || s.Series[1].Start.In(berlin(t)).Weekday() != time.Monday ||
			s.Series[0].Humans+s.Series[1].Humans != 72 || s.Series[2].Humans != 0 {
			t.Errorf("weeks: %+v", s.Series)
		}
		s = e.stats(base + "?from=2026-09-15T00:00:00Z&to=2026-12-01T00:00:00Z&interval=month&tz=Europe/Berlin")
		if len(s.Series) != 4 || !s.Series[0].Start.Equal(time.Date(2026, 8, 31, 22, 0, 0, 0, time.UTC)) ||
			!s.Series[2].Start.Equal(time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)) || s.Series[1].Humans != 72 ||
			s.Series[0].Humans != 0 || s.Series[3].Humans != 0 {
			t.Errorf("months: %+v", s.Series)
		}
		// The default period is the last 30 days.
		s = e.stats(base)
		if d := s.To.Sub(s.From); d != 30*24*time.Hour || time.Since(s.To) > time.Minute || len(s.Series) < 30 {
			t.Errorf("default period %v – %v, %d buckets", s.From, s.To, len(s.Series))
		}

		for q, param := range map[string]string{
			"?tz=Mars/Olympus": "tz",
			"?tz=Local":        "tz",
			"?from=2026-10-25T00:00:00Z&to=2026-10-25T00:00:00Z":               "to",
			"?from=2026-10-26T00:00:00Z&to=2026-10-25T00:00:00Z":               "to",
			"?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&interval=hour": "interval",
			"?interval=year": "interval",
		} {
			p := e.call(http.MethodGet, base+q, "").problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["parameter"] != param {
				t.Errorf("%s: %v, want parameter %s", q, p.Errors, param)
			}
			if param == "interval" && strings.Contains(q, "hour") && !strings.Contains(p.Errors[0]["detail"], "1000") {
				t.Errorf("bucket limit detail %q does not name the limit", p.Errors[0]["detail"])
			}
		}
	})
}

func berlin(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestLinkStatsByDimension(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com"}`)
		h := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
		rows := []dimensionRow{
			{l.Id, "countries", h, "DE", 3, 0}, {l.Id, "countries", h.Add(time.Hour), "DE", 2, 1},
			{l.Id, "countries", h, "FR", 5, 0}, {l.Id, "countries", h, "US", 9, 4}, {l.Id, "countries", h, "unknown", 1, 7},
			{l.Id, "countries", h.Add(-48 * time.Hour), "JP", 100, 0}, // before the period
			{l.Id, "devices", h, "mobile", 50, 0},
		}
		if _, err := db.Bun().NewInsert().Model(&rows).ModelTableExpr("click_dimension_rollups").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		path := "/api/v1/links/" + l.Id + "/stats/countries?from=2026-11-19T00:00:00Z&to=2026-11-21T00:00:00Z"
		r := e.call(http.MethodGet, path, "")
		var s gen.LinkDimensionStats
		r.json(t, &s)
		var got []string
		for _, d := range s.Data {
			got = append(got, d.Value)
		}
		if r.StatusCode != 200 || strings.Join(got, ",") != "US,DE,FR,unknown" || s.Data[1].Humans != 5 || s.Data[1].Bots != 1 ||
			s.Dimension != "countries" {
			t.Errorf("countries: %d %s", r.StatusCode, r.body)
		}
		r = e.call(http.MethodGet, path+"&limit=2", "")
		r.json(t, &s)
		if len(s.Data) != 2 || s.Data[0].Value != "US" {
			t.Errorf("limit 2: %s", r.body)
		}
		e.call(http.MethodGet, "/api/v1/links/"+l.Id+"/stats/cities", "").problem(t, http.StatusBadRequest, "validation_failed")
	})
}

func TestListLinkClicks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newLinkEnv(t, db, handlers.Config{})
		l := e.create(`{"destination_url":"https://example.com"}`)
		ip, hash, ref := "203.0.113.0/24", "secret-visitor-hash", "news.example"
		var clicks []store.Click
		for i, class := range []string{"human", "bot", "human", "preview", "human"} {
			clicks = append(clicks, store.Click{ID: store.NewID("clk"), LinkID: l.Id, WorkspaceID: e.ws.ID,
				ClickedAt: time.Now().UTC().Add(time.Duration(i) * time.Second).Truncate(time.Microsecond), Class: class,
				ReferrerHost: &ref, Device: "desktop", OS: "macOS", Browser: "Firefox", UserAgent: "Mozilla/5.0",
				IPPrefix: &ip, VisitorHash: &hash}) // IDs made in one process increase: newest first is by ID
		}
		if _, err := db.Bun().NewInsert().Model(&clicks).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		path := "/api/v1/links/" + l.Id + "/clicks"
		r := e.call(http.MethodGet, path+"?class=human&limit=2", "")
		var page gen.ClickList
		r.json(t, &page)
		if strings.Contains(string(r.body), ip) || strings.Contains(string(r.body), hash) {
			t.Fatalf("clicks answer leaks the address prefix or visitor hash: %s", r.body)
		}
		if len(page.Data) != 2 || !page.HasMore || page.Data[0].Id != clicks[4].ID || page.Data[1].Id != clicks[2].ID ||
			*page.Data[0].ReferrerHost != ref || page.Data[0].Class != "human" {
			t.Fatalf("first page: %s", r.body)
		}
		r = e.call(http.MethodGet, path+"?class=human&limit=2&cursor="+*page.NextCursor, "")
		r.json(t, &page)
		if len(page.Data) != 1 || page.HasMore || page.Data[0].Id != clicks[0].ID || page.NextCursor != nil {
			t.Errorf("second page: %s", r.body)
		}
		r = e.call(http.MethodGet, path, "")
		r.json(t, &page)
		if len(page.Data) != 5 {
			t.Errorf("all classes: %d clicks", len(page.Data))
		}
		e.call(http.MethodGet, path+"?cursor=bG5rXzAxSkRBQzRENUU2RjdHOEg5SjBLMU0yTjNQ", "").problem(t, http.StatusBadRequest, "validation_failed")
	})
}
