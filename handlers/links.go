package handlers

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/shortlink"
	"github.com/switchboard/switchboard/store"
)

// linkRules is the short-link configuration in the form the handlers use it.
type linkRules struct {
	// scheme is the scheme of the short base URL; every short URL uses it.
	scheme string
	// defaultDomain is the host[:port] of the short base URL, lower-case.
	defaultDomain string
	// domains are the short domains links may be created on (the default one included), lower-case.
	domains map[string]bool
	policy  shortlink.Policy
	// tombstone is how long a deleted or re-slugged link's slug stays reserved to its workspace.
	tombstone time.Duration
	// reserved is recomputed whenever routes are added (New, Mount).
	reserved atomic.Pointer[shortlink.Reserved]
}

// newLinkRules applies the defaults of LinkOptions: the short base URL is the product's base URL (or
// http://localhost when neither is set), the tombstone period 30 days.
func newLinkRules(baseURL string, o LinkOptions) (*linkRules, error) {
	if baseURL == "" {
		baseURL = "http://localhost"
	}
	short := o.ShortBaseURL
	if short == "" {
		short = baseURL
	}
	u, err := url.Parse(short)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("short base URL %q must be an absolute http(s) URL", short)
	}
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", baseURL, err)
	}
	r := &linkRules{scheme: u.Scheme, defaultDomain: strings.ToLower(u.Host), tombstone: o.TombstonePeriod,
		domains: map[string]bool{strings.ToLower(u.Host): true}}
	if r.tombstone <= 0 {
		r.tombstone = 30 * 24 * time.Hour
	}
	own := []string{u.Host, base.Host}
	for _, d := range o.Domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		r.domains[d] = true
		own = append(own, d)
	}
	r.policy = shortlink.NewPolicy(o.AllowedSchemes, o.BlockedHosts, own)
	empty := shortlink.NewReserved(shortlink.StaticReserved, nil)
	r.reserved.Store(&empty)
	return r, nil
}

// reserveRoutes makes the first path segment of every route of e a reserved slug, so that no link can shadow a
// page of the product (or a page added later under a new top-level path).
func (r *linkRules) reserveRoutes(e *echo.Echo) {
	var paths []string
	for _, rt := range e.Routes() {
		paths = append(paths, rt.Path)
	}
	set := shortlink.NewReserved(shortlink.StaticReserved, paths)
	r.reserved.Store(&set)
}

// shortURL is where a link answers.
func (r *linkRules) shortURL(domain, slug string) string {
	return shortlink.ShortURL(r.scheme, domain, slug)
}

// utmParams maps the API's UTM members to the query parameters stored on the link (and added by redirects).
var utmParams = []struct {
	name string
	get  func(*gen.LinkUTM) **string
}{
	{"utm_source", func(u *gen.LinkUTM) **string { return &u.Source }},
	{"utm_medium", func(u *gen.LinkUTM) **string { return &u.Medium }},
	{"utm_campaign", func(u *gen.LinkUTM) **string { return &u.Campaign }},
	{"utm_term", func(u *gen.LinkUTM) **string { return &u.Term }},
	{"utm_content", func(u *gen.LinkUTM) **string { return &u.Content }},
}

// storeUTM turns the API's UTM object into the link's query parameters; empty values are left out.
func storeUTM(u *gen.LinkUTM) map[string]string {
	out := map[string]string{}
	if u == nil {
		return out
	}
	for _, p := range utmParams {
		if v := *p.get(u); v != nil && *v != "" {
			out[p.name] = *v
		}
	}
	return out
}

// apiUTM is the inverse of storeUTM.
func apiUTM(m map[string]string) gen.LinkUTM {
	var u gen.LinkUTM
	for _, p := range utmParams {
		if v, ok := m[p.name]; ok {
			*p.get(&u) = &v
		}
	}
	return u
}

// apiLink maps a stored link to the API's Link: the one shape of a link in answers and in event payloads.
func (s *Server) apiLink(l store.Link) gen.Link {
	tags := l.Tags
	if tags == nil {
		tags = []string{}
	}
	meta := gen.LinkMetadata(l.Metadata)
	if meta == nil {
		meta = gen.LinkMetadata{}
	}
	return gen.Link{
		Id: l.ID, Object: "link", Domain: l.Domain, Slug: l.Slug, ShortUrl: s.links.shortURL(l.Domain, l.Slug),
		DestinationUrl: l.DestinationURL, Title: l.Title, Tags: tags, ExternalId: l.ExternalID, Utm: apiUTM(l.UTM),
		ExpiresAt: l.ExpiresAt, ExpiredUrl: l.ExpiredURL, MaxClicks: l.MaxClicks,
		RedirectType: gen.RedirectType(l.RedirectType), ForwardQuery: l.ForwardQuery, Metadata: meta,
		Archived: l.Archived, Status: gen.LinkStatus(l.Status(time.Now())), Clicks: l.Clicks,
		LastClickedAt: l.LastClickedAt, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
	}
}
