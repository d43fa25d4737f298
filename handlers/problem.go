package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
)

// problemType is one row of the error table: every problem code has exactly one status and title.
type problemType struct {
	Status      int
	Title       string
	Description string
}

// problemTypes is the one table that maps stable error codes to HTTP statuses. Codes are never repurposed; new
// failures get new codes. Each code is documented at /problems/{code}.
var problemTypes = map[string]problemType{
	"malformed_json":                  {400, "Malformed JSON", "The request body is not valid JSON."},
	"validation_failed":               {400, "Validation failed", "The request does not match the API reference; errors[] lists every invalid field."},
	"missing_api_key":                 {401, "Missing API key", `No "Authorization: Bearer sb_sk_…" header was sent.`},
	"invalid_api_key":                 {401, "Invalid API key", "The key is malformed, mistyped or unknown."},
	"api_key_revoked":                 {401, "API key revoked", "The key was revoked; create a new one at /user/api."},
	"api_key_expired":                 {401, "API key expired", "The key's expiry date has passed; create a new one at /user/api."},
	"insufficient_scope":              {403, "Insufficient scope", "The key lacks a scope the operation needs; required_scopes names them."},
	"not_found":                       {404, "Not found", "No such route, no such object in the key's workspace, or no short link at this address."},
	"model_not_found":                 {404, "Model not found", "No model with this ID is enabled for the workspace."},
	"method_not_allowed":              {405, "Method not allowed", "The route exists but not for this method; the Allow header lists the methods it takes."},
	"conflict":                        {409, "Conflict", "The request conflicts with the current state of the object."},
	"slug_taken":                      {409, "Slug taken", "The slug is already used on this domain (or reserved for a while after a link was deleted)."},
	"external_id_taken":               {409, "External ID taken", "Another link of the workspace has this external_id."},
	"webhook_disabled":                {409, "Webhook endpoint disabled", "Switchboard disabled the endpoint (its receiver answered 410 or failed for days); enable it first."},
	"delivery_in_flight":              {409, "Delivery in flight", "The delivery is being attempted right now; retry when the attempt is recorded."},
	"idempotency_request_in_progress": {409, "Idempotent request in progress", "A request with this Idempotency-Key is still running; retry when it has finished."},
	"link_expired":                    {410, "Link expired", "The short link expired or reached its click limit, and has no expired_url to send visitors to."},
	"request_too_large":               {413, "Request too large", "The request body exceeds the size limit."},
	"unsupported_media_type":          {415, "Unsupported media type", "The request body has a Content-Type the operation does not accept; send application/json."},
	"idempotency_key_reused":          {422, "Idempotency key reused", "The Idempotency-Key was used with a different request in the last 24 hours; use a new key for a new request."},
	"rate_limited":                    {429, "Rate limit exceeded", "A rate limit of the key or its workspace is exhausted; wait Retry-After seconds."},
	"internal_error":                  {500, "Internal server error", "Something failed on the server; the request_id finds the log line."},
	"service_unavailable":             {503, "Service unavailable", "A dependency of the server (its database) does not answer; retry after Retry-After seconds."},
}

// Problem is an RFC 9457 problem on its way to the client. Handlers and middleware return it as an error; the
// ErrorHandler writes it.
type Problem struct {
	Code             string
	Detail           string
	Errors           []gen.ProblemFieldError
	RequiredScopes   []string
	ViolatedPolicies []string
	// Header holds response headers that belong to the problem (WWW-Authenticate, Retry-After, Allow).
	Header http.Header
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// newProblem builds a problem of a code in the table.
func newProblem(code, detail string) *Problem {
	if _, ok := problemTypes[code]; !ok {
		panic("handlers: problem code not in the table: " + code)
	}
	return &Problem{Code: code, Detail: detail}
}

func (p *Problem) withHeader(name, value string) *Problem {
	if p.Header == nil {
		p.Header = http.Header{}
	}
	p.Header.Set(name, value)
	return p
}

// Status is the HTTP status of the problem's code.
func (p *Problem) Status() int { return problemTypes[p.Code].Status }

// body renders the problem as the API's Problem schema for the request described by ctx.
func (p *Problem) body(ctx context.Context) gen.Problem {
	t := problemTypes[p.Code]
	info := stateFrom(ctx)
	out := gen.Problem{
		Type: "/problems/" + p.Code, Title: t.Title, Status: t.Status, Code: p.Code, RequestId: info.ID,
	}
	if p.Detail != "" {
		out.Detail = &p.Detail
	}
	if info.Path != "" {
		out.Instance = &info.Path
	}
	if len(p.Errors) > 0 {
		out.Errors = &p.Errors
	}
	if len(p.RequiredScopes) > 0 {
		out.RequiredScopes = &p.RequiredScopes
	}
	if len(p.ViolatedPolicies) > 0 {
		out.ViolatedPolicies = &p.ViolatedPolicies
	}
	return out
}

// problemFromError turns any error that reaches the ErrorHandler into a problem. Echo's own errors (routing, body
// limit) map by status; anything unknown is an internal error.
func problemFromError(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if he.Internal != nil && errors.As(he.Internal, &p) {
			return p
		}
		switch he.Code {
		case http.StatusNotFound:
			return newProblem("not_found", "No route matches this path. The API reference is at /docs.")
		case http.StatusMethodNotAllowed:
			return newProblem("method_not_allowed", "This route does not accept this method.")
		case http.StatusRequestEntityTooLarge:
			return newProblem("request_too_large", "The request body is larger than the server accepts.")
		case http.StatusUnsupportedMediaType:
			return newProblem("unsupported_media_type", "Send the body as application/json.")
		case http.StatusBadRequest:
			return newProblem("validation_failed", fmt.Sprint(he.Message))
		}
	}
	return nil
}

// ErrorHandler is Echo's HTTPErrorHandler: every failure leaves the server through it as application/problem+json.
func (s *Server) ErrorHandler(err error, c echo.Context) {
	ctx := c.Request().Context()
	log := loggerFrom(ctx, s.log)
	if c.Response().Committed {
		log.Error("error after the response was sent", "error", err)
		return
	}
	p := problemFromError(err)
	if p == nil {
		log.Error("internal error", "error", err)
		p = newProblem("internal_error", "Something went wrong on our side. Quote the request_id if you contact support.")
	}
	if p.Code == "method_not_allowed" {
		// Echo's Allow names every method its router knows (OPTIONS included); the spec's list is the truth.
		if allow := s.ops.allowedMethods(c.Request().URL.Path); allow != "" {
			c.Response().Header().Set(echo.HeaderAllow, allow)
		}
	}
	writeProblem(c, p)
}

func writeProblem(c echo.Context, p *Problem) {
	h := c.Response().Header()
	for name, values := range p.Header {
		h[name] = values
	}
	h.Set(echo.HeaderContentType, "application/problem+json")
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(p.Status())
	if c.Request().Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(c.Response()).Encode(p.body(c.Request().Context()))
}

// problemCodes returns the codes of the table in order, for the /problems page.
func problemCodes() []string {
	codes := make([]string, 0, len(problemTypes))
	for c := range problemTypes {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool {
		si, sj := problemTypes[codes[i]].Status, problemTypes[codes[j]].Status
		return si < sj || si == sj && codes[i] < codes[j]
	})
	return codes
}
