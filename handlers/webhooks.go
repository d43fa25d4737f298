package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Webhook endpoint limits the spec does not state as schema constraints.
const (
	// defaultGracePeriod is how long a rotated secret keeps signing when rotate-secret does not say.
	defaultGracePeriod = 24 * time.Hour
	// maxRecoverAge is how far back recover and enable's recover_since reach.
	maxRecoverAge = 14 * 24 * time.Hour
	// maxHeaderNameLen bounds a static header's name (header_names items are at most 256 characters).
	maxHeaderNameLen = 256
	// pingMessage is the data.message of a webhook.ping.
	pingMessage = "Hello from Switchboard."
)

// CreateWebhook answers POST /api/v1/webhooks: it checks the URL, subscriptions and static headers, generates the
// signing secret, stores it and the headers sealed, and shows the secret this once.
func (s *Server) CreateWebhook(ctx context.Context, req gen.CreateWebhookRequestObject) (gen.CreateWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	var bad problem.Fields
	s.checkURL(ctx, b.Url, &bad)
	s.checkEvents(key.WorkspaceID, b.Events, &bad)
	if b.Headers != nil {
		checkHeaders(*b.Headers, &bad)
	}
	if p := fieldsProblem(bad); p != nil {
		return nil, p
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	box := s.cfg.Webhooks.Box
	n := store.NewWebhookEndpoint{WorkspaceID: key.WorkspaceID, URL: b.Url, Events: b.Events, RateLimit: b.RateLimit,
		SealSecret: func(id string) string { return box.Seal([]byte(secret), []byte(id)) }}
	if b.Description != nil {
		n.Description = *b.Description
	}
	if b.Headers != nil {
		n.SealHeaders = func(id string) *string { return box.SealHeaders(*b.Headers, id) }
	}
	e, err := s.db.Webhooks.Create(ctx, n)
	if err != nil {
		return nil, storeProblem(err, "workspace", key.WorkspaceID)
	}
	w := s.apiWebhook(e)
	location := "/api/v1/webhooks/" + e.ID
	return gen.CreateWebhook201JSONResponse{Body: withSecret(w, secret),
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
	es, more, err := s.db.Webhooks.List(ctx, key.WorkspaceID, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(es, more, page, func(e store.WebhookEndpoint) string { return e.ID },
		func(e store.WebhookEndpoint) (gen.Webhook, error) { return s.apiWebhook(e), nil })
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
	e, err := s.db.Webhooks.Get(ctx, key.WorkspaceID, req.WebhookId)
	if err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	w := s.apiWebhook(e)
	return gen.GetWebhook200JSONResponse{Body: w}, nil
}

// UpdateWebhook answers PATCH /api/v1/webhooks/{webhook_id}: the fields sent change, checked as at creation.
func (s *Server) UpdateWebhook(ctx context.Context, req gen.UpdateWebhookRequestObject) (gen.UpdateWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	c := store.WebhookEndpointChange{URL: b.Url, Description: b.Description}
	var bad problem.Fields
	if b.Url != nil {
		s.checkURL(ctx, *b.Url, &bad)
	}
	if b.Events != nil {
		s.checkEvents(key.WorkspaceID, *b.Events, &bad)
		c.Events = *b.Events
	}
	if b.Headers != nil {
		checkHeaders(*b.Headers, &bad)
		c.SetHeaders, c.SealedHeaders = true, s.cfg.Webhooks.Box.SealHeaders(*b.Headers, req.WebhookId)
	}
	if b.RateLimit.IsSpecified() {
		c.SetRateLimit = true
		if !b.RateLimit.IsNull() {
			limit := b.RateLimit.MustGet()
			c.RateLimit = &limit
		}
	}
	if p := fieldsProblem(bad); p != nil {
		return nil, p
	}
	e, err := s.db.Webhooks.Update(ctx, key.WorkspaceID, req.WebhookId, c)
	if err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	w := s.apiWebhook(e)
	return gen.UpdateWebhook200JSONResponse{Body: w}, nil
}

// DeleteWebhook answers DELETE /api/v1/webhooks/{webhook_id}; its delivery log goes with it.
func (s *Server) DeleteWebhook(ctx context.Context, req gen.DeleteWebhookRequestObject) (gen.DeleteWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.db.Webhooks.Delete(ctx, key.WorkspaceID, req.WebhookId); err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	return gen.DeleteWebhook204Response{}, nil
}

// PauseWebhook answers POST /api/v1/webhooks/{webhook_id}/pause.
func (s *Server) PauseWebhook(ctx context.Context, req gen.PauseWebhookRequestObject) (gen.PauseWebhookResponseObject, error) {
	w, err := s.webhookState(ctx, req.WebhookId, s.db.Webhooks.Pause)
	if err != nil {
		return nil, err
	}
	return gen.PauseWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// ResumeWebhook answers POST /api/v1/webhooks/{webhook_id}/resume; what queued while paused becomes due.
func (s *Server) ResumeWebhook(ctx context.Context, req gen.ResumeWebhookRequestObject) (gen.ResumeWebhookResponseObject, error) {
	w, err := s.webhookState(ctx, req.WebhookId, s.db.Webhooks.Resume)
	if err != nil {
		return nil, err
	}
	s.cfg.Webhooks.Wake()
	return gen.ResumeWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// webhookState applies a status change of the store to an endpoint of the key's workspace.
func (s *Server) webhookState(ctx context.Context, id string,
	change func(ctx context.Context, workspaceID, id string) (store.WebhookEndpoint, error)) (gen.Webhook, error) {
	key, err := principal(ctx)
	if err != nil {
		return gen.Webhook{}, err
	}
	e, err := change(ctx, key.WorkspaceID, id)
	if err != nil {
		return gen.Webhook{}, storeProblem(err, "webhook endpoint", id)
	}
	return s.apiWebhook(e), nil
}

// EnableWebhook answers POST /api/v1/webhooks/{webhook_id}/enable: active again whatever its state, and with
// recover_since, what it missed queued again in the same transaction.
func (s *Server) EnableWebhook(ctx context.Context, req gen.EnableWebhookRequestObject) (gen.EnableWebhookResponseObject, error) {
	var since *time.Time
	if req.Body != nil && req.Body.RecoverSince != nil {
		if p := checkRecoverSince(*req.Body.RecoverSince, "/recover_since"); p != nil {
			return nil, p
		}
		since = req.Body.RecoverSince
	}
	w, err := s.webhookState(ctx, req.WebhookId, func(ctx context.Context, workspaceID, id string) (store.WebhookEndpoint, error) {
		e, _, err := s.db.Webhooks.Enable(ctx, workspaceID, id, since)
		return e, err
	})
	if err != nil {
		return nil, err
	}
	s.cfg.Webhooks.Wake()
	return gen.EnableWebhook200JSONResponse{WebhookStateJSONResponse: gen.WebhookStateJSONResponse{Body: w}}, nil
}

// RecoverWebhook answers POST /api/v1/webhooks/{webhook_id}/recover: the failed and skipped deliveries of a window
// are queued again with their webhook-id.
func (s *Server) RecoverWebhook(ctx context.Context, req gen.RecoverWebhookRequestObject) (gen.RecoverWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	since, until := req.Body.Since.UTC(), time.Now().UTC()
	if req.Body.Until != nil {
		until = req.Body.Until.UTC()
	}
	if p := checkRecoverSince(since, "/since"); p != nil {
		return nil, p
	}
	if !until.After(since) {
		var bad problem.Fields
		bad.Add("/until", "must be later than since")
		return nil, fieldsProblem(bad)
	}
	n, err := s.db.Deliveries.Recover(ctx, key.WorkspaceID, req.WebhookId, since, until)
	if err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	if n > 0 {
		s.cfg.Webhooks.Wake()
	}
	return gen.RecoverWebhook202JSONResponse{Body: gen.WebhookRecovery{Object: gen.WebhookRecoveryObjectWebhookRecovery,
		WebhookId: req.WebhookId, Since: since, Until: until, Queued: n}}, nil
}

// checkRecoverSince refuses a recovery that reaches further back than maxRecoverAge.
func checkRecoverSince(since time.Time, pointer string) *Problem {
	if since.Before(time.Now().Add(-maxRecoverAge)) {
		var bad problem.Fields
		bad.Add(pointer, "must be at most 14 days ago")
		return fieldsProblem(bad)
	}
	return nil
}

// RotateWebhookSecret answers POST /api/v1/webhooks/{webhook_id}/rotate-secret with the new secret, shown this once.
func (s *Server) RotateWebhookSecret(ctx context.Context, req gen.RotateWebhookSecretRequestObject) (gen.RotateWebhookSecretResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	grace := defaultGracePeriod
	if req.Body != nil && req.Body.GracePeriodSeconds != nil {
		grace = time.Duration(*req.Body.GracePeriodSeconds) * time.Second
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	sealed := s.cfg.Webhooks.Box.Seal([]byte(secret), []byte(req.WebhookId))
	e, err := s.db.Webhooks.RotateSecret(ctx, key.WorkspaceID, req.WebhookId, sealed, grace)
	if err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	w := s.apiWebhook(e)
	return gen.RotateWebhookSecret200JSONResponse{Body: withSecret(w, secret)}, nil
}

// TestWebhook answers POST /api/v1/webhooks/{webhook_id}/test: one signed event, sent now whatever the endpoint's
// status, neither stored nor retried. The receiver's failure is the answer, not an error; a refused destination
// tells nothing but "blocked", so the test cannot probe the server's network.
func (s *Server) TestWebhook(ctx context.Context, req gen.TestWebhookRequestObject) (gen.TestWebhookResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	eventType := "webhook.ping"
	if req.Body != nil && req.Body.EventType != nil {
		eventType = *req.Body.EventType
	}
	t, ok := s.events.Types().Lookup(key.WorkspaceID, eventType)
	if !ok {
		var bad problem.Fields
		bad.Add("/event_type", fmt.Sprintf("there is no event type %q; GET /api/v1/event-types lists them", eventType))
		return nil, fieldsProblem(bad)
	}
	e, err := s.db.Webhooks.Get(ctx, key.WorkspaceID, req.WebhookId)
	if err != nil {
		return nil, storeProblem(err, "webhook endpoint", req.WebhookId)
	}
	var data any = t.Example
	if eventType == "webhook.ping" {
		data = gen.WebhookPingEvent{WebhookId: e.ID, Message: pingMessage}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	ev := store.Event{ID: store.NewID("evt"), WorkspaceID: key.WorkspaceID, Type: eventType, Data: raw,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	res := gen.WebhookTestResult{Object: gen.WebhookTestResultObjectWebhookTest, EventId: ev.ID, EventType: eventType}
	// The policy may have changed since the URL was registered: the Sender refuses a target it no longer allows (a
	// forbidden scheme as much as a blocked address) before any connection, as "blocked" with no status or excerpt.
	sent, err := s.cfg.Webhooks.Sender.Send(ctx, e, ev)
	if err != nil {
		return nil, fmt.Errorf("test webhook %s: %w", e.ID, err)
	}
	res.Success, res.DurationMs = sent.Outcome.Result == webhook.Delivered, int(sent.Duration.Milliseconds())
	if sent.Outcome.Class != "" {
		res.ErrorClass = &sent.Outcome.Class
	}
	res.ResponseExcerpt = sent.Excerpt
	if sent.StatusCode != nil && *sent.StatusCode >= 100 && *sent.StatusCode <= 599 {
		res.StatusCode = sent.StatusCode
	}
	return gen.TestWebhook200JSONResponse{Body: res}, nil
}

// apiWebhook maps an endpoint to the API's Webhook: the names of its static headers, never their values, and
// when a rotated secret still signs.
func (s *Server) apiWebhook(e store.WebhookEndpoint) gen.Webhook {
	headers, err := s.cfg.Webhooks.Box.OpenHeaders(e.SealedHeaders, e.ID)
	if err != nil {
		// The server key changed (an operator mistake the dispatcher reports on every attempt): show the endpoint
		// rather than fail every list that contains it.
		s.log.Error("webhook endpoint's static headers do not open with the server key", "webhook_id", e.ID, "error", err)
	}
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	w := gen.Webhook{Id: e.ID, Object: gen.WebhookObjectWebhook, Url: e.URL, Description: e.Description,
		Events: e.Events, HeaderNames: names, RateLimit: e.RateLimit, Status: gen.WebhookStatus(e.Status),
		FailingSince: e.FailingSince, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if w.Events == nil {
		w.Events = []string{}
	}
	if e.DisabledReason != nil {
		reason := gen.WebhookDisabledReason(*e.DisabledReason)
		w.DisabledReason = &reason
	}
	if e.PreviousSecret != nil && e.PreviousSecretUntil != nil && e.PreviousSecretUntil.After(time.Now()) {
		w.PreviousSecretExpiresAt = e.PreviousSecretUntil
	}
	return w
}

// withSecret is the answer of create and rotate-secret: the endpoint and its new secret.
func withSecret(w gen.Webhook, secret string) gen.WebhookWithSecret {
	out := gen.WebhookWithSecret{Id: w.Id, Object: gen.WebhookWithSecretObject(w.Object), Url: w.Url,
		Description: w.Description, Events: w.Events, HeaderNames: w.HeaderNames, RateLimit: w.RateLimit,
		Status: gen.WebhookWithSecretStatus(w.Status), FailingSince: w.FailingSince,
		PreviousSecretExpiresAt: w.PreviousSecretExpiresAt, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Secret: secret}
	if w.DisabledReason != nil {
		reason := gen.WebhookWithSecretDisabledReason(*w.DisabledReason)
		out.DisabledReason = &reason
	}
	return out
}

// checkURL records why a target URL cannot be registered. The egress errors' messages are written for clients, and
// the same for every blocked address.
func (s *Server) checkURL(ctx context.Context, url string, bad *problem.Fields) {
	err := s.cfg.Webhooks.Guard.CheckURL(ctx, url)
	switch {
	case err == nil:
	case errors.Is(err, egress.ErrInvalidURL), errors.Is(err, egress.ErrUnresolvable):
		bad.Add("/url", err.Error())
	default:
		bad.Add("/url", egress.ErrBlocked.Error())
	}
}

// checkEvents records the subscriptions the catalogue does not know.
func (s *Server) checkEvents(workspaceID string, patterns []string, bad *problem.Fields) {
	for i, p := range patterns {
		if !s.events.Types().Subscribable(workspaceID, p) {
			bad.Add("/events/"+strconv.Itoa(i), fmt.Sprintf(
				`%q is not "*", an event type or a family wildcard such as "link.*" of the catalogue (GET /api/v1/event-types)`, p))
		}
	}
}

// checkHeaders records the static headers that cannot be sent: names that are not HTTP tokens or that would replace
// a header Switchboard sets, names given twice in different case, and values with control characters.
func checkHeaders(headers map[string]string, bad *problem.Fields) {
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names) // errors in a stable order
	seen := map[string]bool{}
	for _, name := range names {
		pointer := jsonPointer([]string{"headers", name})
		lower := strings.ToLower(name)
		switch {
		case name == "" || len(name) > maxHeaderNameLen || strings.IndexFunc(name, notTokenChar) >= 0:
			bad.Add(pointer, fmt.Sprintf("a header name is an HTTP token of 1 to %d letters, digits and !#$%%&'*+-.^_`|~", maxHeaderNameLen))
		case reservedHeader(lower):
			bad.Add(pointer, "Switchboard sets this header itself (webhook-*, Content-Type, Content-Length, User-Agent, Host and hop-by-hop headers)")
		case seen[lower]:
			bad.Add(pointer, "header names are case-insensitive: this one is given twice")
		case strings.IndexFunc(headers[name], invalidHeaderValueChar) >= 0:
			bad.Add(pointer, "a header value cannot contain control characters (line breaks included)")
		}
		seen[lower] = true
	}
}

// reservedHeader reports whether a lower-case header name belongs to Switchboard or to the connection.
func reservedHeader(lower string) bool {
	switch lower {
	case "content-type", "content-length", "user-agent", "host", "connection", "transfer-encoding", "te", "trailer",
		"upgrade", "keep-alive":
		return true
	}
	return strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "proxy-")
}

// notTokenChar reports whether r cannot be part of an HTTP token (RFC 9110 §5.6.2).
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// invalidHeaderValueChar reports whether r cannot be part of a header value: control characters other than tab.
func invalidHeaderValueChar(r rune) bool {
	return r < ' ' && r != '\t' || r == 0x7f
}
