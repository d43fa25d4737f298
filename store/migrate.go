package store

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"

	"github.com/switchboard/switchboard/store/migrations"
)

// migrationTable is where applied migrations are recorded (Bun's default name, kept for databases migrated before).
const migrationTable = "bun_migrations"

// Migrate applies every pending migration. Each migration and the row that records it commit in one transaction, so
// a crash or a failing statement leaves the database as it was before that migration and the next start applies it
// again from the beginning. It is safe to call from several processes at once on PostgreSQL (an advisory lock
// serialises them) and on SQLite (a lock file does).
func (db *DB) Migrate(ctx context.Context) error {
	return db.migrate(ctx, migrations.FS)
}

func (db *DB) migrate(ctx context.Context, fsys fs.FS) error {
	if err := requireTransactional(fsys); err != nil {
		return err
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(fsys); err != nil {
		return fmt.Errorf("store: discover migrations: %w", err)
	}
	var group int64
	// The hook runs on the migration's own transaction, after its last statement: the bookkeeping row commits or
	// rolls back with the migration. The unique index on the name (WithUpsert makes Init create it) refuses a second
	// row for the same migration, so a migration can never be recorded twice.
	record := func(ctx context.Context, tx bun.IConn, m *migrate.Migration) error {
		row := migrate.Migration{Name: m.Name, GroupID: group, MigratedAt: now()}
		if _, err := db.w.NewInsert().Conn(tx).Model(&row).ModelTableExpr(migrationTable).Exec(ctx); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		return nil
	}
	m := migrate.NewMigrator(db.w, ms, migrate.WithTableName(migrationTable), migrate.WithUpsert(true),
		migrate.WithTemplateData(map[string]string{"Dialect": string(db.dialect)}), migrate.AfterMigration(record))
	unlock, err := db.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("store: init migrations: %w", err)
	}
	applied, err := m.AppliedMigrations(ctx)
	if err != nil {
		return fmt.Errorf("store: read applied migrations: %w", err)
	}
	group = applied.LastGroupID() + 1
	all, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return fmt.Errorf("store: read applied migrations: %w", err)
	}
	for _, mig := range all.Unapplied() {
		if err := mig.Up(ctx, m, &mig); err != nil {
			return fmt.Errorf("store: migrate %s_%s: %w", mig.Name, mig.Comment, err)
		}
	}
	return nil
}

// requireTransactional refuses a migration file Bun would run outside a transaction: its statements and its
// bookkeeping row could then be applied in part.
func requireTransactional(fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return fmt.Errorf("store: list migrations: %w", err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".tx.up.sql") && !strings.HasSuffix(name, ".tx.down.sql") {
			return fmt.Errorf("store: migration %s must be transactional (named *.tx.up.sql)", name)
		}
	}
	return nil
}

// lockMigrations keeps other processes from migrating the same database until the returned function is called.
func (db *DB) lockMigrations(ctx context.Context) (func(), error) {
	if db.dialect == SQLite {
		// Pending migrations are decided before each migration's transaction takes the write lock, so two processes
		// starting at once would both try to apply one. An flock on a file beside the database serialises them and,
		// unlike a lock row, is released by the kernel when a process dies.
		return lockFile(ctx, db.sqlitePath+".migrate.lock")
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	const lockID = 0x5377_6974_6368 // "Switch"
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", lockID); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("store: lock migrations: %w", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", lockID)
		_ = conn.Close()
	}, nil
}
