package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Problem is an RFC 9457 problem on its way to the client: an error of the product's one table (package problem)
// with what only HTTP adds. Handlers and middleware return it as an error; the ErrorHandler writes it.
type Problem struct {
	Code   problem.Code
	Detail string
	// Fields are the invalid parts of the request (validation_failed).
	Fields           []problem.Field
	RequiredScopes   []string
	ViolatedPolicies []string
	// Header holds response headers that belong to the problem (WWW-Authenticate, Retry-After, Allow).
	Header http.Header
}

// newProblem builds a problem of a code in the table.
func newProblem(code problem.Code, detail string) *Problem {
	return fromError(problem.New(code, detail))
}

// fromError wraps a capability service's error for HTTP.
func fromError(e *problem.Error) *Problem {
	return &Problem{Code: e.Code, Detail: e.Detail, Fields: e.Fields}
}

func (p *Problem) Error() string { return string(p.Code) + ": " + p.Detail }

// title is the title of a code in the table.
func title(code problem.Code) string {
	t, _ := problem.Lookup(code)
	return t.Title
}

// Status is the HTTP status of the problem's code.
func (p *Problem) Status() int {
	t, _ := problem.Lookup(p.Code)
	return t.Status
}

func (p *Problem) withHeader(name, value string) *Problem {
	if p.Header == nil {
		p.Header = http.Header{}
	}
	p.Header.Set(name, value)
	return p
}

// fieldErrors renders the invalid fields as the API's ProblemFieldError list.
func fieldErrors(fields []problem.Field) []gen.ProblemFieldError {
	out := make([]gen.ProblemFieldError, len(fields))
	for i, f := range fields {
		out[i].Detail = f.Detail
		switch {
		case f.Parameter != "":
			out[i].Parameter = &f.Parameter
		case f.Header != "":
			out[i].Header = &f.Header
		default:
			out[i].Pointer = &f.Pointer // "" points at the whole body
		}
	}
	return out
}

// body renders the problem as the API's Problem schema for the request described by ctx.
func (p *Problem) body(ctx context.Context) gen.Problem {
	t, _ := problem.Lookup(p.Code)
	info := stateFrom(ctx)
	out := gen.Problem{
		Type: "/problems/" + string(p.Code), Title: t.Title, Status: t.Status, Code: gen.ProblemCode(p.Code),
		RequestId: info.ID,
	}
	if p.Detail != "" {
		out.Detail = &p.Detail
	}
	if info.Path != "" {
		out.Instance = &info.Path
	}
	if len(p.Fields) > 0 {
		errs := fieldErrors(p.Fields)
		out.Errors = &errs
	}
	if len(p.RequiredScopes) > 0 {
		out.RequiredScopes = &p.RequiredScopes
	}
	if len(p.ViolatedPolicies) > 0 {
		out.ViolatedPolicies = &p.ViolatedPolicies
	}
	// OpenAI's SDKs read {"error": {message, type, code}}: on the OpenAI-compatible endpoints the problem says it
	// that way too, so a client built on them shows the message.
	if strings.HasPrefix(info.Path, "/api/v1/models") || info.Path == "/api/v1/chat/completions" {
		msg := t.Title
		if p.Detail != "" {
			msg = p.Detail
		}
		out.Error = &gen.OpenAIError{Message: msg, Type: openAIType(t.Status), Code: gen.ProblemCode(p.Code)}
	}
	return out
}

// openAIType is OpenAI's error type of a status.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status < 500:
		return "invalid_request_error"
	}
	return "api_error"
}

// problemFromError turns any error that reaches the ErrorHandler into a problem. Echo's own errors (routing, body
// limit) map by status; anything unknown is an internal error.
func problemFromError(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return fromError(pe)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if he.Internal != nil && errors.As(he.Internal, &p) {
			return p
		}
		switch he.Code {
		case http.StatusNotFound:
			return routeNotFound()
		case http.StatusMethodNotAllowed:
			return newProblem(problem.MethodNotAllowed, "This route does not accept this method.")
		case http.StatusRequestEntityTooLarge:
			return newProblem(problem.RequestTooLarge, "The request body is larger than the server accepts.")
		case http.StatusUnsupportedMediaType:
			return newProblem(problem.UnsupportedMediaType, "Send the body as application/json.")
		case http.StatusBadRequest:
			return newProblem(problem.ValidationFailed, fmt.Sprint(he.Message))
		}
	}
	return nil
}

// routeNotFound is the problem of a path no route serves, with any method.
func routeNotFound() *Problem {
	return newProblem(problem.RouteNotFound, "No route matches this path. The API reference is at /docs.")
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
	if p == nil && store.Unavailable(err) {
		// The database is down or overloaded: the client should come back, not report a bug.
		log.Warn("database unavailable", "error", err)
		p = newProblem(problem.ServiceUnavailable, "The database does not answer right now; retry shortly.").withHeader("Retry-After", "5")
	}
	if p == nil {
		log.Error("internal error", "error", err)
		p = newProblem(problem.InternalError, "Something went wrong on our side. Quote the request_id if you contact support.")
	}
	if p.Code == problem.MethodNotAllowed {
		// Echo's Allow names every method its router knows (OPTIONS included); the spec's list is the truth.
		allow := s.ops.allowedMethods(c.Request().URL.Path)
		switch {
		case allow != "":
			c.Response().Header().Set(echo.HeaderAllow, allow)
		case c.Path() == redirectRoute && !shortLinkPath(c.Request().URL.Path):
			// Echo matches the short-link route for any path and calls it a wrong method for every method the
			// route lacks; but no method serves a path the route refuses.
			p = routeNotFound()
		}
	}
	if p.Code == problem.MethodNotAllowed || p.Code == problem.RequestTooLarge {
		s.countRefusedEarly(c)
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
