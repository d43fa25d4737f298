package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
)

// ListEventTypes answers GET /api/v1/event-types with the whole catalogue.
func (s *Server) ListEventTypes(ctx context.Context, _ gen.ListEventTypesRequestObject) (gen.ListEventTypesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	types, err := s.automation.Types(ctx, key.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return gen.ListEventTypes200JSONResponse{Body: gen.EventTypeList{Object: gen.EventTypeListObjectList, Data: apiEventTypes(types)}}, nil
}

// GetEventType answers GET /api/v1/event-types/{event_type}.
func (s *Server) GetEventType(ctx context.Context, req gen.GetEventTypeRequestObject) (gen.GetEventTypeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.automation.Type(ctx, key.WorkspaceID, req.EventType)
	if err != nil {
		return nil, err
	}
	return gen.GetEventType200JSONResponse{Body: apiEventType(t)}, nil
}

// apiEventType is an event type of the catalogue as the API shows it.
func apiEventType(t events.Type) gen.EventType {
	return gen.EventType{Object: gen.EventTypeObjectEventType, Name: t.Name, Family: t.Family,
		Description: t.Description, OptIn: t.OptIn, Custom: t.WorkspaceID != "", Archived: t.Archived, Schema: t.Schema,
		Example: t.Example}
}

func apiEventTypes(ts []events.Type) []gen.EventType {
	out := make([]gen.EventType, len(ts))
	for i, t := range ts {
		out[i] = apiEventType(t)
	}
	return out
}
