package webhook

import (
	"context"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// Events returns a page of a workspace's event log and whether more follow. Its errors are internal.
func (s *Service) Events(ctx context.Context, workspaceID string, f store.EventFilter, p store.Page) ([]events.Event, bool, error) {
	evs, more, err := s.db.Events.List(ctx, workspaceID, f, p)
	return events.OfAll(evs), more, err
}

// Event returns an event of a workspace. Returns a NotFound problem if it is not in the workspace.
func (s *Service) Event(ctx context.Context, workspaceID, id string) (events.Event, error) {
	ev, err := s.db.Events.Get(ctx, workspaceID, id)
	return events.Of(ev), clientError(err, "event", id)
}

// Deliveries returns a page of the delivery log of an endpoint of a workspace and whether more follow. Returns a
// NotFound problem if the endpoint is not in the workspace.
func (s *Service) Deliveries(ctx context.Context, workspaceID, endpointID string, f DeliveryFilter, p store.Page) ([]Delivery, bool, error) {
	ds, more, err := s.db.Deliveries.List(ctx, workspaceID, endpointID, store.DeliveryFilter(f), p)
	if err != nil {
		return nil, false, clientError(err, "webhook endpoint", endpointID)
	}
	return deliveriesOf(ds), more, nil
}

// DeliveryDetail is one delivery with its attempts, oldest first, and the event as it was signed and sent.
type DeliveryDetail struct {
	Delivery Delivery
	Attempts []Attempt
	Event    events.Event
}

// Delivery returns a delivery of a workspace with its attempts and event. Returns a NotFound problem if it is not in
// the workspace.
func (s *Service) Delivery(ctx context.Context, workspaceID, id string) (DeliveryDetail, error) {
	d, err := s.db.Deliveries.Get(ctx, workspaceID, id)
	if err != nil {
		return DeliveryDetail{}, clientError(err, "delivery", id)
	}
	attempts, err := s.db.Deliveries.Attempts(ctx, d.ID)
	if err != nil {
		return DeliveryDetail{}, err
	}
	ev, err := s.db.Events.Get(ctx, workspaceID, d.EventID)
	if err != nil {
		return DeliveryDetail{}, err // the delivery's event goes only with it (ON DELETE CASCADE)
	}
	return DeliveryDetail{Delivery: deliveryOf(d), Attempts: attemptsOf(attempts), Event: events.Of(ev)}, nil
}

// Redeliver queues a delivery of a workspace for an attempt now, whatever its status, with a fresh retry schedule;
// it keeps its webhook-id and its attempt log. Returns a NotFound problem if it is not in the workspace, a
// DeliveryInFlight problem while a dispatcher attempts it and a WebhookDisabled problem if its endpoint is disabled.
func (s *Service) Redeliver(ctx context.Context, workspaceID, id string) (Delivery, error) {
	d, err := s.db.Deliveries.Redeliver(ctx, workspaceID, id)
	if err != nil {
		return Delivery{}, clientError(err, "delivery", id)
	}
	s.wake()
	return deliveryOf(d), nil
}
