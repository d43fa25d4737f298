package main

// backup and migrate-data: the operator's copies of a deployment's data.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels/whatsappweb"
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
	// VACUUM INTO is one statement: its progress is the copy's size against the database's (the copy is compact,
	// so it ends below 100 % when the database has free pages).
	var size int64
	if st, err := os.Stat(db.Path()); err == nil {
		size = st.Size()
	}
	watching, stopWatching := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		p := newProgress(stdout, time.Second)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-watching.Done():
				return
			case <-tick.C:
				if st, err := os.Stat(*to); err == nil && size > 0 {
					p.report(false, "backup: %s of about %s written", megabytes(st.Size()), megabytes(size))
				}
			}
		}
	}()
	err = db.BackupTo(ctx, *to)
	stopWatching()
	<-watched
	if err != nil {
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
	p := newProgress(stdout, time.Second)
	// WhatsApp Web sessions are carried by the whatsapp_web build, and refused by the default one.
	copied, err := src.CopyTo(ctx, dst, func(table string, n, total int) {
		// A line when a table starts and ends, and one a second in between with the rate (a table of millions of
		// clicks takes minutes).
		first := table != last
		last = table
		if rate := p.rate(n); !first && n < total && rate != "" {
			p.report(false, "%-32s %d/%d rows (%d %%, %s)", table, n, total, n*100/max(total, 1), rate)
			return
		}
		p.report(first || n == total, "%-32s %d/%d rows", table, n, total)
	}, whatsappweb.CopyExtra())
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

// progress writes progress lines of a long command: forced ones always, the others at most once per interval.
type progress struct {
	w           io.Writer
	every       time.Duration
	last        time.Time
	rateAt      time.Time
	rateFrom    int
	rateStarted bool
}

func newProgress(w io.Writer, every time.Duration) *progress { return &progress{w: w, every: every} }

// report writes the line when forced, or when the interval passed since the last line.
func (p *progress) report(force bool, format string, args ...any) {
	now := time.Now()
	if !force && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, format+"\n", args...)
}

// rate is the rows a second since the count n was last measured ("" the first time, and within the interval).
func (p *progress) rate(n int) string {
	now := time.Now()
	if !p.rateStarted || n < p.rateFrom {
		p.rateStarted, p.rateAt, p.rateFrom = true, now, n
		return ""
	}
	elapsed := now.Sub(p.rateAt)
	if elapsed < p.every {
		return ""
	}
	r := float64(n-p.rateFrom) / elapsed.Seconds()
	p.rateAt, p.rateFrom = now, n
	return fmt.Sprintf("%.0f rows/s", r)
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
