package links

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Defaults of Config.
const (
	// DefaultTombstonePeriod is how long a deleted or re-slugged link's slug stays reserved to its workspace.
	DefaultTombstonePeriod = 30 * 24 * time.Hour
	// DefaultExpiryCheck is how often Run looks for links that reached expires_at.
	DefaultExpiryCheck = 30 * time.Second
)

// Config configures the short-link capability; zero values take the documented defaults.
type Config struct {
	// BaseURL is the public URL of the product (default http://localhost): the default short base URL, and a host
	// no destination may point to.
	BaseURL string
	// ShortBaseURL is the origin short URLs are built on (default BaseURL). Its host is the default short domain;
	// redirects answer on it and on the product's own host.
	ShortBaseURL string
	// Domains are further short domains links may be created on (host[:port]).
	Domains []string
	// AllowedSchemes are destination URL schemes allowed besides http and https, such as "mailto" or "tel".
	AllowedSchemes []string
	// BlockedHosts refuses destinations on these hosts and their subdomains.
	BlockedHosts []string
	// TombstonePeriod keeps a deleted link's slug reserved to its workspace (default DefaultTombstonePeriod).
	TombstonePeriod time.Duration
	// ExpiryCheck is how often Run looks for links that reached expires_at, to emit link.expired (default
	// DefaultExpiryCheck).
	ExpiryCheck time.Duration
	// Logger receives the failures that reach no client: expiry checks and bulk chunks (default slog.Default()).
	Logger *slog.Logger
}

// Service is the short-link capability: it checks links beyond the API's schema, stores them with their events
// (the transactional outbox) and announces their short URLs to the redirect caches, reads their statistics, and
// serves the redirect side (resolving links for the cache, admitting clicks against max_clicks, announcing
// expiries).
type Service struct {
	db     *store.DB
	events *events.Outbox
	log    *slog.Logger
	// scheme is the scheme of the short base URL; every short URL uses it.
	scheme string
	// defaultDomain is the host[:port] of the short base URL, lower-case.
	defaultDomain string
	// domains are the short domains links may be created on (the default one included), lower-case.
	domains     map[string]bool
	policy      Policy
	tombstone   time.Duration
	expiryCheck time.Duration
	// reserved is replaced whenever the HTTP layer adds routes (ReserveRoutes).
	reserved atomic.Pointer[Reserved]
	// drawSlug draws a random slug (Generate; tests draw collisions with their own).
	drawSlug func() string
}

// New returns the service over an open, migrated database, recording events in outbox. It fails when the short
// base URL is not an absolute http(s) URL.
func New(db *store.DB, outbox *events.Outbox, cfg Config) (*Service, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://localhost"
	}
	if cfg.ShortBaseURL == "" {
		cfg.ShortBaseURL = cfg.BaseURL
	}
	if cfg.TombstonePeriod <= 0 {
		cfg.TombstonePeriod = DefaultTombstonePeriod
	}
	if cfg.ExpiryCheck <= 0 {
		cfg.ExpiryCheck = DefaultExpiryCheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	short, err := url.Parse(cfg.ShortBaseURL)
	if err != nil || short.Host == "" || (short.Scheme != "http" && short.Scheme != "https") {
		return nil, fmt.Errorf("short base URL %q must be an absolute http(s) URL", cfg.ShortBaseURL)
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", cfg.BaseURL, err)
	}
	s := &Service{db: db, events: outbox, log: cfg.Logger, scheme: short.Scheme,
		defaultDomain: strings.ToLower(short.Host), domains: map[string]bool{strings.ToLower(short.Host): true},
		tombstone: cfg.TombstonePeriod, expiryCheck: cfg.ExpiryCheck, drawSlug: Generate}
	own := []string{short.Host, base.Host}
	for _, d := range cfg.Domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		s.domains[d] = true
		own = append(own, d)
	}
	s.policy = NewPolicy(cfg.AllowedSchemes, cfg.BlockedHosts, own)
	s.ReserveRoutes(nil)
	return s, nil
}

// ReserveRoutes makes the first path segment of every route path of the product a reserved slug (besides
// StaticReserved), so that no link can shadow a page of the product. The HTTP layer calls it whenever it adds
// routes; it replaces the paths of the call before.
func (s *Service) ReserveRoutes(routePaths []string) {
	set := NewReserved(StaticReserved, routePaths)
	s.reserved.Store(&set)
}

// Domains returns the short domains links may be created on, the default one first and the others in order.
func (s *Service) Domains() []string {
	out := []string{s.defaultDomain}
	for _, d := range slices.Sorted(maps.Keys(s.domains)) {
		if d != s.defaultDomain {
			out = append(out, d)
		}
	}
	return out
}

// ShortURL is where a link answers.
func (s *Service) ShortURL(l Link) string { return s.shortURL(l.Domain, l.Slug) }

// shortURL is where a link answers.
func (s *Service) shortURL(domain, slug string) string { return ShortURL(s.scheme, domain, slug) }

// notFound is the problem of a link the workspace does not have.
func notFound(id string) *problem.Error {
	return problem.Errorf(problem.NotFound, "There is no link %s in this workspace.", id)
}

// storeError maps the store's errors about a link (id) to the problems a client is told; other errors are internal
// and returned as they are.
func storeError(err error, id string) error {
	var (
		slug     *store.SlugTakenError
		external *store.ExternalIDTakenError
	)
	switch {
	case errors.As(err, &slug):
		return problem.Errorf(problem.SlugTaken, "The slug %q is taken on %s.", slug.Slug, slug.Domain)
	case errors.As(err, &external):
		return problem.Errorf(problem.ExternalIDTaken, "Another link of this workspace has external_id %q.",
			external.ExternalID)
	case errors.Is(err, store.ErrNotFound):
		return notFound(id)
	case errors.Is(err, store.ErrConflict):
		return problem.New(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}
