package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// streamEnv is a server whose event streams are served by a running hub, and a workspace with a key that may
// follow them.
type streamEnv struct {
	*env
	outbox *events.Outbox
	hub    *eventstream.Hub
	ws     store.Workspace
	key    string
}

func newStreamEnv(t *testing.T, db *store.DB, cfg handlers.Config) *streamEnv {
	t.Helper()
	return newStreamEnvWith(t, db, cfg, eventstream.Config{})
}

// newStreamEnvWith is newStreamEnv with a hub configured by hc.
func newStreamEnvWith(t *testing.T, db *store.DB, cfg handlers.Config, hc eventstream.Config) *streamEnv {
	t.Helper()
	if cfg.Events == nil {
		cfg.Events = events.NewOutbox(db, events.Builtin())
	}
	hub := eventstream.NewHub(db, cfg.Events.Types(), hc)
	cfg.Streams = hub
	e := &streamEnv{env: newEnv(t, db, cfg), outbox: cfg.Events, hub: hub}
	// Registered after the server's cleanup, so it runs first: the hub ends the open streams, which the server's
	// close waits for.
	running, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(running) }()
	t.Cleanup(func() { stop(); <-done })
	e.ws = e.workspace("Streams")
	e.key, _ = e.env.key(e.ws.ID, "webhooks:read")
	return e
}

// emitTogether records link.created events of these links in one transaction, and returns their IDs.
func (e *streamEnv) emitTogether(links ...gen.Link) []string {
	e.t.Helper()
	var ids []string
	err := e.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		for _, l := range links {
			l.Object, l.Tags = "link", []string{}
			ev, err := e.outbox.Emit(ctx, tx, e.ws.ID, gen.LinkCreatedEvent{Link: l})
			if err != nil {
				return err
			}
			ids = append(ids, ev.ID)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// emit records link.created events of the workspace, one transaction each, and returns their IDs.
func (e *streamEnv) emit(linkIDs ...string) []string {
	e.t.Helper()
	var ids []string
	for _, id := range linkIDs {
		err := e.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
			ev, err := e.outbox.Emit(ctx, tx, e.ws.ID, gen.LinkCreatedEvent{Link: gen.Link{Id: id, Object: "link", Tags: []string{}}})
			ids = append(ids, ev.ID)
			return err
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return ids
}

// sse is an open event stream.
type sse struct {
	t    testing.TB
	res  *http.Response
	r    *bufio.Reader
	stop context.CancelFunc
}

// message is one Server-Sent Event.
type message struct {
	id, event, data string
}

// open opens a stream at path (query included) and checks its answer against the spec (status and headers: the
// body never ends).
func (e *streamEnv) open(path string, header map[string]string) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &sse{t: e.t, res: res, r: bufio.NewReader(res.Body), stop: cancel}
	e.t.Cleanup(s.close)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("GET %s = %d: %s", path, res.StatusCode, b)
	}
	route, params, err := specRouter.FindRoute(req)
	if err != nil {
		e.t.Fatal(err)
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode, Header: res.Header, Body: io.NopCloser(strings.NewReader("")),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true},
	})
	if err != nil || route.Operation.OperationID != "streamEvents" {
		e.t.Fatalf("GET %s does not match the spec (%s): %v", path, route.Operation.OperationID, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("Content-Type %q", ct)
	}
	return s
}

func (s *sse) close() {
	s.stop()
	_ = s.res.Body.Close()
}

// next reads the next event, skipping comments (keep-alives) and the retry field.
func (s *sse) next() message {
	s.t.Helper()
	var m message
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("stream ended: %v (after %+v)", err, m)
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "":
			if m.data != "" {
				return m
			}
		case "id":
			m.id = value
		case "event":
			m.event = value
		case "data":
			m.data = value
		}
	}
}

// ids reads n events and returns their IDs, checking that each is the envelope of its ID and type.
func (s *sse) ids(n int) []string {
	s.t.Helper()
	var out []string
	for range n {
		m := s.next()
		var env struct{ ID, Type, WorkspaceID string }
		if err := json.Unmarshal([]byte(m.data), &env); err != nil || env.ID != m.id || env.Type != m.event {
			s.t.Fatalf("message %+v: envelope %+v (%v)", m, env, err)
		}
		out = append(out, m.id)
	}
	return out
}

