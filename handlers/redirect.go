package handlers

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/hops"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/problem"
)

// RedirectOptions configures the public redirects of short links. They are served only with both a recorder and a
// cache: a redirect that could not be counted is never served.
type RedirectOptions struct {
	// Clicks records every redirect.
	Clicks *clicks.Recorder
	// Cache holds the links resolved for redirects: linkcache.New over the Resolve of Config.Links. Its Run must
	// run for as long as the server serves (until then, every redirect reads the database).
	Cache *linkcache.Cache[*links.Target]
}

// redirector is the state of the redirect route.
type redirector struct {
	clicks *clicks.Recorder
	cache  *linkcache.Cache[*links.Target]
	// hops remembers the redirects just sent, so that a client following one back here (a loop, or a chain through
	// a name of this server) is not counted as a click again.
	hops *hops.Memory
	// refusing is set from the first redirect refused because its click could not be recorded until one is served
	// again: at overload every redirect is refused, and one log line says so (the recorder counts the refusals).
	refusing atomic.Bool
}

var (
	noStore     = []string{"private, no-store"}
	shortCache  = []string{"public, max-age=300"}
	noIndex     = []string{"noindex"}
	pageNoStore = []string{"no-store"}
)

// registerRedirects adds GET and HEAD /:slug (and /:slug+, the preview). Echo prefers static routes to parameters,
// so every page of the product keeps its path; slugs that name a route are refused when links are created.
func (s *Server) registerRedirects(e *echo.Echo) error {
	o := s.cfg.Redirects
	if o.Clicks == nil && o.Cache == nil {
		return nil
	}
	if o.Clicks == nil || o.Cache == nil {
		return errors.New("redirects need both a click recorder and a link cache")
	}
	s.redirects = &redirector{clicks: o.Clicks, cache: o.Cache, hops: hops.New(0)}
	e.GET(redirectRoute, s.redirect)
	e.HEAD(redirectRoute, s.redirect)
	return nil
}

// redirectRoute is the route of short links. Its requests get no access log line: every redirect served is
// recorded as a click, and the HTTP metrics count every answer.
const redirectRoute = "/:slug"

// shortLinkPath reports whether a request path can name a short link: a path of more than one segment, or /api, is
// none (slugs have neither), although Echo routes every path to the short-link route.
func shortLinkPath(path string) bool {
	return !strings.Contains(path[1:], "/") && path != "/api"
}

// redirect serves a short link: the destination (with UTM and the visitor's query), the expired answer, or the
// preview page of /slug+. For a cached link without max_clicks it does no I/O: it reads the cache, builds the
// Location and hands the click's raw facts to the recorder.
func (s *Server) redirect(c echo.Context) error {
	req := c.Request()
	// A client that mistyped a route gets the route problem, not the visitor's page.
	if !shortLinkPath(req.URL.Path) {
		return echo.ErrNotFound
	}
	slug, preview := strings.CutSuffix(c.Param("slug"), "+")
	if !links.ValidSlug(slug) {
		return s.noSuchLink(c)
	}
	now := time.Now()
	key := s.links.Key(req.Host, slug)
	t, found, err := s.redirects.cache.Get(req.Context(), key, now)
	if err != nil {
		loggerFrom(req.Context(), s.log).Warn("short link lookup failed", "error", err)
		return s.linkUnavailable(c, "The short link cannot be looked up right now.")
	}
	if !found {
		return s.noSuchLink(c)
	}
	if preview {
		return s.previewPage(c, t.Preview(now))
	}
	if t.Expired(now) {
		return s.linkExpired(c, t)
	}
	head := req.Method == http.MethodHead
	ua := req.Header.Get("User-Agent")
	ip := c.RealIP()
	location := t.Location(req.URL.RawQuery)
	// A request made by following a redirect of ours is no visit: it is redirected again (a chain goes on, a loop
	// ends where the client's hop limit is) but counts no click and spends no max_clicks.
	if s.redirects.hops.Followed(ip, req.Host, req.RequestURI, now) {
		s.redirects.hops.Sent(ip, location, now)
		return s.sendRedirect(c, t, location)
	}
	var class string
	if t.Capped() {
		// Only people spend the cap: the class must be known before the admission.
		class = s.redirects.clicks.Classify(head, ua)
		admission, err := s.links.Admit(req.Context(), t, class)
		switch {
		case err != nil:
			loggerFrom(req.Context(), s.log).Warn("max_clicks admission failed", "link_id", t.ID(), "error", err)
			return s.linkUnavailable(c, "The short link cannot be checked right now.")
		case admission == links.Refused:
			return s.linkExpired(c, t)
		case admission == links.Changed:
			s.redirects.cache.Invalidate(key)
		}
	}
	err = s.redirects.clicks.Record(clicks.Hit{ID: clicks.NewHitID(now), At: now, LinkID: t.ID(), Class: class, Head: head,
		UserAgent: ua, Referer: req.Header.Get("Referer"), IP: ip})
	if err != nil {
		if !s.redirects.refusing.Swap(true) {
			loggerFrom(req.Context(), s.log).Error("redirects are refused: their clicks cannot be recorded "+
				"(logged once until a redirect is served again)", "error", err)
		}
		return s.linkUnavailable(c, "Clicks cannot be recorded right now.")
	}
	if s.redirects.refusing.Load() && s.redirects.refusing.Swap(false) {
		loggerFrom(req.Context(), s.log).Info("redirects are served again: their clicks are recorded")
	}
	s.redirects.hops.Sent(ip, location, now)
	return s.sendRedirect(c, t, location)
}

