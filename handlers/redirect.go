package handlers

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/links/redirector"
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
	r, err := redirector.New(s.links, o.Clicks, o.Cache, s.log)
	if err != nil {
		return err
	}
	s.redirects = r
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

// redirect serves a short link: the redirector decides (the destination with its click recorded, the preview of
// /slug+, the expired answer, …) and this maps its decision to HTTP. For a cached link without max_clicks the
// decision does no I/O.
func (s *Server) redirect(c echo.Context) error {
	req := c.Request()
	// A client that mistyped a route gets the route problem, not the visitor's page.
	if !shortLinkPath(req.URL.Path) {
		return echo.ErrNotFound
	}
	d := s.redirects.Decide(req.Context(), redirector.Visit{Host: req.Host, Slug: c.Param("slug"),
		Head: req.Method == http.MethodHead, RequestURI: req.RequestURI, RawQuery: req.URL.RawQuery,
		UserAgent: req.Header.Get("User-Agent"), Referer: req.Header.Get("Referer"), IP: c.RealIP(), At: time.Now()})
	switch d.Outcome {
	case redirector.Redirect:
		return sendRedirect(c, d.Status, d.Location)
	case redirector.Preview:
		return s.previewPage(c, d.Preview)
	case redirector.Expired:
		return s.linkExpired(c, d.Location)
	case redirector.Unavailable:
		if d.Err != nil {
			loggerFrom(req.Context(), s.log).Warn("a short link cannot be served", "detail", d.Detail, "error", d.Err)
		}
		return s.linkUnavailable(c, d.Detail)
	}
	return s.noSuchLink(c)
}

// sendRedirect answers a visit with the link's redirect (status) to location.
func sendRedirect(c echo.Context, status int, location string) error {
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
func (s *Server) linkExpired(c echo.Context, u string) error {
	if u != "" {
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
