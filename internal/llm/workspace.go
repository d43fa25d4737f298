package llm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// ownRowsTTL is how long a workspace's upstreams are read from memory: GET /api/v1/models is the hottest read of
// the API, and a change made through another replica shows here within it (at once through this one).
const ownRowsTTL = 10 * time.Second

// ownRows is a workspace's upstreams as last read.
type ownRows struct {
	ups  []Upstream
	read time.Time
}

// workspaceUpstreams returns a workspace's own upstreams with their keys opened (none without Config.DB).
func (s *Service) workspaceUpstreams(ctx context.Context, workspaceID string) ([]Upstream, error) {
	if s.cfg.DB == nil || workspaceID == "" {
		return nil, nil
	}
	s.mu.Lock()
	c, ok := s.rows[workspaceID]
	s.mu.Unlock()
	if ok && s.cfg.Now().Sub(c.read) < ownRowsTTL {
		return c.ups, nil
	}
	ups, err := s.readUpstreams(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.rows[workspaceID] = ownRows{ups: ups, read: s.cfg.Now()}
	s.mu.Unlock()
	return ups, nil
}

// forget drops what is kept in memory of a workspace's upstreams, after a change.
func (s *Service) forget(workspaceID, upstreamID string) {
	s.mu.Lock()
	delete(s.rows, workspaceID)
	delete(s.own, upstreamID)
	s.mu.Unlock()
}

// readUpstreams reads a workspace's upstreams and opens their keys.
func (s *Service) readUpstreams(ctx context.Context, workspaceID string) ([]Upstream, error) {
	rows, err := s.cfg.DB.ModelUpstreams.List(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]Upstream, 0, len(rows))
	for _, r := range rows {
		u := Upstream{Name: r.Name, BaseURL: r.BaseURL, Models: r.Models, id: r.ID}
		if r.SealedKey != nil {
			key, err := s.cfg.Box.Open(*r.SealedKey, []byte(r.ID))
			if err != nil {
				return nil, fmt.Errorf("open the key of upstream %s: %w", r.ID, err)
			}
			u.APIKey = string(key)
		}
		out = append(out, u)
	}
	return out, nil
}

// HasWorkspaceUpstreams reports whether the service keeps workspaces' own upstreams (it has a database).
func (s *Service) HasWorkspaceUpstreams() bool { return s != nil && s.cfg.DB != nil }

// ListUpstreams returns a workspace's own upstreams for the API.
func (s *Service) ListUpstreams(ctx context.Context, workspaceID string) ([]gen.ModelUpstream, error) {
	rows, err := s.cfg.DB.ModelUpstreams.List(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ModelUpstream, len(rows))
	for i, r := range rows {
		out[i] = apiUpstream(r)
	}
	return out, nil
}

func apiUpstream(r store.ModelUpstream) gen.ModelUpstream {
	u := gen.ModelUpstream{Id: r.ID, Object: gen.ModelUpstreamObjectModelUpstream, Name: r.Name, BaseUrl: r.BaseURL,
		ApiKeyLast4: r.KeyLast4, CreatedAt: r.CreatedAt}
	if r.Models != nil {
		ms := slices.Clone(r.Models)
		u.Models = &ms
	}
	return u
}

// CreateUpstream adds an upstream of a workspace's own. Errors: ValidationFailed (a URL the egress policy refuses),
// Conflict (a name the operator's upstreams or the workspace's use).
func (s *Service) CreateUpstream(ctx context.Context, workspaceID string, in gen.ModelUpstreamCreate) (gen.ModelUpstream, error) {
	u := Upstream{Name: in.Name, BaseURL: in.BaseUrl}
	if in.Models != nil {
		u.Models = *in.Models
	}
	ups := []Upstream{u}
	if err := validate(ups); err != nil {
		return gen.ModelUpstream{}, &problem.Error{Code: problem.ValidationFailed, Detail: err.Error(),
			Fields: []problem.Field{{Pointer: "/base_url", Detail: "must be an http or https URL without credentials"}}}
	}
	if err := s.cfg.Guard.CheckURL(ctx, ups[0].BaseURL); err != nil {
		return gen.ModelUpstream{}, &problem.Error{Code: problem.ValidationFailed, Detail: "The upstream's URL is not allowed.",
			Fields: []problem.Field{{Pointer: "/base_url", Detail: err.Error()}}}
	}
	for _, op := range s.cfg.Upstreams {
		if op.Name == in.Name {
			return gen.ModelUpstream{}, problem.Errorf(problem.Conflict, "The operator's upstream is named %q: choose another name.", in.Name)
		}
	}
	r := store.ModelUpstream{ID: store.NewID("mup"), WorkspaceID: workspaceID, Name: in.Name, BaseURL: ups[0].BaseURL,
		Models: u.Models}
	if in.ApiKey != nil && *in.ApiKey != "" {
		// Sealed for this row only: a sealed key copied to another row does not open.
		sealed := s.cfg.Box.Seal([]byte(*in.ApiKey), []byte(r.ID))
		r.SealedKey = &sealed
		if k := *in.ApiKey; len(k) >= 8 {
			r.KeyLast4 = k[len(k)-4:]
		}
	}
	if err := s.cfg.DB.ModelUpstreams.Create(ctx, &r); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return gen.ModelUpstream{}, problem.Errorf(problem.Conflict, "The workspace has an upstream named %q.", in.Name)
		}
		return gen.ModelUpstream{}, err
	}
	s.forget(workspaceID, r.ID)
	return apiUpstream(r), nil
}

// DeleteUpstream removes an upstream of a workspace's own. Errors: NotFound.
func (s *Service) DeleteUpstream(ctx context.Context, workspaceID, id string) error {
	err := s.cfg.DB.ModelUpstreams.Delete(ctx, workspaceID, id)
	if errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "No such model upstream in this workspace.")
	}
	if err == nil {
		s.forget(workspaceID, id)
	}
	return err
}
