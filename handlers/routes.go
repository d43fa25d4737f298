package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// SendToPerson answers POST /api/v1/people/{person_id}/messages.
func (s *Server) SendToPerson(ctx context.Context, req gen.SendToPersonRequestObject) (gen.SendToPersonResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.channels.SendToPerson(ctx, key.WorkspaceID, req.PersonId, keyScope(key), routeDraftOf(*req.Body))
	if err != nil {
		return nil, err
	}
	location := "/api/v1/routes/" + r.ID
	return gen.SendToPerson202JSONResponse{Body: channels.RouteAPI(r),
		Headers: gen.SendToPerson202ResponseHeaders{Location: &location}}, nil
}

// routeDraftOf is the service's RouteDraft of the API's RouteCreate.
func routeDraftOf(in gen.RouteCreate) channels.RouteDraft {
	d := channels.RouteDraft{Message: store.RouteMessage{Type: string(in.Message.Type), Text: in.Message.Text},
		Steps: make([]channels.RouteStepDraft, len(in.Steps))}
	if m := in.Message.Media; m != nil {
		d.Message.Media = &store.RouteMedia{MediaID: m.MediaId, URL: m.Url, Caption: m.Caption, Filename: m.Filename}
	}
	for i, st := range in.Steps {
		d.Steps[i] = channels.RouteStepDraft{InstanceID: st.InstanceId, Provider: st.Provider, Until: string(st.Until),
			WithinSeconds: st.WithinSeconds}
	}
	return d
}

// ListRoutes answers GET /api/v1/routes.
func (s *Server) ListRoutes(ctx context.Context, req gen.ListRoutesRequestObject) (gen.ListRoutesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "rte_", false)
	if err != nil {
		return nil, err
	}
	var f store.RouteFilter
	if req.Params.PersonId != nil {
		f.PersonID = *req.Params.PersonId
	}
	if req.Params.Status != nil {
		f.Status = string(*req.Params.Status)
	}
	rows, more, err := s.channels.ListRoutes(ctx, key.WorkspaceID, f, keyScope(key), page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(r store.Route) string { return r.ID },
		func(r store.Route) (gen.Route, error) { return channels.RouteAPI(r), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListRoutes200JSONResponse{Body: gen.RouteList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetRoute answers GET /api/v1/routes/{route_id}.
func (s *Server) GetRoute(ctx context.Context, req gen.GetRouteRequestObject) (gen.GetRouteResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.channels.GetRoute(ctx, key.WorkspaceID, req.RouteId, keyScope(key))
	if err != nil {
		return nil, err
	}
	return gen.GetRoute200JSONResponse{Body: channels.RouteAPI(r)}, nil
}
