package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/egress"
	idem "github.com/switchboard/switchboard/internal/idempotency"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// idemServer is the real server in which createWebhook and updateWebhook run a test handler behind the real
// validator and idempotency middleware: the middleware is tested apart from what any operation does.
type idemServer struct {
	t      *testing.T
	db     *store.DB
	url    string
	routes map[string]*routers.Route
	mw     *idempotency
	// calls counts the executions of the test handler.
	calls atomic.Int64
	// answer, when set, replaces the handler's usual answer (a webhook, see webhookAnswer).
	answer atomic.Pointer[func(echo.Context) error]
}

func newIdemServer(t *testing.T, db *store.DB) *idemServer {
	t.Helper()
	return startIdemServer(t, db, Config{}, func(e *idemServer, s *Server) {
		e.mw = s.idempotency // the server's own, whose claims ask its pruning job for deletes
		for _, id := range []string{"createWebhook", "updateWebhook"} {
			op := s.ops.byID[id]
			if !op.Idempotent {
				t.Fatalf("%s does not declare the Idempotency-Key header in the spec", id)
			}
			s.echo.Add(op.Method, op.Route, e.handle, s.validatorFor(e.routes[id]), e.mw.middleware)
		}
	}, nil)
}

// startIdemServer serves a server built with cfg over HTTP, its services the product's own with the egress guard
// given (nil: the default); setup, when given, adjusts it before it serves.
func startIdemServer(t *testing.T, db *store.DB, cfg Config, setup func(*idemServer, *Server), guard *egress.Guard) *idemServer {
	t.Helper()
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	s, err := New(withServices(t, db, cfg, guard), db)
	if err != nil {
		t.Fatal(err)
	}
	e := &idemServer{t: t, db: db}
	if e.routes, err = apiRoutes(); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(e, s)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

// handle is the test handler: it checks that the body reached it whole, with the value the validator left for
// the generated binder, and answers.
func (e *idemServer) handle(c echo.Context) error {
	e.calls.Add(1)
	vb, ok := c.Request().Body.(interface{ ValidatedValue() any })
	raw, err := io.ReadAll(c.Request().Body)
	var decoded any
	if !ok || err != nil || json.Unmarshal(raw, &decoded) != nil || !reflect.DeepEqual(decoded, vb.ValidatedValue()) {
		e.t.Errorf("the handler did not get the body and its validated value intact (validated value kept: %v): %q", ok, raw)
	}
	if answer := e.answer.Load(); answer != nil {
		return (*answer)(c)
	}
	return webhookAnswer(c)
}

// answerOnce makes the next execution answer with f; the ones after it answer as usual.
func (e *idemServer) answerOnce(f func(echo.Context) error) {
	var once atomic.Bool
	wrapped := func(c echo.Context) error {
		if once.CompareAndSwap(false, true) {
			return f(c)
		}
		return webhookAnswer(c)
	}
	e.answer.Store(&wrapped)
}

// holdNext makes the next execution wait: entered is closed when it starts, and it answers once proceed is closed.
func (e *idemServer) holdNext() (entered, proceed chan struct{}) {
	entered, proceed = make(chan struct{}), make(chan struct{})
	e.answerOnce(func(c echo.Context) error {
		close(entered)
		<-proceed
		return webhookAnswer(c)
	})
	return entered, proceed
}

// webhookAnswer answers like createWebhook (201, a new ID, a secret, Location) or updateWebhook (200).
func webhookAnswer(c echo.Context) error {
	t := time.Now().UTC().Format(time.RFC3339)
	w := map[string]any{
		"id": c.Param("webhook_id"), "object": "webhook", "url": "https://hooks.example.com/a", "description": "",
		"events": []string{"*"}, "instance_ids": []string{}, "header_names": []string{}, "rate_limit": nil, "status": "active",
		"disabled_reason": nil, "failing_since": nil, "previous_secret_expires_at": nil, "created_at": t, "updated_at": t,
	}
	if c.Request().Method == http.MethodPatch {
		return c.JSON(http.StatusOK, w)
	}
	id := store.NewID("whk")
	w["id"], w["secret"] = id, "whsec_"+rand.Text()
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/webhooks/"+id)
	return c.JSON(http.StatusCreated, w)
}

// idemRequest is one call; the zero method and path are createWebhook's.
type idemRequest struct {
	method, path, key, idemKey, body string
	ctx                              context.Context
}

const webhookBody = `{"url":"https://hooks.example.com/a","events":["*"]}`

type idemReply struct {
	*http.Response
	body []byte
}

func (r *idemReply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// String is the status and body, as failures show a reply.
func (r *idemReply) String() string { return fmt.Sprintf("%d %s", r.StatusCode, r.body) }

func (r *idemReply) problemCode() string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.body, &p)
	return p.Code
}

