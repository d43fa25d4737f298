package main

// backup and migrate-data: the operator's copies of a deployment's data.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchboard/switchboard/store"
)

func backupCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("backup")
	dbURL := databaseFlag(fs)
	to := fs.String("to", "", "file to write the copy to; it must not exist")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return usagef("backup: --to FILE is required")
	}
	// Not migrated: a backup copies the database as it is.
	db, err := store.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	if err := db.BackupTo(ctx, *to); err != nil {
		if errors.Is(err, store.ErrNotSQLite) {
			return usagef("backup copies SQLite databases; back up PostgreSQL with its own tools, for example " +
				"pg_dump --format=custom --file=switchboard.dump \"$DATABASE_URL\" (and keep SWITCHBOARD_SECRET_KEY with it)")
		}
		return err
	}
	fmt.Fprintf(stdout, "Backed up to %s in %s. To restore: stop the server, replace the database file with this copy "+
		"(remove the old file's -wal and -shm files), keep the same secret.key beside it, and start the server.\n",
		*to, time.Since(start).Round(time.Millisecond))
	return nil
}

func migrateDataCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("migrate-data")
	dbURL := databaseFlag(fs)
	to := fs.String("to", "", "URL of the PostgreSQL database to copy into (postgres://…); it must hold no workspace and no user")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !strings.HasPrefix(*to, "postgres://") && !strings.HasPrefix(*to, "postgresql://") {
		return usagef("migrate-data: --to must be a postgres:// URL")
	}
	src, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer src.Close()
	if src.Dialect() != store.SQLite {
		return usagef("migrate-data copies an SQLite deployment; --database-url names %s", src.Dialect())
	}
	dst, err := openDB(ctx, *to)
	if err != nil {
		return err
	}
	defer dst.Close()
	start := time.Now()
	last := ""
	copied, err := src.CopyTo(ctx, dst, func(table string, n, total int) {
		if table != last || n == total {
			fmt.Fprintf(stdout, "%-32s %d/%d rows\n", table, n, total)
		}
		last = table
	})
	if err != nil {
		return fmt.Errorf("%w (nothing was committed to PostgreSQL)", err)
	}
	rows := 0
	for _, c := range copied {
		rows += c.Rows
	}
	fmt.Fprintf(stdout, "Copied %d rows of %d tables in %s. Start the servers with DATABASE_URL set to the PostgreSQL "+
		"database and the SWITCHBOARD_SECRET_KEY of this installation (the content of its secret.key file).\n",
		rows, len(copied), time.Since(start).Round(time.Millisecond))
	return nil
}
