package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// ListEvents answers GET /api/v1/events: newest first, or with after=evt_… oldest first from that event (the pull
// fallback of a receiver that was down and the polling trigger of workflow tools). The cursor carries the
// direction, so next_cursor keeps going the way the first page went.
func (s *Server) ListEvents(ctx context.Context, req gen.ListEventsRequestObject) (gen.ListEventsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "evt_", true)
	if err != nil {
		return nil, err
	}
	if req.Params.Cursor == nil && req.Params.After != nil {
		page.After = *req.Params.After
	}
	var f store.EventFilter
	if req.Params.Type != nil {
		f.Type = *req.Params.Type
	}
	if key.Limited() {
		f.Instances = key.InstanceIDs
	}
	evs, more, err := s.webhooks.Events(ctx, key.WorkspaceID, f, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(evs, more, page, func(ev events.Event) string { return ev.ID }, apiEvent)
	if err != nil {
		return nil, err
	}
	return gen.ListEvents200JSONResponse{Body: gen.EventList{Object: gen.EventListObjectList, Data: data,
		HasMore: more, NextCursor: next}}, nil
}

// GetEvent answers GET /api/v1/events/{event_id}.
func (s *Server) GetEvent(ctx context.Context, req gen.GetEventRequestObject) (gen.GetEventResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ev, err := s.webhooks.Event(ctx, key.WorkspaceID, req.EventId)
	if err != nil {
		return nil, err
	}
	if ev.InstanceID != "" && !key.Reaches(ev.InstanceID) {
		// An event of an instance the key does not reach is another workspace's to it.
		return nil, problem.Errorf(problem.NotFound, "There is no event %s in this workspace.", req.EventId)
	}
	out, err := apiEvent(ev)
	if err != nil {
		return nil, err
	}
	return gen.GetEvent200JSONResponse{Body: out}, nil
}

// apiEvent maps a stored event to the envelope deliveries carry (webhook.EnvelopeOf), as the API's Event.
func apiEvent(ev events.Event) (gen.Event, error) {
	env := webhook.EnvelopeOf(ev)
	out := gen.Event{Id: env.ID, Type: env.Type, Timestamp: ev.CreatedAt.UTC(), ApiVersion: gen.EventApiVersion(env.APIVersion),
		WorkspaceId: env.WorkspaceID}
	if err := json.Unmarshal(env.Data, &out.Data); err != nil {
		return gen.Event{}, fmt.Errorf("event %s: data: %w", ev.ID, err)
	}
	return out, nil
}
