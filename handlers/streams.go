package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// streamTokenScheme is the spec's security scheme of stream tokens (the access_token query parameter).
const streamTokenScheme = "streamToken"

// Defaults of the event stream.
const (
	// DefaultStreamHeartbeat is how often a quiet stream sends a comment line, so that proxies and clients see
	// it alive.
	DefaultStreamHeartbeat = 15 * time.Second
	// streamWriteTimeout bounds each write to a stream: a client that stops reading is cut off, not waited for
	// (the server's WriteTimeout would end every stream after it; each write sets its own deadline instead).
	streamWriteTimeout = 30 * time.Second
	// streamRetry is the reconnection delay EventSource is told to use.
	streamRetry = 2 * time.Second
)

// authenticateStreamToken is authenticate for the streamToken scheme: a request without access_token is left to
// the next scheme (bearerAuth) with an error that is not a problem, so that bearerAuth's problem is answered.
func (s *Server) authenticateStreamToken(in *openapi3filter.AuthenticationInput) error {
	req := in.RequestValidationInput.Request
	st := stateFrom(req.Context())
	raw := req.URL.Query().Get("access_token")
	if raw == "" {
		return errors.New("no access_token")
	}
	invalid := unauthorized(problem.InvalidStreamToken,
		"The access_token is not valid: it expired (tokens open streams for 5 minutes), or its key no longer works. Create a new one with POST /api/v1/events/stream-tokens.")
	hash, err := eventstream.OpenToken(s.cfg.Webhooks.Box, raw, time.Now())
	if err != nil {
		return s.admit(in, st, apikey.Key{}, invalid)
	}
	key, err := s.verifier.VerifyHash(req.Context(), hash)
	switch {
	case errors.Is(err, apikey.ErrUnknown), errors.Is(err, apikey.ErrRevoked), errors.Is(err, apikey.ErrExpired):
		return s.admit(in, st, apikey.Key{}, invalid)
	case err != nil:
		return fmt.Errorf("verify the key of a stream token: %w", err)
	}
	return s.admit(in, st, key, nil)
}

// CreateStreamToken answers POST /api/v1/events/stream-tokens.
func (s *Server) CreateStreamToken(ctx context.Context, _ gen.CreateStreamTokenRequestObject) (gen.CreateStreamTokenResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	token, expires := eventstream.IssueToken(s.cfg.Webhooks.Box, key.Hash, time.Now())
	return gen.CreateStreamToken201JSONResponse{Body: gen.StreamToken{Object: gen.StreamTokenObjectStreamToken,
		Token: token, ExpiresAt: expires}}, nil
}

// StreamEvents answers GET /api/v1/events/stream with Server-Sent Events (see the spec for the protocol).
func (s *Server) StreamEvents(ctx context.Context, req gen.StreamEventsRequestObject) (gen.StreamEventsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := s.subscribe(ctx, key.WorkspaceID, req.Params)
	if err != nil {
		return nil, err
	}
	// A HEAD is answered as the GET it mirrors (headAsGet): the stream's headers, without the stream.
	_, head := stateFrom(ctx).echo.Response().Writer.(*bodiless)
	return sseStream{ctx: ctx, sub: sub, heartbeat: s.cfg.StreamHeartbeat, head: head}, nil
}

// subscribe checks a stream's parameters and opens its subscription. Returns a ValidationFailed or
// ReferenceNotFound problem for bad filters, a ReplayUnavailable problem for a cursor not in the log.
func (s *Server) subscribe(ctx context.Context, workspaceID string, p gen.StreamEventsParams) (*eventstream.Subscription, error) {
	if s.cfg.Streams == nil {
		return nil, newProblem(problem.ServiceUnavailable, "This server does not serve event streams.").
			withHeader("Retry-After", "5")
	}
	var f eventstream.Filter
	if p.Types != nil {
		f.Types = *p.Types
	}
	if p.InstanceIds != nil {
		f.InstanceIDs = *p.InstanceIds
	}
	if p.Filters != nil {
		f.Filters = webhook.FiltersOf(*p.Filters)
	}
	if err := s.webhooks.CheckSubscription(ctx, workspaceID, f.Types, f.InstanceIDs, f.Filters); err != nil {
		return nil, err
	}
	cursor := p.LastEventID
	if cursor == nil {
		cursor = p.After
	}
	var after *store.EventPosition
	if cursor != nil {
		pos, err := s.db.Events.PositionOf(ctx, workspaceID, *cursor)
		if errors.Is(err, store.ErrNotFound) {
			return nil, problem.Errorf(problem.ReplayUnavailable, "Event %s is not in this workspace's event log (it may "+
				"have expired); reconnect without Last-Event-ID and reconcile with GET /api/v1/events.", *cursor)
		}
		if err != nil {
			return nil, err
		}
		after = &pos
	}
	return s.cfg.Streams.Subscribe(ctx, workspaceID, f, after)
}

// sseStream writes a subscription as Server-Sent Events until the client leaves, the subscription ends (too slow:
// told with an error message first; the server stopping) or a write fails.
type sseStream struct {
	ctx       context.Context
	sub       *eventstream.Subscription
	heartbeat time.Duration
	head      bool
}

func (r sseStream) VisitStreamEventsResponse(w http.ResponseWriter) error {
	defer r.sub.Close()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx would hold events back in its buffer
	w.WriteHeader(http.StatusOK)
	if r.head {
		return nil
	}
	buf := fmt.Appendf(nil, "retry: %d\n\n", streamRetry.Milliseconds())
	send := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		return rc.Flush()
	}
	if err := send(); err != nil {
		return nil // the client left
	}
	heartbeat := time.NewTicker(r.heartbeat)
	defer heartbeat.Stop()
	for {
		evs, err := r.sub.Take(r.ctx)
		if err != nil {
			if errors.Is(err, eventstream.ErrOverflow) {
				p := newProblem(problem.StreamOverflow, "This stream fell 10,000 events behind and is closed; reconnect "+
					"with Last-Event-ID to resume from the event log.").body(r.ctx)
				data, _ := json.Marshal(p)
				buf = fmt.Appendf(buf, "event: error\ndata: %s\n\n", data)
				_ = send()
			}
			return nil // the client leaves, the server stops, or the replay failed: the client resumes
		}
		for _, e := range evs {
			env, err := e.Envelope()
			if err != nil {
				return err
			}
			buf = fmt.Appendf(buf, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, env)
		}
		if len(evs) > 0 {
			if err := send(); err != nil {
				return nil
			}
			heartbeat.Reset(r.heartbeat)
			continue
		}
		select {
		case <-r.ctx.Done():
			return nil
		case <-r.sub.Done():
		case <-r.sub.Ready():
		case <-heartbeat.C:
			buf = append(buf, ": keep-alive\n\n"...)
			if err := send(); err != nil {
				return nil
			}
		}
	}
}