func TestEventStream(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: 50 * time.Millisecond})
		auth := map[string]string{"Authorization": "Bearer " + e.key}

		t.Run("live, then resumed with Last-Event-ID and after, without gap or repeat", func(t *testing.T) {
			s := e.open("/api/v1/events/stream", auth)
			first := e.emit("lnk_1", "lnk_2")
			if got := s.ids(2); !slices.Equal(got, first) {
				t.Fatalf("got %v, want %v", got, first)
			}
			s.close()
			missed := e.emit("lnk_3")
			resumed := e.open("/api/v1/events/stream", map[string]string{"Authorization": "Bearer " + e.key,
				"Last-Event-ID": first[0]})
			live := e.emit("lnk_4")
			want := slices.Concat(first[1:], missed, live)
			if got := resumed.ids(3); !slices.Equal(got, want) {
				t.Fatalf("resumed: got %v, want %v", got, want)
			}
			after := e.open("/api/v1/events/stream?after="+missed[0], auth)
			if got := after.ids(1); got[0] != live[0] {
				t.Fatalf("after %s: got %v, want %s", missed[0], got, live[0])
			}
		})

		t.Run("filters", func(t *testing.T) {
			filters := url.QueryEscape(`[{"pointer":"/link/id","op":"prefix","value":"lnk_keep"}]`)
			s := e.open("/api/v1/events/stream?types=link.created&types=message.*&filters="+filters, auth)
			ids := e.emit("lnk_drop", "lnk_keep")
			if got := s.ids(1); got[0] != ids[1] {
				t.Fatalf("got %v, want %s", got, ids[1])
			}
		})

		t.Run("a stream token opens the stream for its key", func(t *testing.T) {
			var tok gen.StreamToken
			e.do(request{method: http.MethodPost, path: "/api/v1/events/stream-tokens", key: e.key}).json(t, &tok)
			if !strings.HasPrefix(tok.Token, "sbst_") || time.Until(tok.ExpiresAt) > 5*time.Minute {
				t.Fatalf("token %+v", tok)
			}
			s := e.open("/api/v1/events/stream?access_token="+url.QueryEscape(tok.Token), nil)
			ids := e.emit("lnk_token")
			if got := s.ids(1); got[0] != ids[0] {
				t.Fatalf("got %v, want %v", got, ids)
			}
		})

		t.Run("a token of a key held to origins opens streams from its pages only", func(t *testing.T) {
			held, _ := createKey(t, db, e.ws.ID, &store.NewAPIKey{Origins: []string{"https://app.example"}}, "webhooks:read")
			var tok gen.StreamToken
			e.do(request{method: http.MethodPost, path: "/api/v1/events/stream-tokens", key: held,
				header: map[string]string{"Origin": "https://app.example"}}).json(t, &tok)
			path := "/api/v1/events/stream?access_token=" + url.QueryEscape(tok.Token)
			e.open(path, map[string]string{"Origin": "https://app.example"}).close()
			// A key held to origins serves their pages only, as every key does: no page (no Origin) is refused too.
			e.do(request{path: path}).problem(t, http.StatusForbidden, "origin_not_allowed")
			e.do(request{path: path, header: map[string]string{"Origin": "https://evil.example"}}).
				problem(t, http.StatusForbidden, "origin_not_allowed")
		})

		t.Run("refusals", func(t *testing.T) {
			e.do(request{path: "/api/v1/events/stream"}).problem(t, http.StatusUnauthorized, "missing_api_key")
			e.do(request{path: "/api/v1/events/stream?access_token=sbst_nope"}).problem(t, http.StatusUnauthorized, "invalid_stream_token")
			noScope, _ := e.env.key(e.ws.ID, "links:read")
			e.do(request{path: "/api/v1/events/stream", key: noScope}).problem(t, http.StatusForbidden, "insufficient_scope")
			e.do(request{method: http.MethodPost, path: "/api/v1/events/stream-tokens", key: noScope}).
				problem(t, http.StatusForbidden, "insufficient_scope")
			e.do(request{path: "/api/v1/events/stream?after=evt_01JDAB3C4D5E6F7G8H9J0K1M2P", key: e.key}).
				problem(t, http.StatusGone, "replay_unavailable")
			p := e.do(request{path: "/api/v1/events/stream?types=nope.*", key: e.key}).problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["parameter"] != "types" {
				t.Fatalf("errors %v", p.Errors)
			}
			e.do(request{path: "/api/v1/events/stream?instance_ids=ins_01JDAB3C4D5E6F7G8H9J0K1M2P", key: e.key}).
				problem(t, http.StatusUnprocessableEntity, "reference_not_found")
		})

		t.Run("a quiet stream sends keep-alives", func(t *testing.T) {
			s := e.open("/api/v1/events/stream", auth)
			for {
				line, err := s.r.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if line == ": keep-alive\n" {
					return
				}
			}
		})
	})
}

