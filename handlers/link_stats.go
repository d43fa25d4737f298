package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/gen"
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

// statsPeriod resolves a request's from, to and tz: to defaults to now, from to 30 days before to, tz to UTC.
func statsPeriod(from, to *time.Time, tz *string, now time.Time) (time.Time, time.Time, *time.Location, error) {
	end := now.UTC()
	if to != nil {
		end = to.UTC()
	}
	start := end.Add(-defaultStatsPeriod)
	if from != nil {
		start = from.UTC()
	}
	name := "UTC"
	if tz != nil {
		name = *tz
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // "Local" would be the server's zone, not an IANA name
		return start, end, nil, invalidParameter("tz", fmt.Sprintf("%q is not an IANA time zone name such as Europe/Berlin", name))
	}
	if !end.After(start) {
		return start, end, nil, invalidParameter("to", "must be after from")
	}
	return start, end, loc, nil
}

// bucketStart is the start of the bucket of interval, in loc, that contains t.
func bucketStart(t time.Time, interval gen.GetLinkStatsParamsInterval, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	switch interval {
	case gen.GetLinkStatsParamsIntervalHour:
		// Taken back by the local minutes and seconds rather than rebuilt from the local hour, which is ambiguous
		// in the hour a DST change repeats.
		return t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second -
			time.Duration(t.Nanosecond()))
	case gen.GetLinkStatsParamsIntervalWeek:
		return time.Date(y, m, d-(int(t.Weekday())+6)%7, 0, 0, 0, 0, loc)
	case gen.GetLinkStatsParamsIntervalMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// nextBucket is the start of the bucket after the one starting at b.
func nextBucket(b time.Time, interval gen.GetLinkStatsParamsInterval, loc *time.Location) time.Time {
	y, m, d := b.In(loc).Date()
	switch interval {
	case gen.GetLinkStatsParamsIntervalHour:
		return b.Add(time.Hour)
	case gen.GetLinkStatsParamsIntervalWeek:
		return time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case gen.GetLinkStatsParamsIntervalMonth:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// statsBuckets lists the bucket starts that cover [from, to), or a problem when there would be more than
// maxStatsBuckets.
func statsBuckets(from, to time.Time, interval gen.GetLinkStatsParamsInterval, loc *time.Location) ([]time.Time, error) {
	var out []time.Time
	for b := bucketStart(from, interval, loc); b.Before(to); b = nextBucket(b, interval, loc) {
		if len(out) == maxStatsBuckets {
			return nil, invalidParameter("interval", fmt.Sprintf(
				"this period has more than %d buckets of one %s; choose a longer interval or a shorter period",
				maxStatsBuckets, interval))
		}
		out = append(out, b)
	}
	return out, nil
}

// foldHours sums hourly rollups (oldest first) into the buckets starting at starts, and into totals.
func foldHours(rows []store.HourlyClicks, starts []time.Time) ([]gen.LinkStatsBucket, gen.LinkStatsCounts) {
	series := make([]gen.LinkStatsBucket, len(starts))
	for i, b := range starts {
		series[i].Start = b.UTC()
	}
	var totals gen.LinkStatsCounts
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

// statsLink checks that the link is the workspace's before its statistics are read (an existence check by primary
// key: the row itself is not needed).
func (s *Server) statsLink(ctx context.Context, linkID string) error {
	key, err := principal(ctx)
	if err != nil {
		return err
	}
	exists, err := s.db.Links.Exists(ctx, key.WorkspaceID, linkID)
	if err != nil {
		return err
	}
	if !exists {
		return storeProblem(store.ErrNotFound, "link", linkID)
	}
	return nil
}

// GetLinkStats answers GET /api/v1/links/{link_id}/stats.
func (s *Server) GetLinkStats(ctx context.Context, req gen.GetLinkStatsRequestObject) (gen.GetLinkStatsResponseObject, error) {
	q := req.Params
	from, to, loc, err := statsPeriod(q.From, q.To, q.Tz, time.Now())
	if err != nil {
		return nil, err
	}
	interval := gen.GetLinkStatsParamsIntervalDay
	if q.Interval != nil {
		interval = *q.Interval
	}
	starts, err := statsBuckets(from, to, interval, loc)
	if err != nil {
		return nil, err
	}
	if err := s.statsLink(ctx, req.LinkId); err != nil {
		return nil, err
	}
	rows, err := s.db.Links.HourlyClicks(ctx, req.LinkId, from, to)
	if err != nil {
		return nil, err
	}
	series, totals := foldHours(rows, starts)
	return gen.GetLinkStats200JSONResponse{Body: gen.LinkStats{
		Object: "link_stats", LinkId: req.LinkId, From: from, To: to, Interval: gen.LinkStatsInterval(interval),
		Tz: loc.String(), Totals: totals, Series: series,
	}}, nil
}

// GetLinkStatsByDimension answers GET /api/v1/links/{link_id}/stats/{dimension}: one period, no buckets (so no time
// zone either).
func (s *Server) GetLinkStatsByDimension(ctx context.Context, req gen.GetLinkStatsByDimensionRequestObject) (gen.GetLinkStatsByDimensionResponseObject, error) {
	q := req.Params
	from, to, _, err := statsPeriod(q.From, q.To, nil, time.Now())
	if err != nil {
		return nil, err
	}
	if err := s.statsLink(ctx, req.LinkId); err != nil {
		return nil, err
	}
	limit := defaultLimit
	if q.Limit != nil {
		limit = *q.Limit
	}
	rows, err := s.db.Links.ClicksBy(ctx, req.LinkId, string(req.Dimension), from, to, limit)
	if err != nil {
		return nil, err
	}
	out := gen.LinkDimensionStats{Object: "link_dimension_stats", LinkId: req.LinkId, Dimension: req.Dimension,
		From: from, To: to}
	out.Data = make([]struct {
		Bots   int64  `json:"bots"`
		Humans int64  `json:"humans"`
		Value  string `json:"value"`
	}, len(rows))
	for i, r := range rows {
		out.Data[i].Value, out.Data[i].Humans, out.Data[i].Bots = r.Value, r.Humans, r.Bots
	}
	return gen.GetLinkStatsByDimension200JSONResponse{Body: out}, nil
}

// ListLinkClicks answers GET /api/v1/links/{link_id}/clicks.
func (s *Server) ListLinkClicks(ctx context.Context, req gen.ListLinkClicksRequestObject) (gen.ListLinkClicksResponseObject, error) {
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "clk_", false)
	if err != nil {
		return nil, err
	}
	if err := s.statsLink(ctx, req.LinkId); err != nil {
		return nil, err
	}
	var class string
	if req.Params.Class != nil {
		class = string(*req.Params.Class)
	}
	cs, more, err := s.db.Links.RecordedClicks(ctx, req.LinkId, class, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(cs, more, page, func(c store.Click) string { return c.ID },
		func(c store.Click) (gen.Click, error) {
			return gen.Click{
				Id: c.ID, Object: "click", LinkId: c.LinkID, ClickedAt: c.ClickedAt, Class: gen.ClickClass(c.Class),
				ReferrerHost: c.ReferrerHost, Country: c.Country, Device: gen.ClickDevice(c.Device), Os: c.OS,
				Browser: c.Browser, UserAgent: c.UserAgent,
			}, nil
		})
	if err != nil {
		return nil, err
	}
	return gen.ListLinkClicks200JSONResponse{Body: gen.ClickList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}
