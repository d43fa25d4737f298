package handlers

import (
	"context"
	"errors"

	"github.com/switchboard/switchboard/gen"
)

// errPending marks operations whose handlers are being written (removed before this lands).
var errPending = errors.New("handlers: operation not implemented yet")

func (s *Server) ListEventTypes(context.Context, gen.ListEventTypesRequestObject) (gen.ListEventTypesResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetEventType(context.Context, gen.GetEventTypeRequestObject) (gen.GetEventTypeResponseObject, error) {
	return nil, errPending
}

func (s *Server) ListEvents(context.Context, gen.ListEventsRequestObject) (gen.ListEventsResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetEvent(context.Context, gen.GetEventRequestObject) (gen.GetEventResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetWebhookDelivery(context.Context, gen.GetWebhookDeliveryRequestObject) (gen.GetWebhookDeliveryResponseObject, error) {
	return nil, errPending
}

func (s *Server) RedeliverWebhookDelivery(context.Context, gen.RedeliverWebhookDeliveryRequestObject) (gen.RedeliverWebhookDeliveryResponseObject, error) {
	return nil, errPending
}

func (s *Server) ListWebhooks(context.Context, gen.ListWebhooksRequestObject) (gen.ListWebhooksResponseObject, error) {
	return nil, errPending
}

func (s *Server) CreateWebhook(context.Context, gen.CreateWebhookRequestObject) (gen.CreateWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) DeleteWebhook(context.Context, gen.DeleteWebhookRequestObject) (gen.DeleteWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) GetWebhook(context.Context, gen.GetWebhookRequestObject) (gen.GetWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) UpdateWebhook(context.Context, gen.UpdateWebhookRequestObject) (gen.UpdateWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) ListWebhookDeliveries(context.Context, gen.ListWebhookDeliveriesRequestObject) (gen.ListWebhookDeliveriesResponseObject, error) {
	return nil, errPending
}

func (s *Server) EnableWebhook(context.Context, gen.EnableWebhookRequestObject) (gen.EnableWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) PauseWebhook(context.Context, gen.PauseWebhookRequestObject) (gen.PauseWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) RecoverWebhook(context.Context, gen.RecoverWebhookRequestObject) (gen.RecoverWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) ResumeWebhook(context.Context, gen.ResumeWebhookRequestObject) (gen.ResumeWebhookResponseObject, error) {
	return nil, errPending
}

func (s *Server) RotateWebhookSecret(context.Context, gen.RotateWebhookSecretRequestObject) (gen.RotateWebhookSecretResponseObject, error) {
	return nil, errPending
}

func (s *Server) TestWebhook(context.Context, gen.TestWebhookRequestObject) (gen.TestWebhookResponseObject, error) {
	return nil, errPending
}
