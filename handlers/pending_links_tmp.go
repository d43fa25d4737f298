package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
)

func (s *Server) ListLinks(context.Context, gen.ListLinksRequestObject) (gen.ListLinksResponseObject, error) {
	return nil, errPending
}

func (s *Server) CreateLink(context.Context, gen.CreateLinkRequestObject) (gen.CreateLinkResponseObject, error) {
	return nil, errPending
}

func (s *Server) CreateLinksBulk(context.Context, gen.CreateLinksBulkRequestObject) (gen.CreateLinksBulkResponseObject, error) {
	return nil, errPending
}

func (s *Server) UpsertLinkByExternalId(context.Context, gen.UpsertLinkByExternalIdRequestObject) (gen.UpsertLinkByExternalIdResponseObject, error) {
	return nil, errPending
}

func (s *Server) LookupLink(context.Context, gen.LookupLinkRequestObject) (gen.LookupLinkResponseObject, error) {
	return nil, errPending
}

func (s *Server) DeleteLink(context.Context, gen.DeleteLinkRequestObject) (gen.DeleteLinkResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetLink(context.Context, gen.GetLinkRequestObject) (gen.GetLinkResponseObject, error) {
	return nil, errPending
}

func (s *Server) UpdateLink(context.Context, gen.UpdateLinkRequestObject) (gen.UpdateLinkResponseObject, error) {
	return nil, errPending
}

func (s *Server) ListLinkClicks(context.Context, gen.ListLinkClicksRequestObject) (gen.ListLinkClicksResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetLinkStats(context.Context, gen.GetLinkStatsRequestObject) (gen.GetLinkStatsResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetLinkStatsByDimension(context.Context, gen.GetLinkStatsByDimensionRequestObject) (gen.GetLinkStatsByDimensionResponseObject, error) {
	return nil, errPending
}
