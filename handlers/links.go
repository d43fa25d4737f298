package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/links"
)

func linkLocation(id string) *string {
	loc := "/api/v1/links/" + id
	return &loc
}

// CreateLink answers POST /api/v1/links.
func (s *Server) CreateLink(ctx context.Context, req gen.CreateLinkRequestObject) (gen.CreateLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.links.Create(ctx, key.WorkspaceID, links.NewLinkOf(*req.Body))
	if err != nil {
		return nil, err
	}
	return gen.CreateLink201JSONResponse{Body: s.links.API(l), Headers: gen.CreateLink201ResponseHeaders{Location: linkLocation(l.ID)}}, nil
}

// CreateLinksBulk answers POST /api/v1/links/bulk: every item gets its outcome in request order, and the answer is
// 200 whatever they are.
func (s *Server) CreateLinksBulk(ctx context.Context, req gen.CreateLinksBulkRequestObject) (gen.CreateLinksBulkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ins := make([]links.NewLink, len(req.Body.Links))
	for i, in := range req.Body.Links {
		// An item is a createLink body whose URLs the schema leaves unchecked (the service checks them per item).
		ins[i] = links.NewLinkOf(gen.LinkCreate(in))
	}
	outcomes := s.links.CreateMany(ctx, key.WorkspaceID, ins)
	out := gen.LinkBulkResult{Object: "bulk_result", Data: make([]gen.LinkBulkItem, len(outcomes))}
	for i, o := range outcomes {
		if o.Err != nil {
			e := gen.BulkItemError{Code: gen.ProblemCode(o.Err.Code), Status: o.Err.Status(), Detail: o.Err.Detail}
			if len(o.Err.Fields) > 0 {
				errs := fieldErrors(o.Err.Fields)
				e.Errors = &errs
			}
			out.Data[i] = gen.LinkBulkItem{Index: i, Status: gen.LinkBulkItemStatusFailed, Error: &e}
			out.Failed++
			continue
		}
		link := s.links.API(o.Link)
		out.Data[i] = gen.LinkBulkItem{Index: i, Status: gen.LinkBulkItemStatusCreated, Link: &link}
		out.Created++
	}
	return gen.CreateLinksBulk200JSONResponse{Body: out}, nil
}

// GetLink answers GET /api/v1/links/{link_id}.
func (s *Server) GetLink(ctx context.Context, req gen.GetLinkRequestObject) (gen.GetLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.links.Get(ctx, key.WorkspaceID, req.LinkId)
	if err != nil {
		return nil, err
	}
	return gen.GetLink200JSONResponse{Body: s.links.API(l)}, nil
}

// LookupLink answers GET /api/v1/links/lookup: the workspace's link at a short URL, whatever the slug's case.
func (s *Server) LookupLink(ctx context.Context, req gen.LookupLinkRequestObject) (gen.LookupLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.links.Lookup(ctx, key.WorkspaceID, req.Params.Domain, req.Params.Slug)
	if err != nil {
		return nil, err
	}
	return gen.LookupLink200JSONResponse{Body: s.links.API(l)}, nil
}

// UpdateLink answers PATCH /api/v1/links/{link_id}.
func (s *Server) UpdateLink(ctx context.Context, req gen.UpdateLinkRequestObject) (gen.UpdateLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.links.Update(ctx, key.WorkspaceID, req.LinkId, links.UpdateOf(*req.Body))
	if err != nil {
		return nil, err
	}
	return gen.UpdateLink200JSONResponse{Body: s.links.API(l)}, nil
}

// UpsertLinkByExternalId answers PUT /api/v1/links/external/{external_id}: 201 with a new link, 200 with the
// existing one replaced.
func (s *Server) UpsertLinkByExternalId(ctx context.Context, req gen.UpsertLinkByExternalIdRequestObject) (gen.UpsertLinkByExternalIdResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	l, created, err := s.links.Upsert(ctx, key.WorkspaceID, req.ExternalId, links.NewLinkOf(gen.LinkCreate{
		DestinationUrl: b.DestinationUrl, Slug: b.Slug, Domain: b.Domain, Title: b.Title, Tags: b.Tags, Utm: b.Utm,
		ExpiresAt: b.ExpiresAt, ExpiredUrl: b.ExpiredUrl, MaxClicks: b.MaxClicks, RedirectType: b.RedirectType,
		ForwardQuery: b.ForwardQuery, Metadata: b.Metadata, Archived: b.Archived,
	}))
	if err != nil {
		return nil, err
	}
	if created {
		return gen.UpsertLinkByExternalId201JSONResponse{Body: s.links.API(l),
			Headers: gen.UpsertLinkByExternalId201ResponseHeaders{Location: linkLocation(l.ID)}}, nil
	}
	return gen.UpsertLinkByExternalId200JSONResponse{Body: s.links.API(l)}, nil
}

// DeleteLink answers DELETE /api/v1/links/{link_id}.
func (s *Server) DeleteLink(ctx context.Context, req gen.DeleteLinkRequestObject) (gen.DeleteLinkResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.links.Delete(ctx, key.WorkspaceID, req.LinkId); err != nil {
		return nil, err
	}
	return gen.DeleteLink204Response{}, nil
}

// ListLinks answers GET /api/v1/links.
func (s *Server) ListLinks(ctx context.Context, req gen.ListLinksRequestObject) (gen.ListLinksResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	page, err := pageFrom(q.Limit, q.Cursor, "lnk_", false)
	if err != nil {
		return nil, err
	}
	ls, more, err := s.links.List(ctx, key.WorkspaceID, key.ID, links.ListQuery{
		Query: q.Q, Tag: q.Tag, Domain: q.Domain, ExternalID: q.ExternalId, Archived: q.Archived, Expired: q.Expired,
		CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore, Limit: q.Limit, Page: page,
	})
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(ls, more, page, func(l links.Link) string { return l.ID },
		func(l links.Link) (gen.Link, error) { return s.links.API(l), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListLinks200JSONResponse{Body: gen.LinkList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}
