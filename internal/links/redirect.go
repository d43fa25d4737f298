package links

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
)

// Target is a link resolved for redirects: everything a redirect needs, computed once when the link is read, so
// that serving it builds one string at most. It is shared by every redirect of the link; only the admission state
// of a capped link changes.
type Target struct {
	id     string
	status int
	// location is the destination with the link's UTM parameters; base and fragment are it cut before the "#",
	// where forwarded visitor parameters go.
	location, base, fragment string
	// names are the query parameters the destination (with UTM) already has: visitor parameters of those names
	// are not forwarded. nil when the query is not forwarded.
	names      map[string]struct{}
	hasQuery   bool
	expiresAt  time.Time // zero: never
	expiredURL string
	capped     bool // the link has max_clicks
	// reached is set once an admission found the cap reached: later human clicks are refused without asking the
	// database (an update lifting the cap invalidates the cached target).
	reached atomic.Bool
	// For the preview page.
	title, shortURL string
}

// ID is the link's ID.
func (t *Target) ID() string { return t.id }

// Status is the link's redirect type: 301, 302, 307 or 308.
func (t *Target) Status() int { return t.status }

// Expired reports whether the link no longer sends visitors to its destination at now: its expires_at passed, or
// an admission found its max_clicks reached.
func (t *Target) Expired(now time.Time) bool {
	return !t.expiresAt.IsZero() && !now.Before(t.expiresAt) || t.reached.Load()
}

// ExpiredURL is where visitors of the expired link go ("" when nowhere: they are told it expired).
func (t *Target) ExpiredURL() string { return t.expiredURL }

// Capped reports whether the link has max_clicks: its human visits must be admitted (Service.Admit).
func (t *Target) Capped() bool { return t.capped }

// Preview is what the preview page of a short link shows.
type Preview struct {
	ShortURL, Title, Destination string
	// Active is false once the link expired; ExpiredURL is then where its visitors go.
	Active     bool
	ExpiredURL string
}

// Preview describes the link at now for its preview page.
func (t *Target) Preview(now time.Time) Preview {
	p := Preview{ShortURL: t.shortURL, Title: t.title, Destination: t.location, Active: !t.Expired(now)}
	if !p.Active {
		p.ExpiredURL = t.expiredURL
	}
	return p
}

// Key is the short URL a redirect request names: a configured short domain answers as itself, any other host (the
// product's own, an address, a proxy's name) as the default short domain; slugs compare case-insensitively.
func (s *Service) Key(host, slug string) store.LinkKey {
	domain := s.defaultDomain
	if s.domains[host] {
		domain = host
	} else if lower := strings.ToLower(strings.TrimSuffix(host, ".")); s.domains[lower] {
		domain = lower
	}
	return store.LinkKey{Domain: domain, SlugKey: store.SlugKey(slug)}
}

// Resolve reads the link at key and precomputes its redirect; found is false when no link answers there. It is the
// loader of the redirect cache. Errors are the database's.
func (s *Service) Resolve(ctx context.Context, key store.LinkKey) (t *Target, found bool, err error) {
	l, err := s.db.Links.Resolve(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return s.target(l), true, nil
}

func (s *Service) target(l store.Link) *Target {
	t := &Target{id: l.ID, status: l.RedirectType, capped: l.MaxClicks != nil, shortURL: s.shortURL(l.Domain, l.Slug)}
	if l.Title != nil {
		t.title = *l.Title
	}
	if l.ExpiresAt != nil {
		t.expiresAt = *l.ExpiresAt
	}
	if l.ExpiredURL != nil {
		t.expiredURL = *l.ExpiredURL
	}
	if linkOf(l).Status(time.Now()) == StatusMaxClicksReached {
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

// Location is the Location of a redirect for a visitor's raw query: the visitor's parameters are added when the
// link forwards the query, except those whose names the destination or the UTM parameters already have (the
// link's own parameters always win). Parameters are decoded and re-encoded, so nothing the visitor sends can
// change the destination's scheme, host, path or fragment.
func (t *Target) Location(rawQuery string) string {
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

// Admission is the answer to a visit of a link with max_clicks.
type Admission int

// Admissions.
const (
	// Admitted: the visit is served.
	Admitted Admission = iota
	// Refused: the cap is reached; the visit gets the expired answer.
	Refused
	// Changed: the link lost its cap or was deleted a moment ago. The visit is served as the link was when it came;
	// the target is out of date.
	Changed
)

// Admit decides a visit of a capped link's target (one that is not Capped is always admitted). Only people spend
// the cap (class is the visit's click class): of any number of concurrent human visits, in any number of
// processes, exactly the cap is admitted, and the admission that reaches it emits link.max_clicks_reached in its
// transaction. Once the cap is found reached, later visits are refused without asking the database. Errors are
// the database's.
func (s *Service) Admit(ctx context.Context, t *Target, class string) (Admission, error) {
	switch {
	case t.reached.Load():
		return Refused, nil
	case !t.capped || class != store.ClickHuman:
		return Admitted, nil
	}
	admitted, err := s.db.Links.AdmitClick(ctx, t.id, s.maxClicksReached)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Changed, nil
	case err != nil:
		return Admitted, err
	case !admitted:
		t.reached.Store(true)
		return Refused, nil
	}
	return Admitted, nil
}

// maxClicksReached emits link.max_clicks_reached in the transaction of the admission that reached the cap. The
// admitted clicks are human clicks on their way to the click table (the recorder writes them within moments), so
// the event counts them already.
func (s *Service) maxClicksReached(ctx context.Context, tx store.Tx, l store.Link) error {
	l.Clicks = max(l.Clicks, l.AdmittedClicks)
	return s.emit(ctx, tx, l.WorkspaceID, gen.LinkMaxClicksReachedEvent{Link: s.API(linkOf(l))})
}