// dialStream opens the stream over WebSocket.
func (e *streamEnv) dialStream(path string, header http.Header) *websocket.Conn {
	e.t.Helper()
	conn, res, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(e.url, "http")+path,
		&websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		e.t.Fatalf("dial %s: %v", path, err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("X-Request-Id") == "" {
		e.t.Fatalf("dial %s: %d %v", path, res.StatusCode, res.Header)
	}
	e.t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// wsIDs reads n messages, each an event's envelope, and returns their IDs.
func wsIDs(t *testing.T, conn *websocket.Conn, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	for range n {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		var env struct{ ID, Type string }
		if err := json.Unmarshal(data, &env); typ != websocket.MessageText || err != nil || !strings.HasPrefix(env.ID, "evt_") {
			t.Fatalf("message %s: %v", data, err)
		}
		out = append(out, env.ID)
	}
	return out
}

func TestEventStreamOverWebSocket(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: 20 * time.Millisecond})
		auth := http.Header{"Authorization": {"Bearer " + e.key}}

		conn := e.dialStream("/api/v1/events/stream?types=link.*", auth)
		first := e.emit("lnk_w1", "lnk_w2")
		if got := wsIDs(t, conn, 2); !slices.Equal(got, first) {
			t.Fatalf("got %v, want %v", got, first)
		}
		conn.CloseNow()

		missed := e.emit("lnk_w3")
		var tok gen.StreamToken
		e.do(request{method: http.MethodPost, path: "/api/v1/events/stream-tokens", key: e.key}).json(t, &tok)
		resumed := e.dialStream("/api/v1/events/stream?after="+first[0]+"&access_token="+url.QueryEscape(tok.Token), nil)
		time.Sleep(60 * time.Millisecond) // a few pings pass while nothing happens; the stream stays open
		live := e.emit("lnk_w4")
		if got, want := wsIDs(t, resumed, 3), slices.Concat(first[1:], missed, live); !slices.Equal(got, want) {
			t.Fatalf("resumed: got %v, want %v", got, want)
		}

		// Refusals are answered before the upgrade, as problems.
		_, res, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(e.url, "http")+"/api/v1/events/stream", nil)
		if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without a key: %v %v", res, err)
		}
	})
}

// flushCounter is a ResponseWriter that keeps what each Flush sent on.
type flushCounter struct {
	header  http.Header
	mu      sync.Mutex
	pending []byte
	flushes []string
	flushed chan struct{}
}

func (w *flushCounter) Header() http.Header { return w.header }
func (w *flushCounter) WriteHeader(int)     {}
func (w *flushCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	return len(p), nil
}
func (w *flushCounter) Flush() {
	w.mu.Lock()
	w.flushes = append(w.flushes, string(w.pending))
	w.pending = nil
	w.mu.Unlock()
	w.flushed <- struct{}{}
}

// countedStream serves a stream of the environment's key into a flushCounter whose channel holds up to signals
// flushes, and returns once the stream is registered; cancel ends it, and served is closed once it has.
func (e *streamEnv) countedStream(signals int) (w *flushCounter, cancel context.CancelFunc, served chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	w = &flushCounter{header: http.Header{}, flushed: make(chan struct{}, signals)}
	served = make(chan struct{})
	go func() { defer close(served); e.srv.ServeHTTP(w, req) }()
	<-w.flushed // "retry: …": the stream is registered
	return w, cancel, served
}

