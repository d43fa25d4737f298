package store

import (
	"context"
	"time"
)

// Statistics read the rollups the click recorder maintains (one row per link and UTC hour, and per dimension
// value), never the clicks: a link with a million clicks over 90 days is about 2160 rows.

// HourlyClicks is the clicks of a link in one UTC hour.
type HourlyClicks struct {
	Hour         time.Time `bun:"bucket"`
	Humans       int64     `bun:"humans"`
	Bots         int64     `bun:"bots"`
	UniqueHumans int64     `bun:"unique_humans"`
}

// HourlyClicks returns the link's rollups of the hours that start in [from, to), oldest first. from is taken back
// to the start of its hour.
func (s *Links) HourlyClicks(ctx context.Context, linkID string, from, to time.Time) ([]HourlyClicks, error) {
	var rows []HourlyClicks
	err := s.db.r.NewSelect().Table("click_rollups").Column("bucket", "humans", "bots", "unique_humans").
		Where("link_id = ? AND bucket >= ? AND bucket < ?", linkID, from.UTC().Truncate(time.Hour), to.UTC()).
		Order("bucket").Scan(ctx, &rows)
	return rows, err
}

// DimensionClicks is the clicks of a link with one value of a dimension.
type DimensionClicks struct {
	Value  string `bun:"value"`
	Humans int64  `bun:"humans"`
	Bots   int64  `bun:"bots"`
}

// ClicksBy sums the link's clicks per value of dimension (countries, referrers, devices, browsers,
// operating_systems) over the hours that start in [from, to): most human clicks first, then by value, at most
// limit values.
func (s *Links) ClicksBy(ctx context.Context, linkID, dimension string, from, to time.Time, limit int) ([]DimensionClicks, error) {
	var rows []DimensionClicks
	err := s.db.r.NewSelect().Table("click_dimension_rollups").Column("value").
		ColumnExpr("SUM(humans) AS humans").ColumnExpr("SUM(bots) AS bots").
		Where("link_id = ? AND dimension = ? AND bucket >= ? AND bucket < ?", linkID, dimension,
			from.UTC().Truncate(time.Hour), to.UTC()).
		Group("value").OrderExpr("humans DESC, value").Limit(int64(limit)).Scan(ctx, &rows)
	return rows, err
}

// apiClickColumns are the columns of a click the API shows: never the address prefix or the visitor hash, which
// are not even read.
var apiClickColumns = []string{"id", "link_id", "clicked_at", "class", "referrer_host", "country", "device", "os",
	"browser", "user_agent"}

// RecordedClicks returns a page of the link's clicks, newest first, of one class when class is not "", and whether
// more follow. IPPrefix and VisitorHash of the clicks are left empty.
func (s *Links) RecordedClicks(ctx context.Context, linkID, class string, p Page) ([]Click, bool, error) {
	var cs []Click
	q := s.db.r.NewSelect().Model(&cs).Column(apiClickColumns...).
		Where("c.link_id = ?", linkID)
	if class != "" {
		q = q.Where("c.class = ?", class)
	}
	if err := p.apply(q, "c.id").Scan(ctx); err != nil {
		return nil, false, err
	}
	cs, more := pageOf(cs, p)
	return cs, more, nil
}