// send makes the call and fails the test if it fails or its answer does not match the spec.
func (e *idemServer) send(r idemRequest) *idemReply {
	e.t.Helper()
	reply, err := e.try(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply
}

// try makes the call over HTTP and checks the answer against the spec: declared status, headers and schema; a
// problem carries the request's X-Request-Id as its request_id.
func (e *idemServer) try(r idemRequest) (*idemReply, error) {
	op := "createWebhook"
	if r.method == "" {
		r.method, r.path = http.MethodPost, "/api/v1/webhooks"
	}
	if r.method == http.MethodPatch {
		op = "updateWebhook"
	}
	if r.ctx == nil {
		r.ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(r.ctx, r.method, e.url+r.path, strings.NewReader(r.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/json")
	if r.idemKey != "" {
		req.Header.Set(idempotencyKeyHeader, r.idemKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	reply := &idemReply{Response: res}
	if reply.body, err = io.ReadAll(res.Body); err != nil {
		return nil, err
	}
	if res.StatusCode >= 400 {
		var p struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(reply.body, &p); err != nil || res.Header.Get("Content-Type") != "application/problem+json" ||
			p.RequestID != res.Header.Get("X-Request-Id") {
			return nil, fmt.Errorf("%d is not a problem of this request (X-Request-Id %s): %s", res.StatusCode,
				res.Header.Get("X-Request-Id"), reply.body)
		}
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: e.routes[op]},
		Status:                 res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(reply.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s → %d does not match the spec: %v\n%s", r.method, r.path, res.StatusCode, err, reply.body)
	}
	return reply, nil
}

func (e *idemServer) wantCalls(n int64) {
	e.t.Helper()
	if got := e.calls.Load(); got != n {
		e.t.Errorf("the handler ran %d times, want %d", got, n)
	}
}

// apiKey creates a key with the webhooks:write scope in a new workspace, or in workspaceID when given.
func (e *idemServer) apiKey(workspaceID string) (string, store.APIKey) {
	e.t.Helper()
	ctx := context.Background()
	if workspaceID == "" {
		ws, err := e.db.Workspaces.Create(ctx, "Idempotency")
		if err != nil {
			e.t.Fatal(err)
		}
		workspaceID = ws.ID
	}
	secret, err := apikey.Generate()
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := e.db.APIKeys.Create(ctx, store.NewAPIKey{WorkspaceID: workspaceID, Name: "idempotency", SecretHash: secret.Hash,
		DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: []string{"webhooks:write"}, CreatedBy: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return secret.Plain, k
}

// age moves a timestamp column of a key's records into the past, as if time had passed.
func (e *idemServer) age(k store.APIKey, column string, by time.Duration) {
	e.t.Helper()
	_, err := e.db.Bun().NewUpdate().Table("idempotency_keys").Set("? = ?", bun.Ident(column), time.Now().Add(-by).UTC()).
		Where("api_key_id = ?", k.ID).Exec(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
}

func wantReplayOf(t *testing.T, got, first *idemReply) {
	t.Helper()
	if got.StatusCode != first.StatusCode || !bytes.Equal(got.body, first.body) ||
		got.Header.Get("Location") != first.Header.Get("Location") ||
		got.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
		t.Errorf("replay = %d %q (Location %q), want %d %q (Location %q)", got.StatusCode, got.body,
			got.Header.Get("Location"), first.StatusCode, first.body, first.Header.Get("Location"))
	}
	if got.Header.Get(replayedHeader) != "true" {
		t.Errorf("a replay without %s: true", replayedHeader)
	}
	if id := got.Header.Get("X-Request-Id"); id == "" || id == first.Header.Get("X-Request-Id") {
		t.Errorf("replay X-Request-Id = %q: want the new request's own", id)
	}
	if got.Header.Get("RateLimit") == "" {
		t.Error("a replay without the RateLimit header of the request that got it")
	}
}

func wantExecuted(t *testing.T, r *idemReply, status int) {
	t.Helper()
	if r.StatusCode != status || r.Header.Get(replayedHeader) != "" {
		t.Errorf("got %d (%s: %q), want a fresh %d: %s", r.StatusCode, replayedHeader, r.Header.Get(replayedHeader), status, r.body)
	}
}

func TestIdempotencyReplaysTheFirstAnswer(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, key := e.apiKey("")
		r := idemRequest{key: secret, idemKey: "8e03978e-40d5-43e8-bc93-6894a57f9324", body: webhookBody}
		first := e.send(r)
		wantExecuted(t, first, http.StatusCreated)
		if first.Header.Get("Location") == "" {
			t.Fatal("the test handler sent no Location")
		}
		for range 2 {
			wantReplayOf(t, e.send(r), first)
		}
		e.wantCalls(1)

		// The stored body holds the webhook's signing secret: it rests sealed with the server key.
		var w struct{ Secret string }
		if err := json.Unmarshal(first.body, &w); err != nil || w.Secret == "" {
			t.Fatalf("no secret in %s", first.body)
		}
		var stored string
		err := db.Bun().NewSelect().Table("idempotency_keys").Column("response_body").Where("api_key_id = ?", key.ID).
			Scan(context.Background(), &stored)
		if err != nil || !strings.HasPrefix(stored, "v1:") || strings.Contains(stored, w.Secret) {
			t.Errorf("stored body %q (%v) is not sealed", stored, err)
		}
	})
}

// The key belongs to the first request: another body, method or path (parameter values included) is refused.
func TestIdempotencyKeyReusedWithAnotherRequest(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		const idemKey = "key-1"
		e.send(idemRequest{key: secret, idemKey: idemKey, body: webhookBody})
		patchA := idemRequest{method: http.MethodPatch, path: "/api/v1/webhooks/" + store.NewID("whk"), key: secret,
			idemKey: "key-2", body: `{"description":"a"}`}
		wantExecuted(t, e.send(patchA), http.StatusOK)
		patchB := patchA
		patchB.path = "/api/v1/webhooks/" + store.NewID("whk")
		for name, r := range map[string]idemRequest{
			"another body":              {key: secret, idemKey: idemKey, body: `{"url":"https://hooks.example.com/b","events":["*"]}`},
			"the same JSON spelt apart": {key: secret, idemKey: idemKey, body: `{"url": "https://hooks.example.com/a", "events": ["*"]}`},
			"another method and path":   {method: http.MethodPatch, path: patchA.path, key: secret, idemKey: idemKey, body: patchA.body},
			"another path parameter":    patchB,
		} {
			if got := e.send(r); got.StatusCode != http.StatusUnprocessableEntity || got.problemCode() != "idempotency_key_reused" {
				t.Errorf("%s: %d %s, want 422 idempotency_key_reused", name, got.StatusCode, got.body)
			}
		}
		e.wantCalls(2)
	})
}

// Twenty identical requests at once: the operation runs once; every other request gets its answer or 409.
func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		slow := func(c echo.Context) error {
			time.Sleep(50 * time.Millisecond) // a slow operation: the duplicates arrive while it runs
			return webhookAnswer(c)
		}
		e.answer.Store(&slow)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created [][]byte
			busy    int
		)
		for range 20 {
			wg.Go(func() {
				r, err := e.try(idemRequest{key: secret, idemKey: "race", body: webhookBody})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.StatusCode == http.StatusCreated:
					created = append(created, r.body)
				case r.StatusCode == http.StatusConflict && r.problemCode() == "idempotency_request_in_progress" &&
					r.Header.Get("Retry-After") == "1":
					busy++
				default:
					t.Errorf("unexpected answer %d %s", r.StatusCode, r.body)
				}
			})
		}
		wg.Wait()
		e.wantCalls(1)
		for _, b := range created {
			if !bytes.Equal(b, created[0]) {
				t.Errorf("two different answers: %s and %s", created[0], b)
			}
		}
		if len(created) == 0 || len(created)+busy != 20 {
			t.Errorf("%d created and %d in progress of 20", len(created), busy)
		}
	})
}

