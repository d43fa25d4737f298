package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/automation"
)

// GetMe answers GET /api/v1/me: the key of the request and its workspace (the connection test of workflow tools).
func (s *Server) GetMe(ctx context.Context, _ gen.GetMeRequestObject) (gen.GetMeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	w, err := s.automation.Workspace(ctx, key.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var me gen.Me
	me.Object = gen.MeObjectMe
	me.Workspace.Id, me.Workspace.Name = w.ID, w.Name
	me.Key.Id, me.Key.Name, me.Key.Scopes = key.ID, key.Name, append([]string{}, key.Scopes...)
	me.Key.Origins = append([]string{}, key.Origins...)
	me.Key.InstanceIds = append([]gen.InstanceID{}, key.InstanceIDs...)
	me.Key.Kind = gen.MeKeyKind(key.Kind)
	if key.Browser() {
		me.Key.Browser = &gen.BrowserKeyJob{Scope: gen.BrowserKeyJobScope(firstScope(key.Scopes)), DailyQuota: key.DailyQuota}
		if key.ScopeTarget != "" {
			me.Key.Browser.Target = &key.ScopeTarget
		}
	}
	return gen.GetMe200JSONResponse{Body: me}, nil
}

// PublishEvent answers POST /api/v1/events with the event of a custom type it stored.
func (s *Server) PublishEvent(ctx context.Context, req gen.PublishEventRequestObject) (gen.PublishEventResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := browserEventType(key, req.Body.Type); err != nil {
		return nil, err
	}
	ev, err := s.automation.Publish(ctx, key.WorkspaceID, req.Body.Type, req.Body.Data)
	if err != nil {
		return nil, err
	}
	out, err := apiEvent(ev)
	if err != nil {
		return nil, err
	}
	location := "/api/v1/events/" + ev.ID
	return gen.PublishEvent201JSONResponse{Body: out, Headers: gen.PublishEvent201ResponseHeaders{Location: &location}}, nil
}

// CreateEventType answers POST /api/v1/event-types with the new custom type.
func (s *Server) CreateEventType(ctx context.Context, req gen.CreateEventTypeRequestObject) (gen.CreateEventTypeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	n := automation.NewType{Name: req.Body.Name, Description: req.Body.Description, Schema: req.Body.Schema}
	if req.Body.Example != nil {
		n.Example = *req.Body.Example
	}
	t, err := s.automation.CreateType(ctx, key.WorkspaceID, n)
	if err != nil {
		return nil, err
	}
	location := "/api/v1/event-types/" + t.Name
	return gen.CreateEventType201JSONResponse{Body: apiEventType(t),
		Headers: gen.CreateEventType201ResponseHeaders{Location: &location}}, nil
}

// UpdateEventType answers PATCH /api/v1/event-types/{event_type} for the workspace's custom types.
func (s *Server) UpdateEventType(ctx context.Context, req gen.UpdateEventTypeRequestObject) (gen.UpdateEventTypeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	c := automation.TypeChange{Description: b.Description, Archived: b.Archived}
	if b.Schema != nil {
		c.Schema = *b.Schema
	}
	if b.Example != nil {
		c.Example = *b.Example
	}
	t, err := s.automation.UpdateType(ctx, key.WorkspaceID, req.EventType, c)
	if err != nil {
		return nil, err
	}
	return gen.UpdateEventType200JSONResponse{Body: apiEventType(t)}, nil
}
