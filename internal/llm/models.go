package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
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
	// DB and Box, when set, add each workspace's own upstreams (store.ModelUpstreams, keys sealed with Box) to
	// what that workspace sees.
	DB  *store.DB
	Box *sealbox.Box
	// Guard checks the URLs of workspaces' upstreams when they are added (the Client's guard).
	Guard *egress.Guard
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
	// base is the operator's upstreams' models, rebuilt whenever lists changes.
	base *modelSet
	// own caches the lists of workspaces' upstreams by upstream ID.
	own map[string]ownList
	// rows caches each workspace's upstreams (see ownRowsTTL).
	rows map[string]ownRows
}

// ownList is a workspace upstream's last fetched list.
type ownList struct {
	models  []Model
	fetched time.Time
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
	s := &Service{cfg: cfg, log: cfg.Logger, usage: newUsage(cfg.Limits), lists: map[string][]Model{},
		ready: make(chan struct{}), own: map[string]ownList{}, rows: map[string]ownRows{}}
	s.base = s.operatorSet()
	return s
}

// Configured reports whether the operator configured any upstream.
func (s *Service) Configured() bool { return s != nil && len(s.cfg.Upstreams) > 0 }

// Models returns the models a workspace sees: those of the operator's upstreams, in their order, then those of the
// workspace's own; each ID once (the first upstream that serves it wins). A list older than Refresh is served
// while a fresh one is fetched in the background; only the first call waits for the operator's upstreams (or for
// ctx). A workspace's own upstream is fetched when its list is missing or stale. The slice may be shared with
// other callers (a workspace without upstreams of its own gets the operator's list as it is kept): read it only.
func (s *Service) Models(ctx context.Context, workspaceID string) []Model {
	ms, _ := s.models(ctx, workspaceID)
	return ms
}

// models is Models with the upstream of each model's name.
func (s *Service) models(ctx context.Context, workspaceID string) ([]Model, map[string]Upstream) {
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
	base := s.base
	s.mu.Unlock()
	own, err := s.workspaceUpstreams(ctx, workspaceID)
	if err != nil {
		s.log.Warn("model upstreams of a workspace", "workspace", workspaceID, "error", err)
	}
	if len(own) == 0 {
		return base.models, base.ups
	}
	ups := maps.Clone(base.ups)
	out := slices.Clip(base.models)
	var seen map[string]bool
	for _, u := range own {
		ups[u.Name] = u
		for _, m := range s.ownModels(ctx, u) {
			if base.ids[m.ID] || seen[m.ID] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out, ups
}

// modelSet is the operator's upstreams' models as every workspace sees them (each ID once, the first upstream
// that serves it winning), with the upstreams by name and the IDs; built when their lists change, so that a
// request only adds a workspace's own upstreams to it. It is shared: read only.
type modelSet struct {
	models []Model
	ups    map[string]Upstream
	ids    map[string]bool
}

// operatorSet builds the modelSet of the operator's upstreams from their lists; s.mu is held.
func (s *Service) operatorSet() *modelSet {
	set := &modelSet{ups: make(map[string]Upstream, len(s.cfg.Upstreams)), ids: map[string]bool{}}
	for _, u := range s.cfg.Upstreams {
		set.ups[u.Name] = u
		for _, m := range s.lists[u.Name] {
			if !set.ids[m.ID] {
				set.ids[m.ID] = true
				set.models = append(set.models, m)
			}
		}
	}
	return set
}

// ownModels returns a workspace upstream's list, fetched again when stale; a failed fetch keeps the last list.
func (s *Service) ownModels(ctx context.Context, u Upstream) []Model {
	s.mu.Lock()
	l, ok := s.own[u.id]
	s.mu.Unlock()
	if ok && s.cfg.Now().Sub(l.fetched) < s.cfg.Refresh {
		return l.models
	}
	ms, err := s.fetch(ctx, u)
	if err != nil {
		s.log.Info("a workspace's model upstream list failed; its last list is kept", "upstream", u.id, "error", err)
		ms = l.models
	}
	s.mu.Lock()
	s.own[u.id] = ownList{models: ms, fetched: s.cfg.Now()}
	s.mu.Unlock()
	return ms
}

// Lookup returns the model with an ID that a workspace sees, and its upstream.
func (s *Service) Lookup(ctx context.Context, workspaceID, id string) (Model, Upstream, bool) {
	ms, ups := s.models(ctx, workspaceID)
	for _, m := range ms {
		if m.ID == id {
			return m, ups[m.Upstream], true
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
	s.base = s.operatorSet()
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
