// Package redirector decides what a visit of a short link gets: the link's redirect (its click recorded), the
// preview, the expired answer, "no such link", or "unavailable" — hop detection, click classification, max_clicks
// admission and recording included. It knows nothing of HTTP: the handler maps a Decision to a response.
package redirector

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/hops"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/store"
)

// Links is what the redirector needs of the links service.
type Links interface {
	// Key is the short URL a request for slug at host names.
	Key(host, slug string) store.LinkKey
	// Admit decides a human visit of a capped link.
	Admit(ctx context.Context, t *links.Target, class string) (links.Admission, error)
}

// Redirector decides visits. Make one with New; it is safe for concurrent use.
type Redirector struct {
	links  Links
	clicks *clicks.Recorder
	cache  *linkcache.Cache[*links.Target]
	log    *slog.Logger
	// hops remembers the redirects just sent, so that a client following one back here (a loop, or a chain through
	// a name of this server) is not counted as a click again.
	hops *hops.Memory
	// refusing is set from the first visit refused because its click could not be recorded until one is served
	// again: at overload every visit is refused, and one log line says so (the recorder counts the refusals).
	refusing atomic.Bool
}

// New makes a redirector over the links service, the click recorder and the cache of resolved links.
func New(l Links, recorder *clicks.Recorder, cache *linkcache.Cache[*links.Target], log *slog.Logger) (*Redirector, error) {
	if l == nil || recorder == nil || cache == nil {
		return nil, errors.New("redirects need the links service, a click recorder and a link cache")
	}
	return &Redirector{links: l, clicks: recorder, cache: cache, log: log, hops: hops.New(0)}, nil
}

// Visit is a request for a short link, as the redirector needs it.
type Visit struct {
	// Host is the request's host; Slug the path's one segment, "+" at its end asking for the preview.
	Host, Slug string
	// Head is a HEAD request (it counts, as a click of its own class).
	Head bool
	// RequestURI is the request's target as sent (hop detection compares it with the Locations sent).
	RequestURI string
	// RawQuery is the visitor's query, forwarded to the destination where the link says so.
	RawQuery               string
	UserAgent, Referer, IP string
	At                     time.Time
}

// Outcome is the kind of answer a visit gets.
type Outcome int

const (
	// NotFound: no link has this slug (or it is not a slug).
	NotFound Outcome = iota
	// Unavailable: the link cannot be looked up or admitted, or its click cannot be recorded: a 503, try later.
	Unavailable
	// Preview: the preview page (Decision.Preview).
	Preview
	// Expired: the link expired or reached its click limit; Decision.Location is its expired_url, or "".
	Expired
	// Redirect: to Decision.Location with Decision.Status; the click is recorded (or was a followed hop).
	Redirect
)

// Decision is the answer to a visit.
type Decision struct {
	Outcome Outcome
	// Status is the redirect's status (301, 302, 307, 308) for Redirect.
	Status int
	// Location is where Redirect sends the visitor, or the expired_url of Expired.
	Location string
	// Preview is the preview page's content.
	Preview links.Preview
	// Detail says why a visit is Unavailable; Err is the fault behind it, for the caller's log.
	Detail string
	Err    error
}

// Decide answers one visit.
func (r *Redirector) Decide(ctx context.Context, v Visit) Decision {
	slug, preview := strings.CutSuffix(v.Slug, "+")
	if !links.ValidSlug(slug) {
		return Decision{Outcome: NotFound}
	}
	key := r.links.Key(v.Host, slug)
	t, found, err := r.cache.Get(ctx, key, v.At)
	switch {
	case err != nil:
		return Decision{Outcome: Unavailable, Detail: "The short link cannot be looked up right now.", Err: err}
	case !found:
		return Decision{Outcome: NotFound}
	case preview:
		return Decision{Outcome: Preview, Preview: t.Preview(v.At)}
	case t.Expired(v.At):
		return Decision{Outcome: Expired, Location: t.ExpiredURL()}
	}
	location := t.Location(v.RawQuery)
	// A request made by following a redirect of ours is no visit: it is redirected again (a chain goes on, a loop
	// ends where the client's hop limit is) but counts no click and spends no max_clicks.
	if r.hops.Followed(v.IP, v.Host, v.RequestURI, v.At) {
		r.hops.Sent(v.IP, location, v.At)
		return Decision{Outcome: Redirect, Status: t.Status(), Location: location}
	}
	var class string
	if t.Capped() {
		// Only people spend the cap: the class must be known before the admission.
		class = r.clicks.Classify(v.Head, v.UserAgent)
		admission, err := r.links.Admit(ctx, t, class)
		switch {
		case err != nil:
			return Decision{Outcome: Unavailable, Detail: "The short link cannot be checked right now.", Err: err}
		case admission == links.Refused:
			return Decision{Outcome: Expired, Location: t.ExpiredURL()}
		case admission == links.Changed:
			r.cache.Invalidate(key)
		}
	}
	err = r.clicks.Record(clicks.Hit{ID: clicks.NewHitID(v.At), At: v.At, LinkID: t.ID(), Class: class, Head: v.Head,
		UserAgent: v.UserAgent, Referer: v.Referer, IP: v.IP})
	if err != nil {
		if !r.refusing.Swap(true) {
			r.log.ErrorContext(ctx, "redirects are refused: their clicks cannot be recorded "+
				"(logged once until a redirect is served again)", "error", err)
		}
		return Decision{Outcome: Unavailable, Detail: "Clicks cannot be recorded right now."}
	}
	if r.refusing.Load() && r.refusing.Swap(false) {
		r.log.InfoContext(ctx, "redirects are served again: their clicks are recorded")
	}
	r.hops.Sent(v.IP, location, v.At)
	return Decision{Outcome: Redirect, Status: t.Status(), Location: location}
}
