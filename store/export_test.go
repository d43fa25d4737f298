package store

import (
	"context"
	"io/fs"

	"github.com/uptrace/bun"
)

// The violation checks, for a test against both databases' real errors.
var (
	IsUniqueViolation     = isUniqueViolation
	IsForeignKeyViolation = isForeignKeyViolation
)

// Scoped is a repository of a test's own workspace-scoped model, built on workspaceScoped as the store's
// repositories are, so that the external tests can exercise the helper itself.
type Scoped[T any] struct{ workspaceScoped[T] }

// NewScoped returns the repository of T in db.
func NewScoped[T any](db *DB) Scoped[T] { return Scoped[T]{workspaceScoped[T]{db}} }

func (s Scoped[T]) Create(ctx context.Context, row *T) error { return s.create(ctx, s.db.w, row) }

func (s Scoped[T]) Get(ctx context.Context, workspaceID, id string) (T, error) {
	return s.get(ctx, workspaceID, id)
}

func (s Scoped[T]) Exists(ctx context.Context, workspaceID, id string) (bool, error) {
	return s.exists(ctx, workspaceID, id)
}

func (s Scoped[T]) List(ctx context.Context, workspaceID string, p Page,
	filter func(*bun.SelectQuery) *bun.SelectQuery) ([]T, bool, error) {
	return s.list(ctx, workspaceID, p, filter)
}

// Lock locks the row in a transaction of its own and returns it.
func (s Scoped[T]) Lock(ctx context.Context, workspaceID, id string) (T, error) {
	var row T
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		row, err = s.lock(ctx, tx, workspaceID, id)
		return err
	})
	return row, err
}

func (s Scoped[T]) Delete(ctx context.Context, workspaceID, id string) (T, error) {
	return s.delete(ctx, s.db.w, workspaceID, id)
}

// MigrateFS applies the migrations of fsys, as Migrate does with the product's own.
func (db *DB) MigrateFS(ctx context.Context, fsys fs.FS) error { return db.migrate(ctx, fsys) }
