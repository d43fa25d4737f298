package handlers

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// RedirectOptions configures the public redirects of short links.
type RedirectOptions struct {
	// Clicks records every redirect. Without a recorder the server answers no short links: a redirect that could
	// not be counted is never served.
	Clicks *clicks.Recorder
	// Cache tunes the in-process cache of resolved links (defaults: 100 000 entries, 5 min, 30 s for unknown slugs).
	Cache linkcache.Config
	// ExpiryCheck is how often links that reached expires_at are looked for, to emit link.expired (default 30 s).
	ExpiryCheck time.Duration
}

// redirector is the state of the redirect route: the cache, the recorder and the background work (following link
// changes, announcing expiries).
type redirector struct {
	clicks *clicks.Recorder
	cache  *linkcache.Cache[*redirectTarget]
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// refusing is set from the first redirect refused because its click could not be recorded until one is served
	// again: at overload every redirect is refused, and one log line says so (the recorder counts the refusals).
	refusing atomic.Bool
}

// redirectTarget is a link resolved for redirects: everything a redirect needs, computed once when the link is
// read, so that serving it builds one string at most.
type redirectTarget struct {
	id     string
	status int
	// location is the destination with the link's UTM parameters; base and fragment are it cut before the "#",
	// where forwarded visitor parameters go.
	location, base, fragment string
	// names are the query parameters the destination (with UTM) already has: visitor parameters of those names
	// are not forwarded. nil when the query is not forwarded.
	names    map[string]struct{}
	hasQuery bool
	// cacheControl is shared, read-only, by every response of the link.
	cacheControl []string
	expiresAt    time.Time // zero: never
	expiredURL   string
	capped       bool // the link has max_clicks
	// reached is set once an admission found the cap reached: later human clicks are refused without asking the
	// database (an update lifting the cap invalidates the cached target).
	reached atomic.Bool
	// For the preview page.
	title, shortURL string
}

var (
	noStore     = []string{"private, no-store"}
	shortCache  = []string{"public, max-age=300"}
	noIndex     = []string{"noindex"}
	pageNoStore = []string{"no-store"}
)

// registerRedirects adds GET and HEAD /:slug (and /:slug+, the preview). Echo prefers static routes to parameters,
// so every page of the product keeps its path; slugs that name a route are refused when links are created.
func (s *Server) registerRedirects(e *echo.Echo) {
	o := s.cfg.Redirects
	if o.Clicks == nil {
		return
	}
	if o.ExpiryCheck <= 0 {
		o.ExpiryCheck = 30 * time.Second
	}
	r := &redirector{clicks: o.Clicks}
	r.cache = linkcache.New(s.resolveTarget, o.Cache)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.cache.Follow(ctx, s.db.LinkChanges) }()
	go func() { defer r.wg.Done(); s.announceExpiries(ctx, o.ExpiryCheck) }()
	s.redirects = r
	e.GET(redirectRoute, s.redirect)
	e.HEAD(redirectRoute, s.redirect)
}

// redirectRoute is the route of short links. Its requests get no access log line: every redirect served is
// recorded as a click, and the HTTP metrics count every answer.
const redirectRoute = "/:slug"

// closeRedirects stops the background work of the redirects (the recorder is closed by its owner).
func (s *Server) closeRedirects() {
	if s.redirects != nil {
		s.redirects.cancel()
		s.redirects.wg.Wait()
	}
}

