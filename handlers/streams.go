package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/accounts"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/internal/problem"
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
	// streamCoalesce is the shortest time between two writes of live events to one stream. The first event after a
	// quiet moment goes out at once; events that follow within this time wait for its end and go out together, so a
	// stream costs at most about 1/streamCoalesce writes (and client wake-ups) a second however fast events come.
	// With a thousand streams, a write per stream per event was what bounded the event rate (each a write(2) and a
	// wake-up of both ends), not the encoding, which all streams share.
	streamCoalesce = 20 * time.Millisecond
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
	grant, err := eventstream.OpenToken(s.cfg.Box, raw, time.Now())
	if err != nil {
		return s.admit(in, st, apikey.Key{}, invalid)
	}
	if grant.SessionID != "" {
		return s.admitConsoleToken(in, st, grant, invalid)
	}
	key, err := s.verifier.VerifyHash(req.Context(), grant.KeyHash)
	switch {
	case errors.Is(err, apikey.ErrUnknown), errors.Is(err, apikey.ErrRevoked), errors.Is(err, apikey.ErrExpired):
		return s.admit(in, st, apikey.Key{}, invalid)
	case err != nil:
		return fmt.Errorf("verify the key of a stream token: %w", err)
	}
	// The token was made by a request that passed the key's origin check. A page that opens a stream of its own
	// origin sends no Origin header (and may, then); a page of another origin does, and is held to the key's.
	var p *Problem
	if req.Header.Get(echo.HeaderOrigin) != "" {
		p = s.allowOrigin(req, st.header, key)
	}
	return s.admit(in, st, key, p)
}

// consoleScopes are what a console stream token may do: follow the events its pages show.
var consoleScopes = []apikey.Scope{"webhooks:read"}

// admitConsoleToken admits a stream token the console made for a signed-in session (see
// eventstream.IssueConsoleToken): it acts in its workspace, with consoleScopes, while the session lives and its user
// belongs to the workspace. No API key stands behind it: its quota is the session's.
func (s *Server) admitConsoleToken(in *openapi3filter.AuthenticationInput, st *requestState, g eventstream.Grant, invalid *Problem) error {
	req := in.RequestValidationInput.Request
	err := s.accounts.SessionIn(req.Context(), g.SessionID, g.Workspace, time.Now())
	switch {
	case errors.Is(err, accounts.ErrNoSession):
		return s.admit(in, st, apikey.Key{}, invalid)
	case err != nil:
		return fmt.Errorf("check the session of a stream token: %w", err)
	}
	key := apikey.Key{ID: g.SessionID, WorkspaceID: g.Workspace, Name: "console", Scopes: consoleScopes, Kind: store.KindSecret}
	// The console's pages open it from the server's own origin (they send no Origin header); a page elsewhere is
	// held to the operator's origins, as a key without origins of its own is.
	var p *Problem
	if req.Header.Get(echo.HeaderOrigin) != "" {
		p = s.allowOrigin(req, st.header, key)
	}
	return s.admit(in, st, key, p)
}

// CreateStreamToken answers POST /api/v1/events/stream-tokens.
func (s *Server) CreateStreamToken(ctx context.Context, _ gen.CreateStreamTokenRequestObject) (gen.CreateStreamTokenResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	token, expires := eventstream.IssueToken(s.cfg.Box, key.Hash, time.Now())
	return gen.CreateStreamToken201JSONResponse{Body: gen.StreamToken{Object: gen.StreamTokenObjectStreamToken,
		Token: token, ExpiresAt: expires}}, nil
}

// StreamEvents answers GET /api/v1/events/stream with Server-Sent Events (see the spec for the protocol).
func (s *Server) StreamEvents(ctx context.Context, req gen.StreamEventsRequestObject) (gen.StreamEventsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := s.subscribe(ctx, key, req.Params)
	if err != nil {
		return nil, err
	}
	c := stateFrom(ctx).echo
	if isWebSocket(c.Request()) {
		return wsStream{ctx: ctx, req: c.Request(), sub: sub, heartbeat: s.cfg.StreamHeartbeat}, nil
	}
	// A HEAD is answered as the GET it mirrors (headAsGet): the stream's headers, without the stream.
	_, head := c.Response().Writer.(*bodiless)
	return sseStream{ctx: ctx, req: c.Request(), sub: sub, heartbeat: s.cfg.StreamHeartbeat, head: head}, nil
}

