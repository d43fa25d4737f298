package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Idempotency-Key lets a client retry a POST or PATCH safely. An operation opts in by declaring the header parameter
// in the spec; for requests that send it, the first answer is stored per (API key, Idempotency-Key) for 24 hours and
// replayed to a retry with the same method, path, query and body. Only requests that passed authentication and
// validation get here: a 400 or 401 of the validator is not stored (nothing ran, so there is nothing to protect, and
// the same bytes get the same answer again anyway), so a client may fix an invalid request and send it with the
// same key.
const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
	idempotencyTTL       = 24 * time.Hour
	// idempotencyStaleAfter is how long a claim is honoured while its request runs. Requests end long before (the
	// HTTP server's write timeout is 60 s); a claim older than this belongs to a process that died, and a retry
	// takes it over rather than answering 409 until the record expires.
	idempotencyStaleAfter = 2 * time.Minute
	// Expired records are deleted as keys are used: after every idempotencyPruneEvery claims of this process, up to
	// idempotencyPruneBatch of them, by the pruning job (Server.PruneIdempotencyKeys, one delete at a time), so no
	// request waits for it. Deleting ten times as many as were claimed keeps up with any traffic, and each delete is
	// short (the SQLite writer is never held for long). When traffic stops, at most idempotencyPruneEvery expired rows
	// wait for the next requests; they are never replayed (Claim ignores expired records).
	idempotencyPruneEvery = 100
	idempotencyPruneBatch = 1000
)

// replayedHeaders are the response headers that describe the stored answer and are replayed with it. The others
// belong to the request that carries them (X-Request-Id, RateLimit, Retry-After) and are the new request's.
var replayedHeaders = []string{echo.HeaderContentType, echo.HeaderLocation, "Cache-Control", "Etag", "Last-Modified"}

// idempotency is the Idempotency-Key middleware of the operations that declare the header.
type idempotency struct {
	keys *store.IdempotencyKeys
	// box seals stored bodies with the server key: an answer may carry a secret shown once (a webhook's signing
	// secret), which must not rest in clear in the database for a day.
	box    *webhook.Box
	log    *slog.Logger
	claims atomic.Uint64
	// pruneDue tells the pruning job that idempotencyPruneEvery more claims were made. It holds one signal: claims
	// made while a delete runs ask for one more delete, not for one each.
	pruneDue chan struct{}
}

func newIdempotency(s *Server) *idempotency {
	return &idempotency{keys: s.db.Idempotency, box: s.cfg.Webhooks.Box, log: s.log, pruneDue: make(chan struct{}, 1)}
}

// declaresIdempotencyKey reports whether an operation takes the Idempotency-Key header, declared on the operation
// or on its path. It refuses the header on safe methods: replaying a stored answer to a read would serve stale data.
func declaresIdempotencyKey(method string, params ...openapi3.Parameters) (bool, error) {
	for _, list := range params {
		for _, p := range list {
			if p.Value == nil || p.Value.In != openapi3.ParameterInHeader || !strings.EqualFold(p.Value.Name, idempotencyKeyHeader) {
				continue
			}
			switch method {
			case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
				return false, fmt.Errorf("%s is a safe method: it cannot take %s", method, idempotencyKeyHeader)
			}
			return true, nil
		}
	}
	return false, nil
}

// middleware runs after the validator, so the request is authenticated (its key scopes the Idempotency-Key) and
// valid. Requests without the header pass through untouched.
func (m *idempotency) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		idemKey := req.Header.Get(idempotencyKeyHeader)
		if idemKey == "" {
			return next(c)
		}
		key, err := principal(req.Context())
		if err != nil {
			return err
		}
		body, err := requestBody(req)
		if err != nil {
			return err
		}
		fp := fingerprint(req, body)
		rec, claimed, err := m.keys.Claim(req.Context(), store.NewIdempotencyClaim{
			APIKeyID: key.ID, Key: idemKey, Fingerprint: fp, TTL: idempotencyTTL, StaleAfter: idempotencyStaleAfter,
		})
		switch {
		case err != nil:
			return fmt.Errorf("claim idempotency key: %w", err)
		case claimed:
			return m.run(c, next, rec)
		case rec.Fingerprint != fp:
			return newProblem(problem.IdempotencyKeyReused,
				"This Idempotency-Key was used with a different request in the last 24 hours. Use a new key for a new request.")
		case rec.CompletedAt == nil:
			return newProblem(problem.IdempotencyRequestInProgress,
				"A request with this Idempotency-Key is still running. Retry in a moment to get its answer.").
				withHeader("Retry-After", "1")
		}
		return m.replay(c, rec)
	}
}

// run executes the request that holds the claim and stores its answer, or gives the claim up when the answer is
// not an outcome. Both happen even when the client has gone away: the work is done, and its retry must find it.
func (m *idempotency) run(c echo.Context, next echo.HandlerFunc, claim store.IdempotencyRecord) error {
	ctx := context.WithoutCancel(c.Request().Context())
	res := c.Response()
	tee := &responseTee{ResponseWriter: res.Writer}
	res.Writer = tee
	defer func() { res.Writer = tee.ResponseWriter }()
	defer func() {
		if r := recover(); r != nil {
			m.release(ctx, claim)
			panic(r) // requestContext turns it into a 500
		}
	}()
	if err := next(c); err != nil {
		c.Error(err) // write the problem now, through the tee, so that it is stored like any answer
	}
	if storable(res.Status) {
		m.complete(ctx, claim, res, tee.body.Bytes())
	} else {
		m.release(ctx, claim)
	}
	m.prune()
	return nil
}

