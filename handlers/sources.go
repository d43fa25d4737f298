package handlers

import (
	"context"
	"strings"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/patch"
)

// CreateSource answers POST /api/v1/sources with the new source and its ingest URL, shown this once.
func (s *Server) CreateSource(ctx context.Context, req gen.CreateSourceRequestObject) (gen.CreateSourceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	n := automation.NewSource{Name: b.Name, EventType: b.EventType, Verification: verificationIn(b.Verification),
		Limits: limitsIn(b.Limits)}
	if b.Dedup != nil {
		d := dedupIn(*b.Dedup)
		n.Dedup = &d
	}
	src, token, err := s.automation.CreateSource(ctx, key.WorkspaceID, n)
	if err != nil {
		return nil, err
	}
	location := "/api/v1/sources/" + src.ID
	return gen.CreateSource201JSONResponse{Body: s.withIngestURL(src, token),
		Headers: gen.CreateSource201ResponseHeaders{Location: &location}}, nil
}

// ListSources answers GET /api/v1/sources, newest first.
func (s *Server) ListSources(ctx context.Context, req gen.ListSourcesRequestObject) (gen.ListSourcesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "src_", false)
	if err != nil {
		return nil, err
	}
	srcs, more, err := s.automation.Sources(ctx, key.WorkspaceID, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(srcs, more, page, func(src automation.Source) string { return src.ID },
		func(src automation.Source) (gen.Source, error) { return apiSource(src), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListSources200JSONResponse{Body: gen.SourceList{Object: gen.SourceListObjectList, Data: data,
		HasMore: more, NextCursor: next}}, nil
}

// GetSource answers GET /api/v1/sources/{source_id}.
func (s *Server) GetSource(ctx context.Context, req gen.GetSourceRequestObject) (gen.GetSourceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	src, err := s.automation.Source(ctx, key.WorkspaceID, req.SourceId)
	if err != nil {
		return nil, err
	}
	return gen.GetSource200JSONResponse{Body: apiSource(src)}, nil
}

// UpdateSource answers PATCH /api/v1/sources/{source_id}.
func (s *Server) UpdateSource(ctx context.Context, req gen.UpdateSourceRequestObject) (gen.UpdateSourceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	c := automation.SourceChange{Name: b.Name, EventType: b.EventType, Limits: limitsIn(b.Limits)}
	if b.Verification != nil {
		v := verificationIn(*b.Verification)
		c.Verification = &v
	}
	switch {
	case !b.Dedup.IsSpecified():
	case b.Dedup.IsNull():
		c.Dedup = patch.Clear[automation.Dedup]()
	default:
		c.Dedup = patch.Set(dedupIn(b.Dedup.MustGet()))
	}
	src, err := s.automation.UpdateSource(ctx, key.WorkspaceID, req.SourceId, c)
	if err != nil {
		return nil, err
	}
	return gen.UpdateSource200JSONResponse{Body: apiSource(src)}, nil
}

// DeleteSource answers DELETE /api/v1/sources/{source_id}.
func (s *Server) DeleteSource(ctx context.Context, req gen.DeleteSourceRequestObject) (gen.DeleteSourceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.automation.DeleteSource(ctx, key.WorkspaceID, req.SourceId); err != nil {
		return nil, err
	}
	return gen.DeleteSource204Response{}, nil
}

// RotateSourceToken answers POST /api/v1/sources/{source_id}/rotate-token with the new ingest URL, shown this once.
func (s *Server) RotateSourceToken(ctx context.Context, req gen.RotateSourceTokenRequestObject) (gen.RotateSourceTokenResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var grace *time.Duration
	if req.Body != nil && req.Body.GracePeriodSeconds != nil {
		g := time.Duration(*req.Body.GracePeriodSeconds) * time.Second
		grace = &g
	}
	src, token, err := s.automation.RotateToken(ctx, key.WorkspaceID, req.SourceId, grace)
	if err != nil {
		return nil, err
	}
	return gen.RotateSourceToken200JSONResponse{Body: s.withIngestURL(src, token)}, nil
}

// ListSourceRequests answers GET /api/v1/sources/{source_id}/requests, newest first.
func (s *Server) ListSourceRequests(ctx context.Context, req gen.ListSourceRequestsRequestObject) (gen.ListSourceRequestsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "srq_", false)
	if err != nil {
		return nil, err
	}
	var outcome string
	if req.Params.Outcome != nil {
		outcome = string(*req.Params.Outcome)
	}
	rs, more, err := s.automation.Requests(ctx, key.WorkspaceID, req.SourceId, outcome, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rs, more, page, func(r automation.SourceRequest) string { return r.ID },
		func(r automation.SourceRequest) (gen.SourceRequest, error) { return apiSourceRequest(r), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListSourceRequests200JSONResponse{Body: gen.SourceRequestList{Object: gen.SourceRequestListObjectList,
		Data: data, HasMore: more, NextCursor: next}}, nil
}

func verificationIn(v gen.SourceVerificationInput) automation.Verification {
	out := automation.Verification{Scheme: string(v.Scheme)}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&out.Secret, v.Secret)
	set(&out.Header, v.Header)
	set(&out.Prefix, v.Prefix)
	set(&out.Username, v.Username)
	if v.Algorithm != nil {
		out.Algorithm = string(*v.Algorithm)
	}
	if v.Encoding != nil {
		out.Encoding = string(*v.Encoding)
	}
	if v.ToleranceSeconds != nil {
		out.ToleranceSeconds = *v.ToleranceSeconds
	}
	return out
}

func dedupIn(d gen.SourceDedupInput) automation.Dedup {
	var out automation.Dedup
	if d.Header != nil {
		out.Header = *d.Header
	}
	if d.Pointer != nil {
		out.Pointer = *d.Pointer
	}
	if d.WindowSeconds != nil {
		out.Window = time.Duration(*d.WindowSeconds) * time.Second
	}
	return out
}

func limitsIn(l *gen.SourceLimitsInput) automation.Limits {
	if l == nil {
		return automation.Limits{}
	}
	return automation.Limits{MaxBodyBytes: l.MaxBodyBytes, RatePerMinute: l.RateLimitPerMinute}
}

// optional is nil for "", else a pointer to s.
func optional[T ~string](s T) *T {
	if s == "" {
		return nil
	}
	return &s
}

// apiSource is a source as the API shows it: its scheme without the secret, never its token.
func apiSource(src automation.Source) gen.Source {
	v := src.Verification
	out := gen.Source{Id: src.ID, Object: gen.SourceObjectSource, Name: src.Name, EventType: src.EventType,
		Verification: gen.SourceVerification{Scheme: gen.SourceScheme(v.Scheme), Header: optional(v.Header),
			Prefix: optional(v.Prefix), Username: optional(v.Username),
			Algorithm: optional(gen.SourceVerificationAlgorithm(v.Algorithm)),
			Encoding:  optional(gen.SourceVerificationEncoding(v.Encoding))},
		Limits:     gen.SourceLimits{MaxBodyBytes: src.MaxBodyBytes, RateLimitPerMinute: src.RatePerMinute},
		TokenLast4: src.TokenLast4, CreatedAt: src.CreatedAt, UpdatedAt: src.UpdatedAt}
	if v.ToleranceSeconds != 0 {
		out.Verification.ToleranceSeconds = &v.ToleranceSeconds
	}
	out.PreviousTokenExpiresAt = src.PreviousTokenExpiresAt
	if d := src.Dedup; d != nil {
		out.Dedup = &struct {
			Header        *string `json:"header"`
			Pointer       *string `json:"pointer"`
			WindowSeconds int     `json:"window_seconds"`
		}{Header: optional(d.Header), Pointer: optional(d.Pointer), WindowSeconds: int(d.Window / time.Second)}
	}
	return out
}

// withIngestURL is a source with its ingest URL, for the answers that show its token once.
func (s *Server) withIngestURL(src automation.Source, token string) gen.SourceWithIngestURL {
	a := apiSource(src)
	return gen.SourceWithIngestURL{Id: a.Id, Object: gen.SourceWithIngestURLObjectSource, Name: a.Name,
		EventType: a.EventType, Verification: a.Verification, Dedup: a.Dedup, Limits: a.Limits,
		TokenLast4: a.TokenLast4, PreviousTokenExpiresAt: a.PreviousTokenExpiresAt, CreatedAt: a.CreatedAt,
		UpdatedAt: a.UpdatedAt, IngestUrl: s.automation.IngestURL(token)}
}

func apiSourceRequest(r automation.SourceRequest) gen.SourceRequest {
	headers := r.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	return gen.SourceRequest{Id: r.ID, Object: gen.SourceRequestObjectSourceRequest, SourceId: r.SourceID,
		ReceivedAt: r.ReceivedAt, Method: r.Method, ContentType: r.ContentType, SizeBytes: r.SizeBytes,
		Outcome: gen.SourceRequestOutcome(r.Outcome), Status: r.Status, Reason: r.Reason, Detail: r.Detail,
		EventId: r.EventID, Headers: headers, BodyExcerpt: strings.ToValidUTF8(string(r.BodyExcerpt), "\uFFFD"),
		BodyTruncated: r.BodyTruncated}
}
