package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/apikey"
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

// cors answers browsers on the API and the ingest URLs. Only those paths: the console authenticates with a cookie,
// and no other site may read its pages.
//
// A preflight to the API is answered for every origin: it carries no key, so it cannot tell whose page asks, and
// answering it grants nothing (credentials are never allowed). The request itself decides (see allowOrigin): a key
// that lists origins is served only from their pages, a key that lists none only from the operator's
// (--cors-origins) and from Switchboard's own pages, and any other page gets a readable origin_not_allowed. The
// ingest URLs take no keys: there the operator's list alone decides, preflights included. An origin the operator
// allows gets Access-Control-Allow-Origin on every answer, problems included, so that its pages can show them.
var varyOrigin = []string{echo.HeaderOrigin}

func (s *Server) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		path := req.URL.Path
		api := strings.HasPrefix(path, "/api/")
		if !api && !strings.HasPrefix(path, "/in/") {
			return next(c)
		}
		h := c.Response().Header()
		if _, ok := h[echo.HeaderVary]; ok {
			h.Add(echo.HeaderVary, echo.HeaderOrigin)
		} else {
			h[echo.HeaderVary] = varyOrigin // shared; a later Add copies it (its capacity is its length)
		}
		origin := req.Header.Get(echo.HeaderOrigin)
		if origin == "" {
			return next(c)
		}
		operator := s.operatorAllows(origin)
		if req.Method == http.MethodOptions && req.Header.Get(echo.HeaderAccessControlRequestMethod) != "" {
			if !operator && !api {
				return next(c)
			}
			h.Set(echo.HeaderAccessControlAllowOrigin, origin)
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestMethod)
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestHeaders)
			h.Set(echo.HeaderAccessControlAllowMethods, "GET, HEAD, POST, PUT, PATCH, DELETE")
			h.Set(echo.HeaderAccessControlAllowHeaders, corsPreflightHeaders)
			h.Set(echo.HeaderAccessControlMaxAge, "600")
			return c.NoContent(http.StatusNoContent)
		}
		if operator {
			allowOriginHeaders(h, s.allowedOriginValue(origin))
		}
		return next(c)
	}
}

// operatorAllows reports whether the operator's list (--cors-origins) allows origin.
func (s *Server) operatorAllows(origin string) bool {
	return s.corsOrigins[origin] || s.corsOrigins["*"]
}

// allowedOriginValue is the Access-Control-Allow-Origin the operator's list answers origin with: "*" when it
// allows any origin and does not name this one.
func (s *Server) allowedOriginValue(origin string) string {
	if !s.corsOrigins[origin] && s.corsOrigins["*"] {
		return "*"
	}
	return origin
}

func allowOriginHeaders(h http.Header, value string) {
	h.Set(echo.HeaderAccessControlAllowOrigin, value)
	h.Set(echo.HeaderAccessControlExposeHeaders, corsExposed)
}

// allowOrigin decides whether the page that sent a request (its Origin header, empty when no page did) may use
// key, and returns origin_not_allowed when it may not. A key that lists origins is served only from their pages —
// and never without a page, so a key meant for pages is no server key. A key that lists none is served from
// servers, from the operator's origins and from Switchboard's own pages (the reference's "Try it out"). Either
// way the answer carries Access-Control-Allow-Origin for the page, refusals included, so that the page can read
// why it was refused (nothing but the refusal: the request did nothing).
func (s *Server) allowOrigin(req *http.Request, h http.Header, key apikey.Key) *Problem {
	origin := req.Header.Get(echo.HeaderOrigin)
	if len(key.Origins) > 0 {
		if apikey.OriginAllowed(key.Origins, origin) {
			if h != nil {
				allowOriginHeaders(h, origin)
			}
			return nil
		}
	} else if origin == "" || s.operatorAllows(origin) || sameOrigin(req, origin) {
		return nil
	}
	if origin == "" {
		return newProblem(problem.OriginNotAllowed,
			"This API key works only from the pages of its origins, and this request came from no page (no Origin header).")
	}
	if h != nil {
		allowOriginHeaders(h, origin)
	}
	shown := origin
	if len(shown) > 300 || strings.ContainsFunc(shown, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		shown = "this page's origin"
	}
	if len(key.Origins) > 0 {
		return newProblem(problem.OriginNotAllowed, fmt.Sprintf(
			"This API key works only from pages of its origins; %s is not one of them. Add it to the key at /user/api.", shown))
	}
	return newProblem(problem.OriginNotAllowed, fmt.Sprintf(
		"This API key lists no origins, so it works from pages only where the operator allows them; %s is not allowed. "+
			"Use a key that lists it (see /user/api).", shown))
}

// sameOrigin reports whether origin is Switchboard's own: a page it served (the API reference) calling it.
func sameOrigin(req *http.Request, origin string) bool {
	_, host, ok := strings.Cut(origin, "://")
	return ok && host == req.Host
}