// storable reports whether an answer is the outcome of the request, replayed to its retries: 2xx and 4xx, except
// 409 and 429, which say "not now" (a concurrent change, a rate limit); and not 5xx, where the server failed and a
// retry should run the request again.
func storable(status int) bool {
	return status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests
}

func (m *idempotency) complete(ctx context.Context, claim store.IdempotencyRecord, res *echo.Response, body []byte) {
	header := map[string][]string{}
	for _, name := range replayedHeaders {
		if v := res.Header().Values(name); len(v) > 0 {
			header[name] = v
		}
	}
	err := m.keys.Complete(ctx, claim, store.IdempotentResponse{
		RequestID: stateFrom(ctx).ID, Status: res.Status, Header: header, Body: m.box.Seal(body, sealedFor(claim)),
	})
	log := loggerFrom(ctx, m.log)
	switch {
	case errors.Is(err, store.ErrNotFound):
		log.Warn("idempotent request outlived its claim: another attempt took it over, this answer is not stored",
			"stale_after", idempotencyStaleAfter.String())
	case err != nil:
		log.Error("could not store the answer of an idempotent request; a retry runs it again once the claim is stale",
			"error", err)
	}
}

func (m *idempotency) release(ctx context.Context, claim store.IdempotencyRecord) {
	if err := m.keys.Release(ctx, claim); err != nil && !errors.Is(err, store.ErrNotFound) {
		loggerFrom(ctx, m.log).Error("could not release an idempotency key; retries get 409 until the claim is stale",
			"error", err)
	}
}

// prune counts a claim and, every idempotencyPruneEvery claims, asks the pruning job for a delete of expired
// records.
func (m *idempotency) prune() {
	if m.claims.Add(1)%idempotencyPruneEvery != 0 {
		return
	}
	select {
	case m.pruneDue <- struct{}{}:
	default: // a delete is asked for already
	}
}

// runPruning deletes expired records each time prune asks, until ctx ends; a delete that started is finished.
func (m *idempotency) runPruning(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.pruneDue:
		}
		n, err := m.keys.DeleteExpired(context.WithoutCancel(ctx), time.Now(), idempotencyPruneBatch)
		if err != nil {
			m.log.Warn("could not delete expired idempotency keys", "error", err)
		} else if n > 0 {
			m.log.Debug("deleted expired idempotency keys", "count", n)
		}
	}
}

// replay answers with a stored answer: its status, the headers that describe it and its body byte for byte, with
// Idempotent-Replayed: true. A stored problem names the request_id of the new request, like its X-Request-Id, so
// every problem's request_id finds the log line of the request that got it (that line names the original one).
func (m *idempotency) replay(c echo.Context, rec store.IdempotencyRecord) error {
	body, err := m.box.Open(rec.Response.Body, sealedFor(rec))
	if err != nil {
		return fmt.Errorf("open the stored answer of an idempotent request (was the server key changed?): %w", err)
	}
	res := c.Response()
	for name, values := range rec.Response.Header {
		res.Header()[name] = values
	}
	res.Header().Set(replayedHeader, "true")
	st := stateFrom(c.Request().Context())
	if res.Header().Get(echo.HeaderContentType) == "application/problem+json" {
		body = bytes.Replace(body, []byte(`"request_id":"`+rec.Response.RequestID+`"`), []byte(`"request_id":"`+st.ID+`"`), 1)
	}
	loggerFrom(c.Request().Context(), m.log).Info("replayed the answer of an idempotent request",
		"original_request_id", rec.Response.RequestID)
	res.WriteHeader(rec.Response.Status)
	_, err = res.Write(body)
	return err
}

// sealedFor is the associated data of a stored body: the record it belongs to, so a body copied into another
// record does not open.
func sealedFor(rec store.IdempotencyRecord) []byte {
	return []byte("idempotency\x00" + rec.APIKeyID + "\x00" + rec.Key + "\x00" + rec.Fingerprint)
}

// requestBody returns the request body's bytes without consuming it. The validator read the body and left GetBody
// to read it again, and a Body that carries the validated value the generated code binds: that Body must stay, or
// binding falls back to a second decode of the bytes, and encoding/json matches field names case-insensitively, so
// it could bind a field spelt in a case the validator never checked. Only a body the operation does not declare (so
// the validator did not read it) is read here and put back.
func requestBody(req *http.Request) ([]byte, error) {
	var (
		body []byte
		err  error
	)
	switch {
	case req.GetBody != nil:
		var rc io.ReadCloser
		if rc, err = req.GetBody(); err == nil {
			body, err = io.ReadAll(rc)
			_ = rc.Close()
		}
	case req.Body != nil && req.Body != http.NoBody:
		if body, err = io.ReadAll(req.Body); err == nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	if p := tooLarge(err); p != nil {
		return nil, p
	}
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, nil
}

// fingerprint identifies a request for its Idempotency-Key: SHA-256 over the method, the path as sent (with its
// parameter values), the query and the body, each prefixed with its length so that no two requests share an input.
func fingerprint(req *http.Request, body []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(req.Method), []byte(req.URL.EscapedPath()), []byte(req.URL.RawQuery), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// responseTee keeps a copy of the body written through it.
type responseTee struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (w *responseTee) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (Echo's Flush) reach the connection's writer.
func (w *responseTee) Unwrap() http.ResponseWriter { return w.ResponseWriter }