// redirect serves a short link: the destination (with UTM and the visitor's query), the expired answer, or the
// preview page of /slug+. For a cached link without max_clicks it does no I/O: it reads the cache, builds the
// Location and hands the click's raw facts to the recorder.
func (s *Server) redirect(c echo.Context) error {
	req := c.Request()
	slug, preview := strings.CutSuffix(c.Param("slug"), "+")
	if !links.ValidSlug(slug) {
		return s.noSuchLink(c)
	}
	now := time.Now()
	key := store.LinkKey{Domain: s.redirectDomain(req.Host), SlugKey: store.SlugKey(slug)}
	t, found, err := s.redirects.cache.Get(req.Context(), key, now)
	if err != nil {
		loggerFrom(req.Context(), s.log).Warn("short link lookup failed", "error", err)
		return s.linkUnavailable(c, "The short link cannot be looked up right now.")
	}
	if !found {
		return s.noSuchLink(c)
	}
	if preview {
		return s.previewPage(c, t, now)
	}
	head := req.Method == http.MethodHead
	ua := req.Header.Get("User-Agent")
	if !t.expiresAt.IsZero() && !now.Before(t.expiresAt) {
		return s.linkExpired(c, t)
	}
	var class string
	if t.capped {
		if t.reached.Load() {
			return s.linkExpired(c, t)
		}
		// Only people spend the cap: the class must be known before the admission.
		if class = s.redirects.clicks.Classify(head, ua); class == store.ClickHuman {
			admitted, err := s.db.Links.AdmitClick(req.Context(), t.id, s.maxClicksReached)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// The link lost its cap or was deleted a moment ago: serve it as it was when the request came.
				s.redirects.cache.Invalidate(key)
			case err != nil:
				loggerFrom(req.Context(), s.log).Warn("max_clicks admission failed", "link_id", t.id, "error", err)
				return s.linkUnavailable(c, "The short link cannot be checked right now.")
			case !admitted:
				t.reached.Store(true)
				return s.linkExpired(c, t)
			}
		}
	}
	err = s.redirects.clicks.Record(clicks.Hit{ID: clicks.NewHitID(now), At: now, LinkID: t.id, Class: class, Head: head,
		UserAgent: ua, Referer: req.Header.Get("Referer"), IP: c.RealIP()})
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
	h := c.Response().Header()
	h["Location"] = []string{t.locationFor(req.URL.RawQuery)}
	h["Cache-Control"] = t.cacheControl
	h["X-Robots-Tag"] = noIndex
	c.Response().WriteHeader(t.status)
	return nil
}

// redirectDomain maps the request's host to the short domain it serves: a configured short domain answers as
// itself, any other host (the product's own, an address, a proxy's name) as the default short domain.
func (s *Server) redirectDomain(host string) string {
	if s.links.domains[host] {
		return host
	}
	if lower := strings.ToLower(strings.TrimSuffix(host, ".")); s.links.domains[lower] {
		return lower
	}
	return s.links.defaultDomain
}

