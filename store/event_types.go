package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// EventTypeDef is a custom event type of a workspace: a name of its own namespace with a JSON Schema of its data.
type EventTypeDef struct {
	bun.BaseModel `bun:"table:event_types,alias:et"`

	WorkspaceID string          `bun:"workspace_id,pk"`
	Name        string          `bun:"name,pk"`
	Description string          `bun:"description"`
	Schema      json.RawMessage `bun:"schema,type:json"`
	Example     json.RawMessage `bun:"example,type:json"`
	Archived    bool            `bun:"archived"`
	CreatedAt   time.Time       `bun:"created_at"`
	UpdatedAt   time.Time       `bun:"updated_at"`
}

// EventTypeDefs is the repository of custom event types.
type EventTypeDefs struct{ db *DB }

// Create stores a new type on db (the writer or a transaction). Returns ErrConflict if the workspace has a type of
// that name and ErrNotFound if the workspace does not exist.
func (s *EventTypeDefs) Create(ctx context.Context, db bun.IDB, t *EventTypeDef) error {
	t.CreatedAt = now()
	t.UpdatedAt = t.CreatedAt
	if db == nil {
		db = s.db.w
	}
	return insert(ctx, db, t)
}

// Get returns a type of a workspace. Returns ErrNotFound if the workspace has no type of that name.
func (s *EventTypeDefs) Get(ctx context.Context, db bun.IDB, workspaceID, name string) (EventTypeDef, error) {
	if db == nil {
		db = s.db.r
	}
	var t EventTypeDef
	err := db.NewSelect().Model(&t).Where("workspace_id = ? AND name = ?", workspaceID, name).Scan(ctx)
	return t, mapErr(err)
}

// All returns every custom type of every workspace (to define them in a process's registry at start). It returns no
// sentinel errors.
func (s *EventTypeDefs) All(ctx context.Context) ([]EventTypeDef, error) {
	ts := []EventTypeDef{}
	return ts, s.db.r.NewSelect().Model(&ts).Scan(ctx)
}

// List returns the custom types of a workspace. It returns no sentinel errors.
func (s *EventTypeDefs) List(ctx context.Context, workspaceID string) ([]EventTypeDef, error) {
	ts := []EventTypeDef{}
	return ts, s.db.r.NewSelect().Model(&ts).Where("workspace_id = ?", workspaceID).Order("name").Scan(ctx)
}

// Update writes every field of t but its keys and creation time, provided the stored type is still the version read
// (its updated_at is still t.UpdatedAt): one statement, so that a change computed from what was read never
// overwrites a change made meanwhile. It sets t.UpdatedAt. Returns ErrNotFound if the type does not exist and
// ErrConflict if it changed since it was read.
func (s *EventTypeDefs) Update(ctx context.Context, t *EventTypeDef) error {
	read := t.UpdatedAt
	t.UpdatedAt = now()
	res, err := s.db.w.NewUpdate().Model(t).Column("description", "schema", "example", "archived", "updated_at").
		WherePK().Where("updated_at = ?", read).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	t.UpdatedAt = read
	if _, err := s.Get(ctx, nil, t.WorkspaceID, t.Name); err != nil {
		return err
	}
	return ErrConflict
}
