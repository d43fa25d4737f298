package events

import (
	"encoding/json"
	"time"

	"github.com/switchboard/switchboard/store"
)

// Event is a recorded event as the services give it to the API, the console and the CLI: the event log's row
// without the store's mapping, so that an adapter maps it to the API's envelope without depending on the store.
type Event struct {
	ID          string
	WorkspaceID string
	Type        string
	Data        json.RawMessage
	CreatedAt   time.Time
	// InstanceID is the messaging instance the event is about, "" for none.
	InstanceID string
}

// Of is the Event of a stored event.
func Of(e store.Event) Event {
	return Event{ID: e.ID, WorkspaceID: e.WorkspaceID, Type: e.Type, Data: e.Data, CreatedAt: e.CreatedAt,
		InstanceID: e.InstanceID}
}

// OfAll is Of of every stored event.
func OfAll(es []store.Event) []Event {
	out := make([]Event, len(es))
	for i, e := range es {
		out[i] = Of(e)
	}
	return out
}