// TestEventStreamCoalescesBufferedEvents: events that are waiting together for a stream (here, committed in one
// transaction, so the hub reads them together) are written in commit order and flushed once, not once each.
func TestEventStreamCoalescesBufferedEvents(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: time.Hour})
		w, cancel, served := e.countedStream(10)
		defer cancel()

		ids := e.emitTogether(gen.Link{Id: "lnk_1"}, gen.Link{Id: "lnk_2"}, gen.Link{Id: "lnk_3"})
		<-w.flushed
		cancel()
		<-served

		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.flushes) != 2 || !strings.HasPrefix(w.flushes[0], "retry: ") {
			t.Fatalf("flushes %q, want the retry then one with every event", w.flushes)
		}
		var got []string
		for line := range strings.Lines(w.flushes[1]) {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				got = append(got, strings.TrimSpace(id))
			}
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("one flush carried %v, want %v in commit order:\n%s", got, ids, w.flushes[1])
		}
	})
}

// TestEventStreamCoalescesFastEvents: events committed one transaction each, faster than a stream writes, share
// writes: a stream writes at most once per coalescing interval (20 ms) while they keep coming, instead of once per
// commit (PostgreSQL notifies every commit), and loses or reorders none. The first event after a quiet moment is
// written without waiting.
func TestEventStreamCoalescesFastEvents(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: time.Hour})
		w, cancel, served := e.countedStream(1000)
		defer cancel()

		emit := func(link string) string {
			var id string
			err := e.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
				ev, err := e.outbox.Emit(ctx, tx, e.ws.ID, gen.LinkCreatedEvent{Link: gen.Link{Id: link, Object: "link", Tags: []string{}}})
				id = ev.ID
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		// A lone event after a quiet moment is written on its own, without waiting for others.
		ids := []string{emit("lnk_first")}
		<-w.flushed
		time.Sleep(50 * time.Millisecond) // longer than the interval: the stream is quiet again

		const n = 60
		start := time.Now()
		for i := range n {
			ids = append(ids, emit("lnk_"+strconv.Itoa(i)))
			time.Sleep(time.Millisecond)
		}
		elapsed := time.Since(start)
		var got []string
		flushes := 0
		await.Until(t, "every event on the stream", func() []string {
			w.mu.Lock()
			defer w.mu.Unlock()
			got, flushes = got[:0], 0
			for _, f := range w.flushes[1:] {
				flushes++
				for line := range strings.Lines(f) {
					if id, ok := strings.CutPrefix(line, "id: "); ok {
						got = append(got, strings.TrimSpace(id))
					}
				}
			}
			return got
		}, func(got []string) bool { return len(got) >= len(ids) })
		cancel()
		<-served
		if !slices.Equal(got, ids) {
			t.Fatalf("the stream carried %v, want %v in commit order", got, ids)
		}
		// The lone event's write, then at most one per 20 ms of the burst, and one for its tail.
		if limit := 1 + int(elapsed/(20*time.Millisecond)) + 2; flushes > limit {
			t.Errorf("%d events committed over %v took %d writes, want at most %d", n, elapsed, flushes-1, limit-1)
		}
		t.Logf("%d events committed one by one over %v: %d writes", n, elapsed, flushes-1)
	})
}

// A key limited to some instances follows only their events: a stream it opens without instance_ids gets its
// instances' events and those of no instance, never another instance's, live or replayed; naming another instance
// is refused as a reference to nothing.
func TestEventStreamOfAKeyLimitedToInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: 50 * time.Millisecond})
		ctx := context.Background()
		var ids []string
		for _, name := range []string{"mine", "foreign"} {
			inst := &store.Instance{ID: store.NewID("ins"), WorkspaceID: e.ws.ID, Name: name, Provider: "sandbox", Status: "created"}
			if err := db.Instances.Create(ctx, db.Bun(), inst); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, inst.ID)
		}
		mine, foreign := ids[0], ids[1]
		limited, _ := createKey(t, db, e.ws.ID, &store.NewAPIKey{InstanceIDs: []string{mine}}, "webhooks:read")
		emit := func(instanceID string) string {
			var id string
			err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				evs, err := e.outbox.EmitMany(ctx, tx, []events.Pending{{WorkspaceID: e.ws.ID, InstanceID: instanceID,
					Payload: gen.InstanceDeletedEvent{InstanceId: instanceID, Instance: gen.Instance{Id: instanceID}}}})
				if err == nil {
					id = evs[0].ID
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		auth := map[string]string{"Authorization": "Bearer " + limited}
		before := emit(foreign)
		s := e.open("/api/v1/events/stream?after="+before, auth)
		emit(foreign)
		ownLive := emit(mine)
		link := e.emit("lnk_1")[0]
		if got := s.ids(2); !slices.Equal(got, []string{ownLive, link}) {
			t.Errorf("live: got %v, want its instance's event and the link's (%s, %s), not the foreign instance's", got, ownLive, link)
		}
		// Replayed from before all of them: the same, the foreign instance's still left out.
		replay := e.open("/api/v1/events/stream?after="+before, auth)
		if got := replay.ids(2); !slices.Equal(got, []string{ownLive, link}) {
			t.Errorf("replayed: got %v, want %s, %s", got, ownLive, link)
		}
		e.do(request{path: "/api/v1/events/stream?instance_ids=" + foreign, key: limited}).
			problem(t, 422, "reference_not_found")
	})
}

