package links

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Statistics come from hourly UTC rollups. Buckets of a day, week (ISO: from Monday) or month start at local
// midnight in the requested time zone, DST included; each rollup hour counts in the bucket that contains its start.
// In zones whose offset is not a whole number of hours (Asia/Kolkata, +05:30) a local day therefore begins with
// the UTC hour that starts within it: the split is approximated to the hour.

const (
	// maxStatsBuckets caps a series (the spec's maxItems).
	maxStatsBuckets = 1000
	// defaultStatsPeriod is how far back statistics reach when the request does not say.
	defaultStatsPeriod = 30 * 24 * time.Hour
)

// Interval is the length of the buckets of a statistics series.
type Interval string

// Intervals of a series.
const (
	Hour  Interval = "hour"
	Day   Interval = "day"
	Week  Interval = "week"
	Month Interval = "month"
)

// Period is the time a statistics request covers, as sent (nil: not sent): To defaults to now, From to 30 days
// before To.
type Period struct {
	From, To *time.Time
}

// StatsQuery asks for a link's clicks as a series of buckets.
type StatsQuery struct {
	Period
	// Interval is the length of the buckets (default Day).
	Interval Interval
	// TimeZone is the IANA name of the zone buckets start in (default UTC).
	TimeZone *string
}

// Counts are the clicks of a bucket or a period.
type Counts struct {
	Humans, Bots, UniqueHumans int64
}

// Bucket is the clicks of the bucket that starts at Start.
type Bucket struct {
	Start time.Time
	Counts
}

// Stats is a link's clicks over [From, To), in total and by bucket.
type Stats struct {
	From, To time.Time
	Interval Interval
	Location *time.Location
	Totals   Counts
	Series   []Bucket
}

// DimensionStats is a link's clicks over [From, To) by value of one dimension, most human clicks first.
type DimensionStats struct {
	From, To time.Time
	Values   []store.DimensionClicks
}

// resolve returns the period's bounds in UTC, or a problem naming the parameter to when they are out of order.
func (p Period) resolve(now time.Time) (from, to time.Time, err error) {
	to = now.UTC()
	if p.To != nil {
		to = p.To.UTC()
	}
	from = to.Add(-defaultStatsPeriod)
	if p.From != nil {
		from = p.From.UTC()
	}
	if !to.After(from) {
		return from, to, problem.InvalidParameter("to", "must be after from")
	}
	return from, to, nil
}

// location resolves the name of a time zone (nil: UTC).
func location(tz *string) (*time.Location, error) {
	name := "UTC"
	if tz != nil {
		name = *tz
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // "Local" would be the server's zone, not an IANA name
		return nil, problem.InvalidParameter("tz", fmt.Sprintf("%q is not an IANA time zone name such as Europe/Berlin", name))
	}
	return loc, nil
}