// resolveTarget reads a link for the cache and precomputes its redirect.
func (s *Server) resolveTarget(ctx context.Context, key store.LinkKey) (*redirectTarget, bool, error) {
	l, err := s.db.Links.Resolve(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return s.newTarget(l), true, nil
}

func (s *Server) newTarget(l store.Link) *redirectTarget {
	t := &redirectTarget{id: l.ID, status: l.RedirectType, capped: l.MaxClicks != nil,
		shortURL: s.links.shortURL(l.Domain, l.Slug), cacheControl: noStore}
	if l.RedirectType == http.StatusMovedPermanently || l.RedirectType == http.StatusPermanentRedirect {
		t.cacheControl = shortCache
	}
	if l.Title != nil {
		t.title = *l.Title
	}
	if l.ExpiresAt != nil {
		t.expiresAt = *l.ExpiresAt
	}
	if l.ExpiredURL != nil {
		t.expiredURL = *l.ExpiredURL
	}
	if l.Status(time.Now()) == store.LinkMaxClicksReached {
		t.reached.Store(true)
	}
	t.base, t.fragment, t.names, t.hasQuery = withUTM(l.DestinationURL, l.UTM)
	t.location = t.base + t.fragment
	if !l.ForwardQuery {
		t.names = nil
	}
	return t
}

// withUTM adds the link's UTM parameters to an http(s) destination (replacing parameters of the same names) and
// returns it cut before the fragment, the fragment ("#…" or ""), the names of its query parameters and whether it
// has a query. The destination's bytes are kept as they are: only the query changes, and only when there are UTM
// parameters. Other schemes (mailto:, tel:, app links) are returned unchanged, with nil names: nothing is added to
// them.
func withUTM(dest string, utm map[string]string) (base, fragment string, names map[string]struct{}, hasQuery bool) {
	base = dest
	if i := strings.IndexByte(dest, '#'); i >= 0 {
		base, fragment = dest[:i], dest[i:]
	}
	scheme, _, _ := strings.Cut(base, ":")
	if !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return dest, "", nil, false
	}
	path, query, hasQuery := strings.Cut(base, "?")
	var pairs []string
	if query != "" {
		pairs = strings.Split(query, "&")
	}
	if len(utm) > 0 {
		keep := pairs[:0:0]
		for _, p := range pairs {
			if _, ok := utm[paramName(p)]; !ok {
				keep = append(keep, p)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(utm)) {
			keep = append(keep, url.QueryEscape(name)+"="+url.QueryEscape(utm[name]))
		}
		pairs = keep
		hasQuery = true
		base = path + "?" + strings.Join(pairs, "&")
	}
	names = make(map[string]struct{}, len(pairs))
	for _, p := range pairs {
		if n := paramName(p); n != "" {
			names[n] = struct{}{}
		}
	}
	return base, fragment, names, hasQuery
}

// paramName is the decoded name of a query pair ("" when it cannot be decoded).
func paramName(pair string) string {
	name, _, _ := strings.Cut(pair, "=")
	n, err := url.QueryUnescape(name)
	if err != nil {
		return ""
	}
	return n
}

// maxForwardedQuery is the longest visitor query forwarded; a longer one is not forwarded at all.
const maxForwardedQuery = 4096

// locationFor is the Location of a redirect for a visitor's raw query: the visitor's parameters are added when
// the link forwards the query, except those whose names the destination or the UTM parameters already have (the
// link's own parameters always win). Parameters are decoded and re-encoded, so nothing the visitor sends can
// change the destination's scheme, host, path or fragment.
func (t *redirectTarget) locationFor(rawQuery string) string {
	if t.names == nil || rawQuery == "" || len(rawQuery) > maxForwardedQuery {
		return t.location
	}
	var extra strings.Builder
	for pair := range strings.SplitSeq(rawQuery, "&") {
		rawName, rawValue, hasValue := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil || name == "" {
			continue
		}
		if _, taken := t.names[name]; taken {
			continue
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			continue
		}
		if extra.Len() > 0 {
			extra.WriteByte('&')
		}
		extra.WriteString(url.QueryEscape(name))
		if hasValue {
			extra.WriteByte('=')
			extra.WriteString(url.QueryEscape(value))
		}
	}
	if extra.Len() == 0 {
		return t.location
	}
	sep := "?"
	if t.hasQuery {
		sep = "&"
		if strings.HasSuffix(t.base, "?") {
			sep = ""
		}
	}
	return t.base + sep + extra.String() + t.fragment
}

// maxClicksReached emits link.max_clicks_reached in the transaction of the admission that reached the cap. The
// admitted clicks are human clicks on their way to the click table (the recorder writes them within moments), so
// the event counts them already.
func (s *Server) maxClicksReached(ctx context.Context, tx bun.Tx, l store.Link) error {
	l.Clicks = max(l.Clicks, l.AdmittedClicks)
	return s.emit(ctx, tx, l.WorkspaceID, gen.LinkMaxClicksReachedEvent{Link: s.apiLink(l)})
}

// announceExpiries emits link.expired, once per link, for links whose expires_at has passed, every interval until
// ctx ends. Several processes may run it (PostgreSQL claims skip each other's rows).
func (s *Server) announceExpiries(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.announceExpired(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("link.expired notifier failed; retrying at the next check", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// announceExpired emits link.expired for every link that expired at now and was not announced yet, in batches.
func (s *Server) announceExpired(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n, err := s.db.Links.AnnounceExpired(ctx, now, 100, func(ctx context.Context, tx bun.Tx, l store.Link) error {
			return s.emit(ctx, tx, l.WorkspaceID, gen.LinkExpiredEvent{Link: s.apiLink(l)})
		})
		total += n
		if err != nil || n < 100 {
			return total, err
		}
	}
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
func (s *Server) linkExpired(c echo.Context, t *redirectTarget) error {
	if t.expiredURL != "" {
		h := c.Response().Header()
		h["Location"] = []string{t.expiredURL}
		h["Cache-Control"] = noStore
		h["X-Robots-Tag"] = noIndex
		c.Response().WriteHeader(http.StatusFound)
		return nil
	}
	return refuseVisit(c, newProblem(problem.LinkExpired, "This short link has expired or reached its click limit."),
		linkPage{Heading: "This short link has expired", Text: "The link you followed is no longer active."})
}

// previewPage shows where a short link goes, without sending the visitor there or counting a click.
func (s *Server) previewPage(c echo.Context, t *redirectTarget, now time.Time) error {
	p := linkPage{Heading: "Where this short link goes", ShortURL: t.shortURL, Title: t.title, Destination: t.location}
	if !t.expiresAt.IsZero() && !now.Before(t.expiresAt) || t.reached.Load() {
		p.Text = "This link has expired: it no longer sends visitors to its destination."
		p.ExpiredURL = t.expiredURL
	} else {
		p.Text = "Following it takes you to the address below. Make sure you trust it before you continue."
		p.Active = true
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
var pageSecurityPolicy = []string{"default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"}

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
