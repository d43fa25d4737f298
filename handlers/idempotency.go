package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	idem "github.com/switchboard/switchboard/internal/idempotency"
	"github.com/switchboard/switchboard/internal/problem"
)

// Idempotency-Key lets a client retry a POST or PATCH safely. An operation opts in by declaring the header parameter
// in the spec; for requests that send it, internal/idempotency stores the first answer per (API key,
// Idempotency-Key) for 24 hours and replays it to a retry with the same method, path, query and body. Only requests
// that passed authentication and validation get here: a 400 or 401 of the validator is not stored (nothing ran, so
// there is nothing to protect, and the same bytes get the same answer again anyway), so a client may fix an invalid
// request and send it with the same key.
const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
)

// replayedHeaders are the response headers that describe the stored answer and are replayed with it. The others
// belong to the request that carries them (X-Request-Id, RateLimit, Retry-After) and are the new request's.
var replayedHeaders = []string{echo.HeaderContentType, echo.HeaderLocation, "Cache-Control", "Etag", "Last-Modified"}

// idempotency is the Idempotency-Key middleware of the operations that declare the header: HTTP in and out of the
// idempotency service.
type idempotency struct {
	svc *idem.Service
	log *slog.Logger
}

func newIdempotency(s *Server) *idempotency {
	return &idempotency{svc: idem.New(s.db, s.cfg.Box, s.log), log: s.log}
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
		claim, err := m.svc.Begin(req.Context(), idem.Request{APIKeyID: key.ID, Key: idemKey, Method: req.Method,
			Path: req.URL.EscapedPath(), Query: req.URL.RawQuery, Body: body})
		if err != nil {
			return err
		}
		switch claim.Verdict {
		case idem.Run:
			return m.run(c, next, claim)
		case idem.Reused:
			return newProblem(problem.IdempotencyKeyReused,
				"This Idempotency-Key was used with a different request in the last 24 hours. Use a new key for a new request.")
		case idem.InProgress:
			return newProblem(problem.IdempotencyRequestInProgress,
				"A request with this Idempotency-Key is still running. Retry in a moment to get its answer.").
				withHeader("Retry-After", "1")
		}
		return m.replay(c, claim.Answer)
	}
}

// run executes the request that holds the claim and finishes it with its answer — stored, or the claim given up
// when the answer is not an outcome — even when the client has gone away: the work is done, and its retry must
// find it.
func (m *idempotency) run(c echo.Context, next echo.HandlerFunc, claim idem.Claim) error {
	ctx := context.WithoutCancel(c.Request().Context())
	log := loggerFrom(ctx, m.log)
	res := c.Response()
	tee := &responseTee{ResponseWriter: res.Writer}
	res.Writer = tee
	defer func() { res.Writer = tee.ResponseWriter }()
	defer func() {
		if r := recover(); r != nil {
			if err := m.svc.Release(ctx, claim); err != nil {
				log.Error("could not release an idempotency key; retries get 409 until the claim is stale", "error", err)
			}
			panic(r) // requestContext turns it into a 500
		}
	}()
	if err := next(c); err != nil {
		c.Error(err) // write the problem now, through the tee, so that it is stored like any answer
	}
	header := map[string][]string{}
	for _, name := range replayedHeaders {
		if v := res.Header().Values(name); len(v) > 0 {
			header[name] = v
		}
	}
	err := m.svc.Finish(ctx, claim, idem.Answer{Status: res.Status, Header: header, Body: tee.body.Bytes(), RequestID: stateFrom(ctx).ID})
	switch {
	case errors.Is(err, idem.ErrClaimLost):
		log.Warn("idempotent request outlived its claim: another attempt took it over, this answer is not stored",
			"stale_after", idem.StaleAfter.String())
	case err != nil:
		log.Error("could not store or release the answer of an idempotent request; a retry runs it again once the claim is stale",
			"error", err)
	}
	return nil
}

// replay answers with a stored answer: its status, the headers that describe it and its body byte for byte, with
// Idempotent-Replayed: true. A stored problem names the request_id of the new request, like its X-Request-Id, so
// every problem's request_id finds the log line of the request that got it (that line names the original one).
func (m *idempotency) replay(c echo.Context, a idem.Answer) error {
	res := c.Response()
	for name, values := range a.Header {
		res.Header()[name] = values
	}
	res.Header().Set(replayedHeader, "true")
	st := stateFrom(c.Request().Context())
	body := a.Body
	if res.Header().Get(echo.HeaderContentType) == "application/problem+json" {
		body = bytes.Replace(body, []byte(`"request_id":"`+a.RequestID+`"`), []byte(`"request_id":"`+st.ID+`"`), 1)
	}
	loggerFrom(c.Request().Context(), m.log).Info("replayed the answer of an idempotent request",
		"original_request_id", a.RequestID)
	res.WriteHeader(a.Status)
	_, err := res.Write(body)
	return err
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
