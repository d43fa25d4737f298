package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/store"
)

// GetLinkStats answers GET /api/v1/links/{link_id}/stats.
func (s *Server) GetLinkStats(ctx context.Context, req gen.GetLinkStatsRequestObject) (gen.GetLinkStatsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	query := links.StatsQuery{Period: links.Period{From: q.From, To: q.To}, TimeZone: q.Tz}
	if q.Interval != nil {
		query.Interval = links.Interval(*q.Interval)
	}
	st, err := s.links.Stats(ctx, key.WorkspaceID, req.LinkId, query)
	if err != nil {
		return nil, err
	}
	series := make([]gen.LinkStatsBucket, len(st.Series))
	for i, b := range st.Series {
		series[i] = gen.LinkStatsBucket{Start: b.Start, Humans: b.Humans, Bots: b.Bots, UniqueHumans: b.UniqueHumans}
	}
	return gen.GetLinkStats200JSONResponse{Body: gen.LinkStats{
		Object: "link_stats", LinkId: req.LinkId, From: st.From, To: st.To, Interval: gen.LinkStatsInterval(st.Interval),
		Tz: st.Location.String(), Series: series,
		Totals: gen.LinkStatsCounts{Humans: st.Totals.Humans, Bots: st.Totals.Bots, UniqueHumans: st.Totals.UniqueHumans},
	}}, nil
}

// GetLinkStatsByDimension answers GET /api/v1/links/{link_id}/stats/{dimension}.
func (s *Server) GetLinkStatsByDimension(ctx context.Context, req gen.GetLinkStatsByDimensionRequestObject) (gen.GetLinkStatsByDimensionResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	limit := defaultLimit
	if q.Limit != nil {
		limit = *q.Limit
	}
	st, err := s.links.StatsBy(ctx, key.WorkspaceID, req.LinkId, string(req.Dimension), links.Period{From: q.From, To: q.To}, limit)
	if err != nil {
		return nil, err
	}
	out := gen.LinkDimensionStats{Object: "link_dimension_stats", LinkId: req.LinkId, Dimension: req.Dimension,
		From: st.From, To: st.To}
	out.Data = make([]struct {
		Bots   int64  `json:"bots"`
		Humans int64  `json:"humans"`
		Value  string `json:"value"`
	}, len(st.Values))
	for i, r := range st.Values {
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
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var class string
	if req.Params.Class != nil {
		class = string(*req.Params.Class)
	}
	cs, more, err := s.links.Clicks(ctx, key.WorkspaceID, req.LinkId, class, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(cs, more, page, func(c store.Click) string { return c.ID },
		func(c store.Click) (gen.Click, error) { return clicks.API(c), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListLinkClicks200JSONResponse{Body: gen.ClickList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}
