package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
)

// Every row whose rate the database bounds (ingest, webhook deliveries, messages sent) is also shown as a ratio to
// what that database does by itself on this machine, measured in the same run: pgbench's TPC-B transactions a
// second for PostgreSQL (8 clients, as a server sees them), and for SQLite a loop of one-row write transactions with
// the product's own connection settings. A ratio above 1 means the rows share commits; below 1, that Switchboard
// spends more than one transaction's worth of the database on each item.

// dbLimit is one database's own rate.
type dbLimit struct {
	rate    float64 // transactions a second
	how     string
	skipped string
}

// dbBoundRow is a row bounded by its database.
type dbBoundRow struct {
	name, database string
	rate           float64
	unit           string
}

// dbBound collects the rows the final table compares with their database's limit.
var dbBound []dbBoundRow

// measureDBLimits measures both databases' own rates (PostgreSQL unless skipped or unreachable).
func measureDBLimits(ctx context.Context, o options, log io.Writer) map[string]dbLimit {
	out := map[string]dbLimit{}
	sqlite, err := sqliteLimit(ctx, 5*time.Second)
	if err != nil {
		out["SQLite"] = dbLimit{skipped: err.Error()}
	} else {
		out["SQLite"] = dbLimit{rate: sqlite, how: "one-row write transactions in a loop, the product's settings"}
	}
	fmt.Fprintf(log, "database limit  SQLite      %8.0f tx/s\n", sqlite)
	if o.skipPostgres {
		return out
	}
	pg, err := postgresLimit(ctx, 10*time.Second)
	if err != nil {
		out["PostgreSQL"] = dbLimit{skipped: err.Error()}
		fmt.Fprintln(log, "database limit  PostgreSQL skipped:", err)
		return out
	}
	out["PostgreSQL"] = dbLimit{rate: pg, how: "pgbench TPC-B, 8 clients, scale 4"}
	fmt.Fprintf(log, "database limit  PostgreSQL  %8.0f tx/s\n", pg)
	return out
}

// sqliteLimit is how many one-row write transactions a second a fresh SQLite database takes, opened as the
// product opens it.
func sqliteLimit(ctx context.Context, d time.Duration) (float64, error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-sqlite-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "file:"+filepath.Join(dir, "limit.db"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := db.Bun().ExecContext(ctx, "CREATE TABLE bench_limit (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		return 0, err
	}
	n, start := 0, time.Now()
	for time.Since(start) < d {
		if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO bench_limit (v) VALUES (?)", "a row of about the size of an event id")
			return err
		}); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// postgresLimit runs pgbench (TPC-B, 8 clients) against a fresh database for d.
func postgresLimit(ctx context.Context, d time.Duration) (float64, error) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return 0, fmt.Errorf("pgbench not found (Debian's postgresql package has it)")
	}
	dbURL, drop, err := createPostgresDB(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = drop() }()
	if out, err := exec.CommandContext(ctx, pgbench, "-i", "-q", "-s", "4", dbURL).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, pgbench, "-n", "-c", "8", "-j", "2", "-T", strconv.Itoa(int(d.Seconds())), dbURL).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := pgbenchTPS.FindStringSubmatch(string(out))
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	return strconv.ParseFloat(m[1], 64)
}

// databaseOf is the database a row's name ends with.
func databaseOf(name string) string {
	if strings.HasSuffix(name, "PostgreSQL") {
		return "PostgreSQL"
	}
	return "SQLite"
}

// printDBLimits writes the table of the database-bound rows against their database's own rate.
func printDBLimits(w io.Writer, limits map[string]dbLimit) {
	if len(dbBound) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| database-bound row | rate | the database alone | ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, r := range dbBound {
		l := limits[r.database]
		if l.rate == 0 {
			fmt.Fprintf(w, "| %s | %.0f %s | — (%s) | — |\n", r.name, r.rate, r.unit, l.skipped)
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f %s | %.0f tx/s | %.2f |\n", r.name, r.rate, r.unit, l.rate, r.rate/l.rate)
	}
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		if l, ok := limits[db]; ok && l.rate > 0 {
			fmt.Fprintf(w, "\n%s alone: %s.", db, l.how)
		}
	}
	fmt.Fprintln(w)
}