// While the first request runs, a retry gets 409 with Retry-After; once it finished, the retry gets its answer.
func TestIdempotencyRequestInProgress(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		entered, proceed := e.holdNext()
		r := idemRequest{key: secret, idemKey: "in-flight", body: webhookBody}
		firstc := make(chan *idemReply, 1)
		go func() {
			reply, err := e.try(r)
			if err != nil {
				t.Error(err)
			}
			firstc <- reply
		}()
		<-entered
		busy := e.send(r)
		if busy.StatusCode != http.StatusConflict || busy.problemCode() != "idempotency_request_in_progress" ||
			busy.Header.Get("Retry-After") != "1" {
			t.Errorf("retry during the first request: %d (Retry-After %q) %s, want 409 idempotency_request_in_progress",
				busy.StatusCode, busy.Header.Get("Retry-After"), busy.body)
		}
		close(proceed)
		first := <-firstc
		if first == nil {
			return
		}
		wantExecuted(t, first, http.StatusCreated)
		wantReplayOf(t, e.send(r), first)
		e.wantCalls(1)
	})
}

// A client that hangs up while its request runs still finds the answer when it retries: the work was done.
func TestIdempotencyAnswerStoredAfterTheClientLeft(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		entered, proceed := e.holdNext()
		ctx, cancel := context.WithCancel(context.Background())
		r := idemRequest{key: secret, idemKey: "hang-up", body: webhookBody}
		gone := make(chan error, 1)
		go func() {
			cr := r
			cr.ctx = ctx
			_, err := e.try(cr)
			gone <- err
		}()
		<-entered
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("the hung-up request returned %v", err)
		}
		close(proceed)
		// The retry answers 409 while the first request still runs, then its stored answer.
		reply := await.Until(t, "the hung-up request to finish", func() *idemReply { return e.send(r) },
			func(reply *idemReply) bool { return reply.StatusCode != http.StatusConflict })
		if reply.StatusCode != http.StatusCreated || reply.Header.Get(replayedHeader) != "true" {
			t.Errorf("retry after hanging up: %d %s, want the stored 201", reply.StatusCode, reply.body)
		}
		e.wantCalls(1)
	})
}