// subscribe checks a stream's parameters and opens its subscription. Returns a ValidationFailed or
// ReferenceNotFound problem for bad filters, a ReplayUnavailable problem for a cursor not in the log.
func (s *Server) subscribe(ctx context.Context, key apikey.Key, p gen.StreamEventsParams) (*eventstream.Subscription, error) {
	workspaceID := key.WorkspaceID
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
	var err error
	if f.InstanceIDs, err = keyInstances(key, f.InstanceIDs, queryInstances); err != nil {
		return nil, err
	}
	if p.Filters != nil {
		f.Filters = filtersOf(*p.Filters)
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

// streamSink is where follow writes a subscription: Server-Sent Events or WebSocket messages.
type streamSink interface {
	// events writes events (their envelopes) and sends them on.
	events(evs []*eventstream.Event) error
	// keepAlive shows a quiet stream alive.
	keepAlive() error
	// overflow tells the subscriber, with the problem's JSON, that it fell too far behind; the stream then ends.
	overflow(problemJSON []byte)
}

// follow writes a subscription to a sink until the client leaves (ctx), the subscription ends (too slow: told first;
// the server stopping) or a write fails, sending a keep-alive whenever the stream was quiet for heartbeat.
func follow(ctx context.Context, sub *eventstream.Subscription, heartbeat time.Duration, sink streamSink) error {
	defer sub.Close()
	ticker := time.NewTicker(heartbeat)
	defer ticker.Stop()
	// coalesce times the wait before a write that follows another within streamCoalesce: one timer for the
	// stream's life, reset for each wait, not one made per write.
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	defer coalesce.Stop()
	var wrote time.Time // of the last live write
	for {
		evs, err := sub.Take(ctx)
		if err != nil {
			if errors.Is(err, eventstream.ErrOverflow) {
				p := newProblem(problem.StreamOverflow, "This stream fell 10,000 events behind and is closed; reconnect "+
					"after the last event received to resume from the event log.").body(ctx)
				data, _ := json.Marshal(p)
				sink.overflow(data)
			}
			return nil // the client leaves, the server stops, or the replay failed: the client resumes
		}
		if len(evs) > 0 {
			if err := sink.events(evs); err != nil {
				return nil
			}
			ticker.Reset(heartbeat)
			if sub.Replaying() {
				continue // the replay's pages go out as fast as the client reads them
			}
			wrote = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
		case <-sub.Ready():
			if wait := streamCoalesce - time.Since(wrote); wait > 0 {
				coalesce.Reset(wait)
				select {
				case <-ctx.Done():
					return nil
				case <-sub.Done():
				case <-coalesce.C:
				}
				coalesce.Stop()
			}
		case <-ticker.C:
			if err := sink.keepAlive(); err != nil {
				return nil
			}
		}
	}
}

// sseStream is the answer of a stream as Server-Sent Events.
type sseStream struct {
	ctx       context.Context
	req       *http.Request
	sub       *eventstream.Subscription
	heartbeat time.Duration
	head      bool
}

func (r sseStream) VisitStreamEventsResponse(w http.ResponseWriter) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx would hold events back in its buffer
	http1 := r.req.ProtoMajor == 1
	if http1 {
		// The body is the stream until the connection closes, unframed (the Server-Sent Events specification's
		// recommended setup): the connection is then taken over, and each batch of events goes out in one write of
		// its own buffer. Through net/http's response writer a batch took a write per 4 KiB buffered and chunk
		// framing besides — several system calls per stream per batch, what bounded a thousand streams.
		h.Set("Transfer-Encoding", "identity")
	}
	w.WriteHeader(http.StatusOK)
	if r.head {
		r.sub.Close()
		return nil
	}
	sink := &sseSink{w: w, rc: http.NewResponseController(w)}
	sink.buf = fmt.Appendf(nil, "retry: %d\n\n", streamRetry.Milliseconds())
	if err := sink.flush(); err != nil {
		r.sub.Close()
		return nil // the client left
	}
	ctx := r.ctx
	if http1 {
		if conn, brw, err := sink.rc.Hijack(); err == nil {
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Time{})
			sink.conn = conn
			// The server no longer tells the handler that the client left: a read that ends does (the stream is
			// one-way; whatever the client sends is ignored).
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			go func(rd *bufio.Reader) {
				defer cancel()
				// Read through the connection's own buffer: io.Copy would hold a buffer of its own per stream.
				for {
					if _, err := rd.Peek(1); err != nil {
						return
					}
					_, _ = rd.Discard(rd.Buffered())
				}
			}(brw.Reader)
		}
	}
	return follow(ctx, r.sub, r.heartbeat, sink)
}

// sseSink writes Server-Sent Events: to the connection it took over (conn), or through the response writer.
type sseSink struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	conn net.Conn
	buf  []byte
}

