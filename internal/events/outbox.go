package events

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/store"
)

// Outbox records events in the transaction of the change that caused them, with one delivery for each webhook
// endpoint that receives them: the change, its event and its deliveries commit or vanish together, and the webhook
// dispatcher sends what committed.
type Outbox struct {
	db    *store.DB
	types *Registry
}

// NewOutbox returns the outbox of a database for the types of a registry.
func NewOutbox(db *store.DB, types *Registry) *Outbox { return &Outbox{db: db, types: types} }

// Types is the registry the outbox names events with.
func (o *Outbox) Types() *Registry { return o.types }

// Pending is an event to record: the workspace it happened in and its data, a value of a generated payload type
// (its event type follows from the Go type).
type Pending struct {
	WorkspaceID string
	Payload     any
	// InstanceID is the messaging instance the event is about ("" for events of no instance): endpoints with an
	// instance filter receive it only when it names the instance.
	InstanceID string
}

// Emit records one event inside tx. It fails only on a payload that is not a registered type (a programming error)
// or a database error.
func (o *Outbox) Emit(ctx context.Context, tx store.Querier, workspaceID string, payload any) (store.Event, error) {
	evs, err := o.EmitMany(ctx, tx, []Pending{{WorkspaceID: workspaceID, Payload: payload}})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// EmitMany records many events inside tx in a few statements (one read of the endpoints of their workspaces,
// multi-row inserts of the events and of their deliveries); the events are returned in the order of ps.
func (o *Outbox) EmitMany(ctx context.Context, tx store.Querier, ps []Pending) ([]store.Event, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	items := make([]recorded, len(ps))
	for i, p := range ps {
		t, err := o.types.TypeOf(p.Payload)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(p.Payload)
		if err != nil {
			return nil, fmt.Errorf("events: encode %s: %w", t.Name, err)
		}
		items[i] = recorded{workspaceID: p.WorkspaceID, instanceID: p.InstanceID, typ: t, data: data}
	}
	return o.record(ctx, tx, items)
}

// EmitJSON records an event of any type the workspace sees with data already encoded: the way to publish a type
// defined at run time, whose data its owner checked against the type's schema.
func (o *Outbox) EmitJSON(ctx context.Context, tx store.Querier, workspaceID, typeName string, data json.RawMessage) (store.Event, error) {
	t, ok := o.types.Lookup(workspaceID, typeName)
	if !ok {
		return store.Event{}, fmt.Errorf("events: workspace %s has no event type %s", workspaceID, typeName)
	}
	evs, err := o.record(ctx, tx, []recorded{{workspaceID: workspaceID, typ: t, data: data}})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// recorded is an event on its way into the outbox.
type recorded struct {
	workspaceID string
	instanceID  string
	typ         Type
	data        json.RawMessage
}

// record writes the events and a delivery to each endpoint of their workspace that receives them (its patterns
// name the type and its filters hold for the data). Deliveries to
// active and paused endpoints are pending (a paused endpoint's wait until it resumes); to disabled endpoints they
// are recorded as skipped, so that enabling or recovering the endpoint can still send them.
func (o *Outbox) record(ctx context.Context, tx store.Querier, items []recorded) ([]store.Event, error) {
	workspaces := make([]string, len(items))
	for i, it := range items {
		workspaces[i] = it.workspaceID
	}
	endpoints, err := o.db.Webhooks.Subscriptions(ctx, tx, workspaces)
	if err != nil {
		return nil, err
	}
	t := time.Now().UTC().Truncate(time.Microsecond)
	evs := make([]store.Event, len(items))
	var deliveries []store.Delivery
	for i, it := range items {
		evs[i] = store.Event{ID: store.NewID("evt"), WorkspaceID: it.workspaceID, Type: it.typ.Name, Data: it.data,
			CreatedAt: t, InstanceID: it.instanceID}
		var decoded any
		decodedOK := false
		for _, e := range endpoints[it.workspaceID] {
			if !Receives(e.Events, it.typ) || !forInstance(e.InstanceIDs, it.instanceID) {
				continue
			}
			if len(e.Filters) > 0 {
				if !decodedOK {
					var err error
					if decoded, err = DecodeData(it.data); err != nil {
						return nil, fmt.Errorf("events: decode %s data for filters: %w", it.typ.Name, err)
					}
					decodedOK = true
				}
				if !Matches(e.Filters, decoded) {
					continue
				}
			}
			d := store.Delivery{ID: store.NewID("dlv"), WorkspaceID: it.workspaceID, EndpointID: e.ID,
				EventID: evs[i].ID, EventType: it.typ.Name, Status: store.DeliveryPending, NextAttemptAt: &t,
				CreatedAt: t, UpdatedAt: t}
			if e.Status == store.EndpointDisabled {
				d.Status, d.NextAttemptAt, d.CompletedAt = store.DeliverySkipped, nil, &t
			}
			deliveries = append(deliveries, d)
		}
	}
	if err := o.db.Events.Insert(ctx, tx, evs, deliveries); err != nil {
		return nil, err
	}
	return evs, nil
}

// forInstance reports whether an endpoint with an instance filter receives an event of an instance: an event of no
// instance, and every event of an endpoint without a filter, passes.
func forInstance(filter []string, instanceID string) bool {
	return instanceID == "" || len(filter) == 0 || slices.Contains(filter, instanceID)
}

// Subscribers returns the workspaces among workspaceIDs where an endpoint receives events of payload's type: the
// check that keeps opt-in events (clicks, list audits) from being written at all while nobody would receive them.
// Read it inside the transaction that emits, so that a subscription made meanwhile is seen.
func (o *Outbox) Subscribers(ctx context.Context, db store.Querier, payload any, workspaceIDs ...string) (map[string]bool, error) {
	t, err := o.types.TypeOf(payload)
	if err != nil {
		return nil, err
	}
	endpoints, err := o.db.Webhooks.Subscriptions(ctx, db, workspaceIDs)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for ws, es := range endpoints {
		if slices.ContainsFunc(es, func(e store.WebhookEndpoint) bool { return Receives(e.Events, t) }) {
			out[ws] = true
		}
	}
	return out, nil
}