// Answers that are not outcomes of the request are not stored: a retry runs it again.
func TestIdempotencyTransientAnswersAreNotStored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		answer func(echo.Context) error
	}{
		{"internal error", http.StatusInternalServerError, func(echo.Context) error { return errors.New("database gone") }},
		{"panic", http.StatusInternalServerError, func(echo.Context) error { panic("handler bug") }},
		{"conflict", http.StatusConflict, func(echo.Context) error {
			return newProblem("conflict", "The endpoint changed meanwhile.")
		}},
		{"rate limited", http.StatusTooManyRequests, func(echo.Context) error {
			return newProblem("rate_limited", "Too many requests.").withHeader("Retry-After", "1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Dialects(t, func(t *testing.T, db *store.DB) {
				e := newIdemServer(t, db)
				secret, _ := e.apiKey("")
				e.answerOnce(tc.answer)
				r := idemRequest{key: secret, idemKey: "transient", body: webhookBody}
				wantExecuted(t, e.send(r), tc.status)
				retry := e.send(r)
				wantExecuted(t, retry, http.StatusCreated)
				wantReplayOf(t, e.send(r), retry)
				e.wantCalls(2)
			})
		})
	}
}

// A 4xx from the operation is its outcome and is replayed; the replayed problem names the new request's ID.
func TestIdempotencyClientErrorsAreReplayed(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		e.answerOnce(func(echo.Context) error {
			return fromError(problem.Invalid("/url", "This URL cannot receive webhooks."))
		})
		r := idemRequest{key: secret, idemKey: "refused", body: webhookBody}
		first := e.send(r)
		wantExecuted(t, first, http.StatusBadRequest)
		replay := e.send(r) // try already checked that its request_id is its own X-Request-Id
		if replay.StatusCode != http.StatusBadRequest || replay.Header.Get(replayedHeader) != "true" {
			t.Fatalf("retry: %d %s, want the stored 400", replay.StatusCode, replay.body)
		}
		oldID, newID := first.Header.Get("X-Request-Id"), replay.Header.Get("X-Request-Id")
		if want := bytes.Replace(first.body, []byte(oldID), []byte(newID), 1); !bytes.Equal(replay.body, want) {
			t.Errorf("replayed problem %s, want %s", replay.body, want)
		}
		e.wantCalls(1)
	})
}

func TestIdempotencyKeysArePerAPIKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		first, k := e.apiKey("")
		second, _ := e.apiKey(k.WorkspaceID)
		a := e.send(idemRequest{key: first, idemKey: "shared", body: webhookBody})
		b := e.send(idemRequest{key: second, idemKey: "shared", body: webhookBody})
		wantExecuted(t, a, http.StatusCreated)
		wantExecuted(t, b, http.StatusCreated)
		if bytes.Equal(a.body, b.body) {
			t.Error("the second API key got the first key's answer")
		}
		e.wantCalls(2)
	})
}

// After 24 hours the key is free again: the old answer is never replayed, and any request may use the key.
func TestIdempotencyExpiredRecordIsReplaced(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, k := e.apiKey("")
		r := idemRequest{key: secret, idemKey: "yesterday", body: webhookBody}
		first := e.send(r)
		e.age(k, "expires_at", time.Second)
		second := e.send(r)
		wantExecuted(t, second, http.StatusCreated)
		if bytes.Equal(first.body, second.body) {
			t.Error("an expired answer was replayed")
		}
		wantReplayOf(t, e.send(r), second)
		e.age(k, "expires_at", time.Second)
		wantExecuted(t, e.send(idemRequest{key: secret, idemKey: "yesterday", body: `{"url":"https://b.example.com","events":["*"]}`}),
			http.StatusCreated)
		e.wantCalls(3)
	})
}

// A claim held longer than the stale limit belongs to a process that died: the retry takes it over and runs.
func TestIdempotencyStaleClaimIsTakenOver(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, k := e.apiKey("")
		r := idemRequest{key: secret, idemKey: "orphan", body: webhookBody}
		dead, claimed, err := db.Idempotency.Claim(context.Background(), store.NewIdempotencyClaim{APIKeyID: k.ID,
			Key: r.idemKey, Fingerprint: idem.Fingerprint(http.MethodPost, "/api/v1/webhooks", "", []byte(r.body)),
			TTL: idem.TTL, StaleAfter: idem.StaleAfter})
		if err != nil || !claimed {
			t.Fatalf("Claim: %v, %v", claimed, err)
		}
		if got := e.send(r); got.StatusCode != http.StatusConflict {
			t.Fatalf("retry of a live claim: %d %s, want 409", got.StatusCode, got.body)
		}
		e.age(k, "locked_at", idem.StaleAfter+time.Second)
		first := e.send(r)
		wantExecuted(t, first, http.StatusCreated)
		wantReplayOf(t, e.send(r), first)
		if err := db.Idempotency.Complete(context.Background(), dead, store.IdempotentResponse{Status: 201}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the dead attempt could still store its answer: %v", err)
		}
		e.wantCalls(1)
	})
}

