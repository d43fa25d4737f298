package handlers

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
)

// ingestRoute is where sources receive requests; the token authenticates the sender, so these routes carry no API
// key and are served outside the generated strict server (they verify signatures over the raw body).
const ingestRoute = "/in/:token"

var ingestToken = regexp.MustCompile(`^[A-Za-z0-9_-]{20,100}$`)

// registerIngest adds a source's public ingest URL: POST records a request, GET answers a sender's URL check.
func (s *Server) registerIngest(e *echo.Echo) {
	e.POST(ingestRoute, s.ingest)
	e.GET(ingestRoute, s.ingestChallenge)
}

// ingest answers POST /in/{token} once the request is stored (or refused and logged).
func (s *Server) ingest(c echo.Context) error {
	token := c.Param("token")
	if !ingestToken.MatchString(token) {
		return newProblem(problem.NotFound, "There is no source at this URL.")
	}
	req := c.Request()
	h := c.Response().Header()
	res, err := s.automation.Ingest(req.Context(), token, automation.IngestRequest{Method: req.Method,
		Header: req.Header, Body: req.Body, Length: req.ContentLength, Limit: s.cfg.BodyLimit,
		Rate: func(p ratelimit.Policy, d ratelimit.Decision) { setRateHeaders(h, p, d) }})
	if err != nil {
		return ingestError(err)
	}
	out := gen.IngestResult{Object: gen.IngestResultObjectIngestResult, Duplicate: res.Duplicate}
	if res.EventID != "" {
		out.EventId = &res.EventID
	}
	if res.Challenge != "" {
		out.Challenge = &res.Challenge
	}
	return c.JSON(http.StatusOK, out)
}

// ingestChallenge answers GET /in/{token}: the challenge a sender checks the URL with, echoed, for known tokens.
func (s *Server) ingestChallenge(c echo.Context) error {
	token := c.Param("token")
	if !ingestToken.MatchString(token) {
		return newProblem(problem.NotFound, "There is no source at this URL.")
	}
	p, d, err := s.automation.Challenge(c.Request().Context(), token)
	if p.Name != "" {
		setRateHeaders(c.Response().Header(), p, d)
	}
	if err != nil {
		return ingestError(err)
	}
	challenge := c.QueryParam("challenge")
	if challenge == "" {
		challenge = c.QueryParam("hub.challenge")
	}
	if len(challenge) > 512 {
		return invalidParameter("challenge", "must be at most 512 characters")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(challenge))
}

// ingestError answers a source over its rate with 429 and Retry-After; other errors go to the error handler.
func ingestError(err error) error {
	var limited *automation.RateLimitedError
	if errors.As(err, &limited) {
		return fromError(limited.Problem).withHeader("Retry-After",
			strconv.Itoa(max(1, int(limited.RetryAfter.Seconds()+0.999))))
	}
	return err
}
