package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/webhook"
)

// ListWebhookDeliveries answers GET /api/v1/webhooks/{webhook_id}/deliveries: the endpoint's delivery log, newest
// first.
func (s *Server) ListWebhookDeliveries(ctx context.Context, req gen.ListWebhookDeliveriesRequestObject) (gen.ListWebhookDeliveriesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "dlv_", false)
	if err != nil {
		return nil, err
	}
	ds, more, err := s.webhooks.Deliveries(ctx, key.WorkspaceID, req.WebhookId, deliveryFilterOf(req.Params), page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(ds, more, page, func(d webhook.Delivery) string { return d.ID },
		func(d webhook.Delivery) (gen.WebhookDelivery, error) { return apiDelivery(d), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListWebhookDeliveries200JSONResponse{Body: gen.WebhookDeliveryList{Object: gen.WebhookDeliveryListObjectList,
		Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetWebhookDelivery answers GET /api/v1/webhook-deliveries/{delivery_id} with every attempt, oldest first, and the
// event as it was signed and sent.
func (s *Server) GetWebhookDelivery(ctx context.Context, req gen.GetWebhookDeliveryRequestObject) (gen.GetWebhookDeliveryResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	detail, err := s.webhooks.Delivery(ctx, key.WorkspaceID, req.DeliveryId)
	if err != nil {
		return nil, err
	}
	event, err := apiEvent(detail.Event)
	if err != nil {
		return nil, err
	}
	out := apiDelivery(detail.Delivery)
	list := make([]gen.WebhookAttempt, len(detail.Attempts))
	for i, a := range detail.Attempts {
		list[i] = apiAttempt(a)
	}
	out.Attempts, out.Event = &list, &event
	return gen.GetWebhookDelivery200JSONResponse{Body: out}, nil
}

// RedeliverWebhookDelivery answers POST /api/v1/webhook-deliveries/{delivery_id}/redeliver: the delivery is queued
// now with a fresh retry schedule, the same webhook-id and its attempt log.
func (s *Server) RedeliverWebhookDelivery(ctx context.Context, req gen.RedeliverWebhookDeliveryRequestObject) (gen.RedeliverWebhookDeliveryResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	d, err := s.webhooks.Redeliver(ctx, key.WorkspaceID, req.DeliveryId)
	if err != nil {
		return nil, err
	}
	return gen.RedeliverWebhookDelivery202JSONResponse{Body: apiDelivery(d)}, nil
}
