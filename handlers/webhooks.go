package handlers

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/webhook"
)

// CreateWebhook answers POST /api/v1/webhooks with the new endpoint and its signing secret, shown this once.
func (s *Server) CreateWebhook(ctx context.Context, req gen.CreateWebhookRequestObject) (gen.CreateWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	n := NewEndpointOf(*req.Body)
	if n.InstanceIDs, err = keyInstances(key, n.InstanceIDs, bodyInstance); err != nil {
		return nil, err
	}
	e, secret, err := s.webhooks.Create(ctx, key.WorkspaceID, n)
	if err != nil {
		return nil, err
	}
	location := "/api/v1/webhooks/" + e.ID
	return gen.CreateWebhook201JSONResponse{Body: withSecret(apiWebhook(e), secret),
		Headers: gen.CreateWebhook201ResponseHeaders{Location: &location}}, nil
}

// ListWebhooks answers GET /api/v1/webhooks, newest first.
func (s *Server) ListWebhooks(ctx context.Context, req gen.ListWebhooksRequestObject) (gen.ListWebhooksResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "whk_", false)
	if err != nil {
		return nil, err
	}
	es, more, err := s.webhooks.List(ctx, key.WorkspaceID, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(es, more, page, func(e webhook.Endpoint) string { return e.ID },
		func(e webhook.Endpoint) (gen.Webhook, error) { return apiWebhook(e), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListWebhooks200JSONResponse{Body: gen.WebhookList{Object: gen.WebhookListObjectList, Data: data,
		HasMore: more, NextCursor: next}}, nil
}

// GetWebhook answers GET /api/v1/webhooks/{webhook_id}; the secret is never shown again.
func (s *Server) GetWebhook(ctx context.Context, req gen.GetWebhookRequestObject) (gen.GetWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.webhooks.Get(ctx, key.WorkspaceID, req.WebhookId)
	if err != nil {
		return nil, err
	}
	return gen.GetWebhook200JSONResponse{Body: apiWebhook(e)}, nil
}

// UpdateWebhook answers PATCH /api/v1/webhooks/{webhook_id}: the fields sent change.
func (s *Server) UpdateWebhook(ctx context.Context, req gen.UpdateWebhookRequestObject) (gen.UpdateWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c := EndpointChangeOf(*req.Body)
	if c.InstanceIDs != nil {
		// A limited key narrows the filter it sets; one it leaves alone stays as it is.
		ids, err := keyInstances(key, *c.InstanceIDs, bodyInstance)
		if err != nil {
			return nil, err
		}
		c.InstanceIDs = &ids
	}
	e, err := s.webhooks.Update(ctx, key.WorkspaceID, req.WebhookId, c)
	if err != nil {
		return nil, err
	}
	return gen.UpdateWebhook200JSONResponse{Body: apiWebhook(e)}, nil
}

// DeleteWebhook answers DELETE /api/v1/webhooks/{webhook_id}; its delivery log goes with it.
func (s *Server) DeleteWebhook(ctx context.Context, req gen.DeleteWebhookRequestObject) (gen.DeleteWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.webhooks.Delete(ctx, key.WorkspaceID, req.WebhookId); err != nil {
		return nil, err
	}
	return gen.DeleteWebhook204Response{}, nil
}

// PauseWebhook answers POST /api/v1/webhooks/{webhook_id}/pause.
func (s *Server) PauseWebhook(ctx context.Context, req gen.PauseWebhookRequestObject) (gen.PauseWebhookResponseObject, error) {
	w, err := s.webhookState(ctx, func(workspaceID string) (webhook.Endpoint, error) {
		return s.webhooks.Pause(ctx, workspaceID, req.WebhookId)
	})
	if err != nil {
		return nil, err
	}
	return gen.PauseWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// ResumeWebhook answers POST /api/v1/webhooks/{webhook_id}/resume; what queued while paused becomes due.
func (s *Server) ResumeWebhook(ctx context.Context, req gen.ResumeWebhookRequestObject) (gen.ResumeWebhookResponseObject, error) {
	w, err := s.webhookState(ctx, func(workspaceID string) (webhook.Endpoint, error) {
		return s.webhooks.Resume(ctx, workspaceID, req.WebhookId)
	})
	if err != nil {
		return nil, err
	}
	return gen.ResumeWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// EnableWebhook answers POST /api/v1/webhooks/{webhook_id}/enable: active again whatever its state, and with
// recover_since, what it missed queued again.
func (s *Server) EnableWebhook(ctx context.Context, req gen.EnableWebhookRequestObject) (gen.EnableWebhookResponseObject, error) {
	var since *time.Time
	if req.Body != nil {
		since = req.Body.RecoverSince
	}
	w, err := s.webhookState(ctx, func(workspaceID string) (webhook.Endpoint, error) {
		return s.webhooks.Enable(ctx, workspaceID, req.WebhookId, since)
	})
	if err != nil {
		return nil, err
	}
	return gen.EnableWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// webhookState makes a status change of an endpoint of the key's workspace and answers with the endpoint.
func (s *Server) webhookState(ctx context.Context, change func(workspaceID string) (webhook.Endpoint, error)) (gen.Webhook, error) {
	key, err := principal(ctx)
	if err != nil {
		return gen.Webhook{}, err
	}
	e, err := change(key.WorkspaceID)
	if err != nil {
		return gen.Webhook{}, err
	}
	return apiWebhook(e), nil
}

// RecoverWebhook answers POST /api/v1/webhooks/{webhook_id}/recover: the failed and skipped deliveries of a window
// are queued again with their webhook-id.
func (s *Server) RecoverWebhook(ctx context.Context, req gen.RecoverWebhookRequestObject) (gen.RecoverWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.webhooks.Recover(ctx, key.WorkspaceID, req.WebhookId, req.Body.Since, req.Body.Until)
	if err != nil {
		return nil, err
	}
	return gen.RecoverWebhook202JSONResponse{Body: gen.WebhookRecovery{Object: gen.WebhookRecoveryObjectWebhookRecovery,
		WebhookId: req.WebhookId, Since: r.Since, Until: r.Until, Queued: r.Queued}}, nil
}

// RotateWebhookSecret answers POST /api/v1/webhooks/{webhook_id}/rotate-secret with the new secret, shown this once.
func (s *Server) RotateWebhookSecret(ctx context.Context, req gen.RotateWebhookSecretRequestObject) (gen.RotateWebhookSecretResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var grace *time.Duration
	if req.Body != nil && req.Body.GracePeriodSeconds != nil {
		g := time.Duration(*req.Body.GracePeriodSeconds) * time.Second
		grace = &g
	}
	e, secret, err := s.webhooks.RotateSecret(ctx, key.WorkspaceID, req.WebhookId, grace)
	if err != nil {
		return nil, err
	}
	return gen.RotateWebhookSecret200JSONResponse{Body: withSecret(apiWebhook(e), secret)}, nil
}

// TestWebhook answers POST /api/v1/webhooks/{webhook_id}/test with what one signed event, sent now, produced.
func (s *Server) TestWebhook(ctx context.Context, req gen.TestWebhookRequestObject) (gen.TestWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var eventType string
	if req.Body != nil && req.Body.EventType != nil {
		eventType = *req.Body.EventType
	}
	r, err := s.webhooks.Test(ctx, key.WorkspaceID, req.WebhookId, eventType)
	if err != nil {
		return nil, err
	}
	res := gen.WebhookTestResult{Object: gen.WebhookTestResultObjectWebhookTest, EventId: r.EventID, EventType: r.EventType,
		Success: r.Delivered, DurationMs: int(r.Duration.Milliseconds()), StatusCode: r.StatusCode,
		ResponseExcerpt: r.Excerpt}
	if r.ErrorClass != "" {
		res.ErrorClass = &r.ErrorClass
	}
	return gen.TestWebhook200JSONResponse{Body: res}, nil
}

// withSecret is the answer of create and rotate-secret: the endpoint and its new secret.
func withSecret(w gen.Webhook, secret string) gen.WebhookWithSecret {
	out := gen.WebhookWithSecret{Id: w.Id, Object: gen.WebhookWithSecretObject(w.Object), Url: w.Url,
		Description: w.Description, Events: w.Events, InstanceIds: w.InstanceIds, HeaderNames: w.HeaderNames, RateLimit: w.RateLimit,
		Status: gen.WebhookWithSecretStatus(w.Status), FailingSince: w.FailingSince,
		PreviousSecretExpiresAt: w.PreviousSecretExpiresAt, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Secret: secret,
		Kind: w.Kind, ExpiresAt: w.ExpiresAt, Filters: w.Filters, Type: w.Type, Rabbitmq: w.Rabbitmq, Nats: w.Nats, Mqtt: w.Mqtt}
	if w.DisabledReason != nil {
		reason := gen.WebhookWithSecretDisabledReason(*w.DisabledReason)
		out.DisabledReason = &reason
	}
	return out
}