// writeCounter is a listener whose connections count their writes.
type writeCounter struct {
	net.Listener
	mu     sync.Mutex
	writes int
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return &countedConn{Conn: c, l: l}, err
}

func (l *writeCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

type countedConn struct {
	net.Conn
	l *writeCounter
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes++
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

// TestEventStreamWritesABatchAtOnce: over HTTP/1.1 a stream's batch of events (here 25, about 15 KiB, committed
// together) leaves in one write to the connection — through net/http's response writer it took one per 4 KiB
// buffered — and a client that leaves is still noticed at once (its subscription ends without a write).
func TestEventStreamWritesABatchAtOnce(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnv(t, db, handlers.Config{StreamHeartbeat: time.Hour})
		hs := httptest.NewUnstartedServer(e.srv)
		counter := &writeCounter{Listener: hs.Listener}
		hs.Listener = counter
		hs.Start()
		defer hs.Close()
		e.url = hs.URL
		s := e.open("/api/v1/events/stream", map[string]string{"Authorization": "Bearer " + e.key})
		if te := s.res.TransferEncoding; len(te) != 0 {
			t.Errorf("Transfer-Encoding %q, want the body unframed until the connection closes", te)
		}
		before := counter.count()

		var links []gen.Link
		for i := range 25 {
			links = append(links, gen.Link{Id: "lnk_" + strconv.Itoa(i), DestinationUrl: "https://example.com/" + strings.Repeat("x", 100)})
		}
		ids := e.emitTogether(links...)
		if got := s.ids(len(ids)); !slices.Equal(got, ids) {
			t.Fatalf("the stream carried %v, want %v", got, ids)
		}
		if writes := counter.count() - before; writes != 1 {
			t.Errorf("25 events read together took %d writes, want 1", writes)
		}

		s.close()
		await.Until(t, "the subscription of the client that left ends", e.hub.Subscribers, func(n int) bool { return n == 0 })
	})
}

// TestEventStreamTellsAnOverflowAndCloses: a subscriber that falls the hub's buffer behind (here 3 events, and 5
// committed together) is told with an error event carrying the problem, and its stream ends — on the connection the
// stream took over as through the response writer.
func TestEventStreamTellsAnOverflowAndCloses(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newStreamEnvWith(t, db, handlers.Config{StreamHeartbeat: time.Hour}, eventstream.Config{Buffer: 3})
		s := e.open("/api/v1/events/stream", map[string]string{"Authorization": "Bearer " + e.key})
		e.emitTogether(gen.Link{Id: "lnk_1"}, gen.Link{Id: "lnk_2"}, gen.Link{Id: "lnk_3"}, gen.Link{Id: "lnk_4"}, gen.Link{Id: "lnk_5"})
		m := s.next()
		var p struct{ Type string }
		if err := json.Unmarshal([]byte(m.data), &p); err != nil || m.event != "error" || !strings.HasSuffix(p.Type, "stream_overflow") {
			t.Fatalf("message %+v (%v), want the stream_overflow problem", m, err)
		}
		if rest, err := io.ReadAll(s.r); err != nil || len(rest) != 0 {
			t.Fatalf("after the overflow the stream carried %q (%v), want its end", rest, err)
		}
		await.Until(t, "the subscription ends", e.hub.Subscribers, func(n int) bool { return n == 0 })
	})
}