// sseWriteChunk is how much of a batch a stream gathers before it writes: large enough that a batch costs a few
// writes, not one per event, and small enough that a stream far behind (up to the subscription's buffer of events)
// never copies its whole backlog into memory.
const sseWriteChunk = 32 << 10

// sseBuffers are the streams' write buffers, taken for one batch and given back after it: a thousand streams share
// the few that are writing at any moment instead of each keeping its largest batch's buffer.
var sseBuffers = sync.Pool{New: func() any { b := make([]byte, 0, sseWriteChunk+4<<10); return &b }}

// write writes what the sink gathered: without flushing through the response writer, at once to a connection.
func (s *sseSink) write() error {
	var err error
	if s.conn != nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err = s.conn.Write(s.buf)
	} else {
		_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err = s.w.Write(s.buf)
	}
	s.buf = s.buf[:0]
	return err
}

func (s *sseSink) flush() error {
	if err := s.write(); err != nil || s.conn != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseSink) events(evs []*eventstream.Event) error {
	own := s.buf
	pooled := sseBuffers.Get().(*[]byte)
	s.buf = (*pooled)[:0]
	defer func() {
		*pooled, s.buf = s.buf[:0], own
		if cap(*pooled) <= 2*sseWriteChunk { // one very large event's buffer is not kept
			sseBuffers.Put(pooled)
		}
	}()
	for _, e := range evs {
		msg, err := e.SSE()
		if err != nil {
			return err
		}
		if len(s.buf) > 0 && len(s.buf)+len(msg) > sseWriteChunk {
			if err := s.write(); err != nil {
				return err
			}
		}
		s.buf = append(s.buf, msg...)
	}
	return s.flush()
}

func (s *sseSink) keepAlive() error {
	s.buf = append(s.buf, ": keep-alive\n\n"...)
	return s.flush()
}

func (s *sseSink) overflow(problemJSON []byte) {
	s.buf = fmt.Appendf(s.buf, "event: error\ndata: %s\n\n", problemJSON)
	_ = s.flush()
}

// isWebSocket reports whether a request asks to be upgraded to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		slices.ContainsFunc(strings.Split(r.Header.Get("Connection"), ","), func(t string) bool {
			return strings.EqualFold(strings.TrimSpace(t), "upgrade")
		})
}

// wsStream is the answer of a stream over WebSocket: one text message per event envelope.
type wsStream struct {
	ctx       context.Context
	req       *http.Request
	sub       *eventstream.Subscription
	heartbeat time.Duration
}

func (r wsStream) VisitStreamEventsResponse(w http.ResponseWriter) error {
	// The server's read and write timeouts are deadlines on the connection, which the WebSocket keeps: each write
	// sets its own bound instead.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	// No origin check: the stream is authorized by a key or a token the page must hold, never by a cookie, so a
	// page of another site gains nothing by opening one (no cross-site WebSocket hijacking).
	conn, err := websocket.Accept(w, r.req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		r.sub.Close()
		return nil // Accept answered the client
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(r.ctx) // the stream is one-way: a message from the client closes it
	sink := &wsSink{ctx: ctx, conn: conn}
	if err := follow(ctx, r.sub, r.heartbeat, sink); err != nil || sink.closed {
		return err
	}
	if ctx.Err() == nil {
		_ = conn.Close(websocket.StatusGoingAway, "the server is shutting down; reconnect with after")
	}
	return nil
}

// wsSink writes WebSocket messages.
type wsSink struct {
	ctx    context.Context
	conn   *websocket.Conn
	closed bool
}

// events writes one message per event, as the protocol requires. They cannot share a flush: the WebSocket library
// (github.com/coder/websocket) flushes its buffer at the end of every message and offers no way to hold it, so a
// batch costs a write per event here, where Server-Sent Events write a whole batch at once.
func (s *wsSink) events(evs []*eventstream.Event) error {
	ctx, cancel := context.WithTimeout(s.ctx, streamWriteTimeout)
	defer cancel()
	for _, e := range evs {
		env, err := e.Envelope()
		if err != nil {
			return err
		}
		if err := s.conn.Write(ctx, websocket.MessageText, env); err != nil {
			return err
		}
	}
	return nil
}

func (s *wsSink) keepAlive() error {
	ctx, cancel := context.WithTimeout(s.ctx, streamWriteTimeout)
	defer cancel()
	return s.conn.Ping(ctx)
}

func (s *wsSink) overflow(problemJSON []byte) {
	ctx, cancel := context.WithTimeout(s.ctx, streamWriteTimeout)
	defer cancel()
	if s.conn.Write(ctx, websocket.MessageText, problemJSON) == nil {
		_ = s.conn.Close(websocket.StatusPolicyViolation, string(problem.StreamOverflow))
	}
	s.closed = true
}