// sendRedirect answers a visit with the link's redirect to location.
func (s *Server) sendRedirect(c echo.Context, t *links.Target, location string) error {
	status := t.Status()
	h := c.Response().Header()
	h["Location"] = []string{location}
	h["Cache-Control"] = cacheControl(status)
	h["X-Robots-Tag"] = noIndex
	c.Response().WriteHeader(status)
	return nil
}

// cacheControl is the Cache-Control of a redirect: a permanent one may be cached by browsers for 5 minutes (a
// visit within them is not counted again), a temporary one never, so that every visit reaches the server.
func cacheControl(status int) []string {
	if status == http.StatusMovedPermanently || status == http.StatusPermanentRedirect {
		return shortCache
	}
	return noStore
}

// acceptsHTML tells browsers (which ask for text/html) from API clients and tools.
func acceptsHTML(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") }

// refuseVisit answers a visit that is not redirected: with page for browsers, with p for programs, either way
// with p's status and headers (Retry-After).
func refuseVisit(c echo.Context, p *Problem, page linkPage) error {
	if !acceptsHTML(c.Request()) {
		return p
	}
	h := c.Response().Header()
	for name, values := range p.Header {
		h[name] = values
	}
	return writeLinkPage(c, p.Status(), page)
}

// noSuchLink answers an unknown slug: 404.
func (s *Server) noSuchLink(c echo.Context) error {
	return refuseVisit(c, newProblem(problem.NotFound, "No short link answers at this address."),
		linkPage{Heading: "This short link does not exist",
			Text: "Check the address for typing mistakes, or ask whoever shared it for a new one."})
}

// linkUnavailable answers a visit that cannot be served right now (the database does not answer, clicks cannot be
// recorded): 503 with Retry-After.
func (s *Server) linkUnavailable(c echo.Context, detail string) error {
	return refuseVisit(c, newProblem(problem.ServiceUnavailable, detail).withHeader("Retry-After", "5"),
		linkPage{Heading: "This short link is unavailable right now",
			Text: "It cannot be followed at the moment. Try again shortly."})
}

// linkExpired answers a link past its expires_at or max_clicks: its expired_url (302, never cached), else 410.
func (s *Server) linkExpired(c echo.Context, t *links.Target) error {
	if u := t.ExpiredURL(); u != "" {
		h := c.Response().Header()
		h["Location"] = []string{u}
		h["Cache-Control"] = noStore
		h["X-Robots-Tag"] = noIndex
		c.Response().WriteHeader(http.StatusFound)
		return nil
	}
	return refuseVisit(c, newProblem(problem.LinkExpired, "This short link has expired or reached its click limit."),
		linkPage{Heading: "This short link has expired", Text: "The link you followed is no longer active."})
}

// previewPage shows where a short link goes, without sending the visitor there or counting a click.
func (s *Server) previewPage(c echo.Context, pv links.Preview) error {
	p := linkPage{Heading: "Where this short link goes", ShortURL: pv.ShortURL, Title: pv.Title,
		Destination: pv.Destination, Active: pv.Active}
	if pv.Active {
		p.Text = "Following it takes you to the address below. Make sure you trust it before you continue."
	} else {
		p.Text = "This link has expired: it no longer sends visitors to its destination."
		p.ExpiredURL = pv.ExpiredURL
	}
	return writeLinkPage(c, http.StatusOK, p)
}

// linkPage is the content of the HTML pages of the redirect route; html/template escapes every field.
type linkPage struct {
	Heading, Text, ShortURL, Title, Destination, ExpiredURL string
	// Active shows a link to the destination.
	Active bool
}

var linkPageTemplate = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>{{.Heading}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1f2937}
.url{font-family:ui-monospace,monospace;word-break:break-all;background:#f3f4f6;padding:.5rem;border-radius:4px}
dt{font-weight:600;margin-top:1rem}</style></head>
<body><main><h1>{{.Heading}}</h1><p>{{.Text}}</p>
{{if .ShortURL}}<dl><dt>Short link</dt><dd class="url">{{.ShortURL}}</dd>
{{if .Title}}<dt>Title</dt><dd>{{.Title}}</dd>{{end}}
<dt>Destination</dt><dd class="url">{{.Destination}}</dd>
{{if .ExpiredURL}}<dt>Expired visitors go to</dt><dd class="url">{{.ExpiredURL}}</dd>{{end}}</dl>
{{if .Active}}<p><a href="{{.Destination}}" rel="noopener noreferrer nofollow">Continue to the destination</a></p>{{end}}{{end}}
</main></body></html>
`))

// pageSecurityPolicy lets the pages show their inline style and nothing else run or load.
var pageSecurityPolicy = []string{"default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}

func writeLinkPage(c echo.Context, status int, p linkPage) error {
	var buf bytes.Buffer
	if err := linkPageTemplate.Execute(&buf, p); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h["Cache-Control"] = pageNoStore
	h["X-Robots-Tag"] = noIndex
	h["Content-Security-Policy"] = pageSecurityPolicy
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	c.Response().WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := c.Response().Write(buf.Bytes())
	return err
}
