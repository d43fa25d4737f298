package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Model is one model an upstream serves.
type Model struct {
	ID       string
	OwnedBy  string
	Created  int64
	Upstream string
}

// Config configures the Service; zero values take the defaults.
type Config struct {
	Upstreams []Upstream
	// Client makes every call to the upstreams (the process's egress guard's client: an operator's upstream on a
	// private network needs --webhook-allowed-networks like any other outbound target). Required.
	Client *http.Client
	// Refresh is how old a model list may be before it is fetched again (default DefaultRefresh).
	Refresh time.Duration
	// Limits are each workspace's quotas of completions (zero fields: no limit).
	Limits Limits
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultRefresh is how long a fetched model list is served before it is fetched again.
const DefaultRefresh = 5 * time.Minute

// maxListBody bounds an upstream's GET /models answer (OpenAI's own is about 20 KiB).
const maxListBody = 4 << 20

// modelID is the API's ModelID pattern: a model whose ID does not fit (an ID with a "/", as some servers name them)
// cannot be addressed by GET /api/v1/models/{model} and is left out of the list.
var modelID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Service lists the upstreams' models and passes completions to them.
type Service struct {
	cfg   Config
	log   *slog.Logger
	usage *usage

	mu sync.Mutex
	// lists holds each upstream's last fetched list (kept when a later fetch fails); fetched when it was fetched.
	lists      map[string][]Model
	fetched    time.Time
	refreshing bool
	// ready is closed once the first refresh ended, so that the first readers wait for it and later ones do not.
	ready chan struct{}
}

// New returns a service over the configured upstreams; with none, Configured is false and the caller serves its
// catalogue.
func New(cfg Config) *Service {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, log: cfg.Logger, usage: newUsage(cfg.Limits), lists: map[string][]Model{},
		ready: make(chan struct{})}
}

// Configured reports whether the operator configured any upstream.
func (s *Service) Configured() bool { return s != nil && len(s.cfg.Upstreams) > 0 }

// Models returns the models of every upstream, in the order of the upstreams, each ID once (the first upstream
// that serves it wins). A list older than Refresh is served while a fresh one is fetched in the background; only
// the first call waits for the upstreams (or for ctx).
func (s *Service) Models(ctx context.Context) []Model {
	s.mu.Lock()
	stale := s.cfg.Now().Sub(s.fetched) >= s.cfg.Refresh
	if stale && !s.refreshing {
		s.refreshing = true
		// Detached from ctx: a client that goes away must not cancel the fetch every other request waits for.
		go s.refresh(context.WithoutCancel(ctx))
	}
	s.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Model
	seen := map[string]bool{}
	for _, u := range s.cfg.Upstreams {
		for _, m := range s.lists[u.Name] {
			if !seen[m.ID] {
				seen[m.ID] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// Lookup returns the model with an ID and its upstream.
func (s *Service) Lookup(ctx context.Context, id string) (Model, Upstream, bool) {
	for _, m := range s.Models(ctx) {
		if m.ID == id {
			for _, u := range s.cfg.Upstreams {
				if u.Name == m.Upstream {
					return m, u, true
				}
			}
		}
	}
	return Model{}, Upstream{}, false
}

// refresh fetches every upstream's list; an upstream that fails keeps its previous list.
func (s *Service) refresh(ctx context.Context) {
	fetched := map[string][]Model{}
	for _, u := range s.cfg.Upstreams {
		ms, err := s.fetch(ctx, u)
		if err != nil {
			s.log.Warn("model upstream list failed; its last list is kept", "upstream", u.Name, "error", err)
			continue
		}
		fetched[u.Name] = ms
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ms := range fetched {
		s.lists[name] = ms
	}
	s.fetched = s.cfg.Now()
	s.refreshing = false
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// listTimeout bounds one upstream's GET /models.
const listTimeout = 15 * time.Second

// fetch reads an upstream's GET /models (OpenAI's list: {"object": "list", "data": [{"id", "object", "created",
// "owned_by"}]}), narrowed to its allow-list.
func (s *Service) fetch(ctx context.Context, u Upstream) ([]Model, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.BaseURL+"/models", nil)
	if err != nil {
		return nil, err
	}
	authorize(req, u)
	res, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /models answered %d", res.StatusCode)
	}
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxListBody)).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /models: %w", err)
	}
	var out []Model
	for _, m := range list.Data {
		if !modelID.MatchString(m.ID) || (u.Models != nil && !slices.Contains(u.Models, m.ID)) {
			continue
		}
		owner := m.OwnedBy
		if owner == "" || len(owner) > 128 {
			owner = u.Name
		}
		out = append(out, Model{ID: m.ID, OwnedBy: owner, Created: max(m.Created, 0), Upstream: u.Name})
	}
	return out, nil
}

func authorize(req *http.Request, u Upstream) {
	if u.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+u.APIKey)
	}
}
