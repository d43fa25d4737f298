// Package automation is the automation capability: a workspace's custom event types (a JSON Schema each, published
// through the events outbox like the built-in ones), its sources — public ingest URLs whose requests are verified,
// de-duplicated and recorded as events before they are answered — and the request log that tells why a sender was
// refused.
package automation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/store"
)

// Defaults and limits.
const (
	// DefaultMaxBodyBytes and DefaultRatePerMinute are a source's limits unless it sets its own.
	DefaultMaxBodyBytes  = 256 << 10
	DefaultRatePerMinute = 3000
	// DefaultDedupWindow is how long a source remembers a de-duplication key unless it sets its own window.
	DefaultDedupWindow = 24 * time.Hour
	// DefaultTokenGrace is how long a rotated token keeps working unless the rotation says otherwise.
	DefaultTokenGrace = 24 * time.Hour
	// KeptRequests is how many requests of each source the log keeps.
	KeptRequests = 1000
	// pruneInterval is how often Run trims the request logs and expired de-duplication keys.
	pruneInterval = time.Minute
	// pruneBatch bounds one delete, so that the single SQLite writer is never held for long.
	pruneBatch = 5000
)

// Sealer seals and opens secrets with the server key (sealbox.Box): a source's verification secret is stored
// sealed, bound to the source's ID.
type Sealer interface {
	Seal(plaintext, associatedData []byte) string
	Open(sealed string, associatedData []byte) ([]byte, error)
}

// Config configures the service; zero values take the documented defaults.
type Config struct {
	// BaseURL is the public URL ingest URLs are built on (default http://localhost).
	BaseURL string
	// Box seals verification secrets; required.
	Box Sealer
	// Logger reports the failures of Run (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock signed timestamps are judged by (default time.Now).
	Now func() time.Time
	// Limiter holds the sources' request rates (default: in this process; a shared one, such as redislimit's,
	// makes them hold across replicas).
	Limiter ratelimit.Limiter
}

// Service is the automation capability. Its failures that a client can be told about are *problem.Error values.
type Service struct {
	db      *store.DB
	outbox  *events.Outbox
	types   *events.Registry
	box     Sealer
	base    string
	log     *slog.Logger
	now     func() time.Time
	limiter ratelimit.Limiter
	schemas schemaCache
	// commits writes accepted requests (event, deliveries, request log) of concurrent senders in shared
	// transactions: ingest is bound by commits, not by work.
	commits *store.GroupCommit

	// lastRateLog is when each source last logged a request refused for its rate: a flood of refusals is logged
	// once a second, so that it cannot turn into a flood of writes.
	rateLogMu   sync.Mutex
	lastRateLog map[string]time.Time
}

// New returns the service over an open, migrated database, publishing through outbox.
func New(db *store.DB, outbox *events.Outbox, cfg Config) (*Service, error) {
	if cfg.Box == nil {
		return nil, errors.New("automation: the service needs a Box")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://localhost"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New()
	}
	return &Service{db: db, outbox: outbox, types: outbox.Types(), box: cfg.Box, base: cfg.BaseURL, log: cfg.Logger,
		now: cfg.Now, limiter: cfg.Limiter, schemas: schemaCache{m: map[string]cachedSchema{}},
		lastRateLog: map[string]time.Time{}, commits: store.NewGroupCommit(db, 0)}, nil
}

// LoadTypes defines every workspace's custom types in the registry, so that webhooks can subscribe to them and the
// catalogue lists them; the server calls it at start. Types changed later by another process are read again when
// they are published or listed.
func (s *Service) LoadTypes(ctx context.Context) error {
	ts, err := s.db.EventTypes.All(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := s.define(t); err != nil {
			return err
		}
	}
	return nil
}

// Workspace returns a workspace (for GET /api/v1/me). Returns a NotFound problem if it does not exist.
func (s *Service) Workspace(ctx context.Context, id string) (store.Workspace, error) {
	w, err := s.db.Workspaces.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return w, problem.Errorf(problem.NotFound, "There is no workspace %s.", id)
	}
	return w, err
}

// Run trims the sources' request logs to their newest KeptRequests and deletes expired de-duplication keys, every
// minute until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.Prune(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("automation: prune request logs", "error", err)
		}
	}
}

// Prune runs one round of Run's trimming.
func (s *Service) Prune(ctx context.Context) error {
	for {
		n, err := s.db.SourceRequests.Prune(ctx, KeptRequests, pruneBatch)
		if err != nil {
			return err
		}
		if n < pruneBatch {
			break
		}
	}
	for {
		n, err := s.db.SourceRequests.PruneDedupKeys(ctx, pruneBatch)
		if err != nil || n < pruneBatch {
			return err
		}
	}
}
