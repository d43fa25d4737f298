package store

import (
	"context"

	"github.com/uptrace/bun"
)

// workspaceScoped is the data access every repository of a workspace's objects shares. T is a Bun model whose table
// has an id primary key and a workspace_id foreign key to workspaces.
//
// Tenant isolation is the point: every statement names the workspace, so an object of another workspace is
// indistinguishable from a missing one (ErrNotFound), and create lets the foreign key check that the workspace
// exists, in the insert itself. Reads use the read pool; writes run on the handle they are given, s.db.w or the
// caller's transaction (so that the change and its events commit together).
//
// A repository embeds it (which also gives it s.db) and keeps its exported methods, with the doc comments that name
// their sentinel errors:
//
//	type Instances struct{ workspaceScoped[Instance] }
//
//	// Get returns an instance of a workspace. Returns ErrNotFound if it is not in that workspace.
//	func (s *Instances) Get(ctx context.Context, workspaceID, id string) (Instance, error) {
//		return s.get(ctx, workspaceID, id)
//	}
//
// and Open creates it with the database: db.Instances = &Instances{workspaceScoped[Instance]{db}}.
type workspaceScoped[T any] struct{ db *DB }

// inWorkspace narrows q (on a model of the table) to the workspace's row with the ID.
func inWorkspace[Q interface {
	Where(query string, args ...any) Q
}](q Q, workspaceID, id string) Q {
	return q.Where("?TableAlias.id = ? AND ?TableAlias.workspace_id = ?", id, workspaceID)
}

// create inserts row with one statement on db. Returns ErrNotFound if its workspace (or another row it references)
// does not exist, and ErrConflict if it breaks a uniqueness rule.
func (s workspaceScoped[T]) create(ctx context.Context, db bun.IDB, row *T) error {
	return insert(ctx, db, row)
}

// get reads the workspace's row with the ID. Returns ErrNotFound if it is not in that workspace.
func (s workspaceScoped[T]) get(ctx context.Context, workspaceID, id string) (T, error) {
	var row T
	err := inWorkspace(s.db.r.NewSelect().Model(&row), workspaceID, id).Scan(ctx)
	return row, mapErr(err)
}

// exists reports whether the workspace has the row with the ID, by its primary key and without reading the row. It
// returns no sentinel errors.
func (s workspaceScoped[T]) exists(ctx context.Context, workspaceID, id string) (bool, error) {
	return inWorkspace(s.db.r.NewSelect().Model((*T)(nil)), workspaceID, id).Exists(ctx)
}

// list reads a page of the workspace's rows, narrowed by filter when it is not nil, and reports whether more follow.
// It returns no sentinel errors.
func (s workspaceScoped[T]) list(ctx context.Context, workspaceID string, p Page,
	filter func(*bun.SelectQuery) *bun.SelectQuery) ([]T, bool, error) {
	rows := []T{}
	q := s.db.r.NewSelect().Model(&rows).Where("?TableAlias.workspace_id = ?", workspaceID)
	if filter != nil {
		q = filter(q)
	}
	if err := p.apply(q, "?TableAlias.id").Scan(ctx); err != nil {
		return nil, false, err
	}
	rows, more := pageOf(rows, p)
	return rows, more, nil
}

// lock reads the workspace's row with the ID inside tx for a change (see DB.forUpdate). Returns ErrNotFound if it is
// not in that workspace.
func (s workspaceScoped[T]) lock(ctx context.Context, tx bun.IDB, workspaceID, id string) (T, error) {
	var row T
	err := s.db.forUpdate(inWorkspace(tx.NewSelect().Model(&row), workspaceID, id)).Scan(ctx)
	return row, mapErr(err)
}

// delete removes the workspace's row with the ID on db (rows referencing it go with it as the foreign keys say) and
// returns its last state. Returns ErrNotFound if it is not in that workspace.
func (s workspaceScoped[T]) delete(ctx context.Context, db bun.IDB, workspaceID, id string) (T, error) {
	var row T
	err := inWorkspace(db.NewDelete().Model(&row), workspaceID, id).Returning("*").Scan(ctx)
	return row, mapErr(err)
}

// forUpdate makes q, run in a write transaction, hold the rows it reads against concurrent changes until the
// transaction ends: SELECT … FOR UPDATE on PostgreSQL; on SQLite the transaction holds the database's write lock
// already.
func (db *DB) forUpdate(q *bun.SelectQuery) *bun.SelectQuery {
	if db.dialect == Postgres {
		return q.For("UPDATE")
	}
	return q
}