// bucketStart is the start of the bucket of interval, in loc, that contains t.
func bucketStart(t time.Time, interval Interval, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	switch interval {
	case Hour:
		// Taken back by the local minutes and seconds rather than rebuilt from the local hour, which is ambiguous
		// in the hour a DST change repeats.
		return t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second -
			time.Duration(t.Nanosecond()))
	case Week:
		return time.Date(y, m, d-(int(t.Weekday())+6)%7, 0, 0, 0, 0, loc)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// nextBucket is the start of the bucket after the one starting at b.
func nextBucket(b time.Time, interval Interval, loc *time.Location) time.Time {
	y, m, d := b.In(loc).Date()
	switch interval {
	case Hour:
		return b.Add(time.Hour)
	case Week:
		return time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case Month:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// bucketStarts lists the bucket starts that cover [from, to), or a problem when there would be more than
// maxStatsBuckets.
func bucketStarts(from, to time.Time, interval Interval, loc *time.Location) ([]time.Time, error) {
	var out []time.Time
	for b := bucketStart(from, interval, loc); b.Before(to); b = nextBucket(b, interval, loc) {
		if len(out) == maxStatsBuckets {
			return nil, problem.InvalidParameter("interval", fmt.Sprintf(
				"this period has more than %d buckets of one %s; choose a longer interval or a shorter period",
				maxStatsBuckets, interval))
		}
		out = append(out, b)
	}
	return out, nil
}

// foldHours sums hourly rollups (oldest first) into the buckets starting at starts, and into totals.
func foldHours(rows []store.HourlyClicks, starts []time.Time) ([]Bucket, Counts) {
	series := make([]Bucket, len(starts))
	for i, b := range starts {
		series[i].Start = b.UTC()
	}
	var totals Counts
	i := 0
	for _, r := range rows {
		for i+1 < len(starts) && !r.Hour.Before(starts[i+1]) {
			i++
		}
		series[i].Humans += r.Humans
		series[i].Bots += r.Bots
		series[i].UniqueHumans += r.UniqueHumans
		totals.Humans += r.Humans
		totals.Bots += r.Bots
		totals.UniqueHumans += r.UniqueHumans
	}
	return series, totals
}

// ensureLink checks that the link is the workspace's before its statistics are read (an existence check by primary
// key: the row itself is not needed).
func (s *Service) ensureLink(ctx context.Context, workspaceID, linkID string) error {
	exists, err := s.db.Links.Exists(ctx, workspaceID, linkID)
	if err != nil {
		return err
	}
	if !exists {
		return notFound(linkID)
	}
	return nil
}

// Stats returns the workspace's link's clicks as a series. Errors: validation_failed naming the parameter (tz,
// to, interval), not_found; any other error is internal.
func (s *Service) Stats(ctx context.Context, workspaceID, linkID string, q StatsQuery) (Stats, error) {
	loc, err := location(q.TimeZone)
	if err != nil {
		return Stats{}, err
	}
	from, to, err := q.resolve(time.Now())
	if err != nil {
		return Stats{}, err
	}
	interval := q.Interval
	if interval == "" {
		interval = Day
	}
	starts, err := bucketStarts(from, to, interval, loc)
	if err != nil {
		return Stats{}, err
	}
	if err := s.ensureLink(ctx, workspaceID, linkID); err != nil {
		return Stats{}, err
	}
	rows, err := s.db.Links.HourlyClicks(ctx, linkID, from, to)
	if err != nil {
		return Stats{}, err
	}
	series, totals := foldHours(rows, starts)
	return Stats{From: from, To: to, Interval: interval, Location: loc, Totals: totals, Series: series}, nil
}

// StatsBy returns the workspace's link's clicks over a period by value of a dimension (countries, referrers,
// devices, browsers, operating_systems), at most limit values. Errors: validation_failed naming the parameter to,
// not_found; any other error is internal.
func (s *Service) StatsBy(ctx context.Context, workspaceID, linkID, dimension string, p Period, limit int) (DimensionStats, error) {
	from, to, err := p.resolve(time.Now())
	if err != nil {
		return DimensionStats{}, err
	}
	if err := s.ensureLink(ctx, workspaceID, linkID); err != nil {
		return DimensionStats{}, err
	}
	rows, err := s.db.Links.ClicksBy(ctx, linkID, dimension, from, to, limit)
	if err != nil {
		return DimensionStats{}, err
	}
	return DimensionStats{From: from, To: to, Values: rows}, nil
}

// Clicks returns a page of the workspace's link's recorded clicks, newest first, of one class unless class is "",
// and whether more follow. Errors: not_found; any other error is internal.
func (s *Service) Clicks(ctx context.Context, workspaceID, linkID, class string, page store.Page) ([]store.Click, bool, error) {
	if err := s.ensureLink(ctx, workspaceID, linkID); err != nil {
		return nil, false, err
	}
	return s.db.Links.RecordedClicks(ctx, linkID, class, page)
}
