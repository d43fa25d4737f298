package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// ModelUpstream is an OpenAI-compatible server of a workspace's own (see package llm). Its key is stored only
// sealed.
type ModelUpstream struct {
	bun.BaseModel `bun:"table:model_upstreams,alias:mup"`

	ID          string    `bun:"id,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	Name        string    `bun:"name"`
	BaseURL     string    `bun:"base_url"`
	SealedKey   *string   `bun:"sealed_key"`
	KeyLast4    string    `bun:"api_key_last4"`
	Models      []string  `bun:"models,type:json"`
	CreatedAt   time.Time `bun:"created_at"`
}

// ModelUpstreams is the repository of the workspaces' model upstreams.
type ModelUpstreams struct {
	workspaceScoped[ModelUpstream]
}

// Create stores a new upstream; its ID, if empty, and time are set here. Returns ErrNotFound if the workspace does
// not exist and ErrConflict if the workspace has an upstream of that name.
func (s *ModelUpstreams) Create(ctx context.Context, u *ModelUpstream) error {
	if u.ID == "" {
		u.ID = NewID("mup")
	}
	u.CreatedAt = now()
	return s.create(ctx, s.db.w, u)
}

// List returns a workspace's upstreams, oldest first. It returns no sentinel errors.
func (s *ModelUpstreams) List(ctx context.Context, workspaceID string) ([]ModelUpstream, error) {
	out := []ModelUpstream{}
	err := s.db.r.NewSelect().Model(&out).Where("mup.workspace_id = ?", workspaceID).Order("mup.id").Limit(100).Scan(ctx)
	return out, err
}

// Delete removes a workspace's upstream. Returns ErrNotFound if it is not in the workspace.
func (s *ModelUpstreams) Delete(ctx context.Context, workspaceID, id string) error {
	res, err := s.db.w.NewDelete().Model((*ModelUpstream)(nil)).Where("id = ? AND workspace_id = ?", id, workspaceID).
		Exec(ctx)
	return affectedOne(res, err)
}
