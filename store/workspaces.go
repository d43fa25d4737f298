package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Workspace is a tenant: every key and object belongs to exactly one.
type Workspace struct {
	bun.BaseModel `bun:"table:workspaces"`

	ID   string `bun:"id,pk"`
	Name string `bun:"name"`
	// EnabledModels lists the model IDs the workspace may use; nil means all models of the catalogue.
	EnabledModels []string  `bun:"enabled_models,type:json,nullzero"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// Workspaces is the repository of workspaces.
type Workspaces struct{ db *DB }

// Create stores a new workspace with every model enabled.
func (s *Workspaces) Create(ctx context.Context, name string) (Workspace, error) {
	t := now()
	w := Workspace{ID: NewID("ws"), Name: name, CreatedAt: t, UpdatedAt: t}
	if _, err := s.db.w.NewInsert().Model(&w).Exec(ctx); err != nil {
		return Workspace{}, mapErr(err)
	}
	return w, nil
}

// Get returns one workspace. Returns ErrNotFound if it does not exist.
func (s *Workspaces) Get(ctx context.Context, id string) (Workspace, error) {
	var w Workspace
	err := s.db.r.NewSelect().Model(&w).Where("id = ?", id).Scan(ctx)
	return w, mapErr(err)
}

// List returns every workspace, newest first.
func (s *Workspaces) List(ctx context.Context) ([]Workspace, error) {
	ws := []Workspace{}
	err := s.db.r.NewSelect().Model(&ws).Order("id DESC").Scan(ctx)
	return ws, mapErr(err)
}

// Any reports whether the database holds a workspace at all.
func (s *Workspaces) Any(ctx context.Context) (bool, error) {
	ok, err := s.db.r.NewSelect().Model((*Workspace)(nil)).Exists(ctx)
	return ok, mapErr(err)
}

// SetEnabledModels restricts the workspace to the given model IDs; nil enables every model of the catalogue.
// Returns ErrNotFound if the workspace does not exist.
func (s *Workspaces) SetEnabledModels(ctx context.Context, id string, models []string) (Workspace, error) {
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		q := tx.NewUpdate().Table("workspaces").Set("updated_at = ?", now()).Where("id = ?", id)
		if models == nil {
			q = q.Set("enabled_models = NULL")
		} else {
			q = q.Set("enabled_models = ?", jsonText(models))
		}
		if err := expectOneRow(q.Exec(ctx)); err != nil {
			return err
		}
		return s.db.announceAccessChange(ctx, tx)
	})
	if err != nil {
		return Workspace{}, err
	}
	s.db.keys.changed()
	return s.Get(ctx, id)
}