func TestIdempotencyWithoutTheHeader(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, k := e.apiKey("")
		for range 2 {
			wantExecuted(t, e.send(idemRequest{key: secret, body: webhookBody}), http.StatusCreated)
		}
		e.wantCalls(2)
		n, err := db.Bun().NewSelect().Table("idempotency_keys").Where("api_key_id = ?", k.ID).Count(context.Background())
		if err != nil || n != 0 {
			t.Errorf("%d records (%v) for requests without Idempotency-Key", n, err)
		}
	})
}

// Requests the validator refuses never ran: nothing is stored, and the key stays free for the corrected request.
func TestIdempotencyRefusedRequestsAreNotStored(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newIdemServer(t, db)
		secret, _ := e.apiKey("")
		invalid := e.send(idemRequest{key: secret, idemKey: "fix-me", body: `{"url":"https://hooks.example.com/a"}`})
		if invalid.StatusCode != http.StatusBadRequest || invalid.problemCode() != "validation_failed" {
			t.Fatalf("invalid body: %d %s", invalid.StatusCode, invalid.body)
		}
		unauthenticated := e.send(idemRequest{key: "sb_sk_wrong", idemKey: "fix-me", body: webhookBody})
		if unauthenticated.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad key: %d %s", unauthenticated.StatusCode, unauthenticated.body)
		}
		wantExecuted(t, e.send(idemRequest{key: secret, idemKey: "fix-me", body: webhookBody}), http.StatusCreated)
		e.wantCalls(1)
	})
}

// The real createWebhook behind the real wiring: a retry with the same key returns the same endpoint and secret,
// and only one endpoint exists.
func TestIdempotentCreateWebhook(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		e := startIdemServer(t, db, Config{}, nil, guard)
		secret, k := e.apiKey("")
		r := idemRequest{key: secret, idemKey: "create-once", body: `{"url":"http://127.0.0.1:9/hook","events":["*"]}`}
		first := e.send(r)
		wantExecuted(t, first, http.StatusCreated)
		second := e.send(r)
		wantReplayOf(t, second, first)
		var a, b struct{ ID, Secret string }
		first.json(t, &a)
		second.json(t, &b)
		if a.ID == "" || !strings.HasPrefix(a.Secret, "whsec_") || a != b {
			t.Errorf("first %+v, retry %+v: want the same endpoint and secret", a, b)
		}
		n, err := db.Bun().NewSelect().Table("webhook_endpoints").Where("workspace_id = ?", k.WorkspaceID).Count(context.Background())
		if err != nil || n != 1 {
			t.Errorf("%d endpoints (%v), want 1", n, err)
		}
		other := e.send(idemRequest{key: secret, idemKey: "create-once", body: `{"url":"http://127.0.0.1:9/other","events":["*"]}`})
		if other.StatusCode != http.StatusUnprocessableEntity || other.problemCode() != "idempotency_key_reused" {
			t.Errorf("another body with the key: %d %s", other.StatusCode, other.body)
		}
	})
}

func TestDeclaresIdempotencyKey(t *testing.T) {
	header := func(name string) openapi3.Parameters {
		return openapi3.Parameters{{Value: &openapi3.Parameter{Name: name, In: openapi3.ParameterInHeader}}}
	}
	query := openapi3.Parameters{{Value: &openapi3.Parameter{Name: "Idempotency-Key", In: openapi3.ParameterInQuery}}}
	for _, tc := range []struct {
		name       string
		method     string
		path, op   openapi3.Parameters
		idempotent bool
		fails      bool
	}{
		{name: "on the operation", method: http.MethodPost, op: header("Idempotency-Key"), idempotent: true},
		{name: "on the path, any spelling", method: http.MethodPatch, path: header("idempotency-key"), idempotent: true},
		{name: "another header", method: http.MethodPost, op: header("X-Request-Id")},
		{name: "a query parameter of that name", method: http.MethodPost, op: query},
		{name: "on a read", method: http.MethodGet, op: header("Idempotency-Key"), fails: true},
	} {
		got, err := declaresIdempotencyKey(tc.method, tc.path, tc.op)
		if got != tc.idempotent || (err != nil) != tc.fails {
			t.Errorf("%s: %v, %v; want %v, error %v", tc.name, got, err, tc.idempotent, tc.fails)
		}
	}
}
