package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
)

// DefaultAddressRateLimit is how many requests a minute one client address may send without a valid API key.
const DefaultAddressRateLimit = 600

// setRateHeaders answers with one policy's RateLimit-Policy and RateLimit headers (the public routes' single
// quotas: a source's, an instance hook's, an address's).
func setRateHeaders(h http.Header, p ratelimit.Policy, d ratelimit.Decision) {
	h["Ratelimit-Policy"] = []string{fmt.Sprintf(`%q;q=%d;w=%d`, p.Name, p.Quota, int(p.Window/time.Second))}
	h["Ratelimit"] = []string{fmt.Sprintf(`%q;r=%d;t=%d`, p.Name, d.Remaining, ceilSeconds(d.Reset))}
}

// limitAddress charges a request that has no valid API key to its client address: without it, a client that sends
// no key or wrong keys would cost key lookups without any bound. The answer (a 401, or a 429 when the address is
// over its quota) carries the address policy's RateLimit headers.
func (s *Server) limitAddress(st *requestState) *Problem {
	if st.echo == nil {
		return nil
	}
	d := s.limiter.Take(addressKey(st.echo), s.addressPolicy, time.Now())
	if st.header != nil {
		setRateHeaders(st.header, s.addressPolicy, d)
	}
	if d.Allowed {
		return nil
	}
	secs := max(1, ceilSeconds(d.RetryAfter))
	p := newProblem(problem.RateLimited, fmt.Sprintf(
		"Too many requests without a valid API key from this address; retry in %d seconds.", secs))
	p.ViolatedPolicies = []string{"address"}
	return p.withHeader("Retry-After", strconv.Itoa(secs))
}

// addressKey is the limiter's key of a request's client address.
func addressKey(c echo.Context) string { return "a:" + c.RealIP() }

// corsPreflightHeaders are the request headers a page of an allowed origin may send.
const corsPreflightHeaders = "Authorization, Content-Type, Idempotency-Key, X-Request-Id"

// corsExposed are the response headers a page of an allowed origin may read.
const corsExposed = "Location, RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, Idempotent-Replayed, Deprecation, Sunset"

// cors lets pages of the operator's allowed origins (--cors-origins) call the API and the ingest URLs from a
// browser. Only those paths: the console authenticates with a cookie, and no other site may read its pages. An
// origin that is not allowed gets no CORS header at all, so its page cannot read the answer.
func (s *Server) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if path := req.URL.Path; !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/in/") {
			return next(c)
		}
		h := c.Response().Header()
		h.Add(echo.HeaderVary, echo.HeaderOrigin)
		origin := req.Header.Get(echo.HeaderOrigin)
		if origin == "" || (!s.corsOrigins[origin] && !s.corsOrigins["*"]) {
			return next(c)
		}
		if s.corsOrigins["*"] {
			origin = "*"
		}
		h.Set(echo.HeaderAccessControlAllowOrigin, origin)
		if req.Method == http.MethodOptions && req.Header.Get(echo.HeaderAccessControlRequestMethod) != "" {
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestMethod)
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestHeaders)
			h.Set(echo.HeaderAccessControlAllowMethods, "GET, HEAD, POST, PUT, PATCH, DELETE")
			h.Set(echo.HeaderAccessControlAllowHeaders, corsPreflightHeaders)
			h.Set(echo.HeaderAccessControlMaxAge, "600")
			return c.NoContent(http.StatusNoContent)
		}
		h.Set(echo.HeaderAccessControlExposeHeaders, corsExposed)
		return next(c)
	}
}
