package handlers

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
)

// ListEventTypes answers GET /api/v1/event-types with the whole catalogue.
func (s *Server) ListEventTypes(ctx context.Context, _ gen.ListEventTypesRequestObject) (gen.ListEventTypesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	return gen.ListEventTypes200JSONResponse{Body: gen.EventTypeList{Object: gen.EventTypeListObjectList, Data: apiEventTypes(s.events.Types().Types(key.WorkspaceID))}}, nil
}

// GetEventType answers GET /api/v1/event-types/{event_type}.
func (s *Server) GetEventType(ctx context.Context, req gen.GetEventTypeRequestObject) (gen.GetEventTypeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	t, ok := s.events.Types().Lookup(key.WorkspaceID, req.EventType)
	if !ok {
		return nil, newProblem(problem.NotFound, fmt.Sprintf("There is no event type %q. GET /api/v1/event-types lists them.", req.EventType))
	}
	return gen.GetEventType200JSONResponse{Body: apiEventType(t)}, nil
}

// apiEventType is an event type of the catalogue as the API shows it.
func apiEventType(t events.Type) gen.EventType {
	return gen.EventType{Object: gen.EventTypeObjectEventType, Name: t.Name, Family: t.Family,
		Description: t.Description, OptIn: t.OptIn, Schema: t.Schema, Example: t.Example}
}

func apiEventTypes(ts []events.Type) []gen.EventType {
	out := make([]gen.EventType, len(ts))
	for i, t := range ts {
		out[i] = apiEventType(t)
	}
	return out
}
