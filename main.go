// Command switchboard runs the Switchboard server and its operator CLI.
//
//	switchboard [serve]                     start the server (the default)
//	switchboard migrate                     apply database migrations
//	switchboard workspace create|list|models|add-member
//	switchboard key create|list|revoke
//
// Every command reads DATABASE_URL (or --database-url); without it the embedded SQLite file data/switchboard.db.
// This file is the entry point, the usage and the flag handling every command shares; serve.go runs the server,
// cli.go the operator's commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `Usage: switchboard <command> [flags]

Commands:
  serve                                   start the server (default)
  migrate                                 apply database migrations
  workspace create --name NAME [--json]   create a workspace
  workspace list [--json]                 list workspaces
  workspace models --workspace WS (--enable ID,ID | --all) [--json]
                                          choose the AI models a workspace may use
  workspace add-member --workspace WS --email EMAIL [--json]
                                          make a console user an owner of a workspace
  key create --workspace WS --name NAME --scopes a,b [--expires-in 720h] [--json]
                                          create an API key (its secret is printed once)
  key list --workspace WS [--json]        list the keys of a workspace (never their secrets)
  key revoke KEY_ID [--json]              revoke a key
  backup --to FILE                        copy an SQLite database consistently, also while it serves
  migrate-data --to postgres://…          copy a whole SQLite deployment into an empty PostgreSQL database

Every command takes --database-url (env DATABASE_URL, default file:data/switchboard.db).
Run "switchboard serve --help" for the server's settings.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := command(ctx, args, stdout, stderr); !errors.Is(err, errHelp) {
		return err
	}
	return nil
}

func command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stderr)
	case "migrate":
		return migrateCmd(ctx, args, stdout)
	case "workspace":
		return workspaceCmd(ctx, args, stdout)
	case "key":
		return keyCmd(ctx, args, stdout)
	case "backup":
		return backupCmd(ctx, args, stdout)
	case "migrate-data":
		return migrateDataCmd(ctx, args, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usagef("unknown command %q\n\n%s", cmd, usage)
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("switchboard "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	return parseWithNotes(fs, args, "")
}

// parseWithNotes is parse for commands whose --help adds notes after the flags (settings read from the environment
// only).
func parseWithNotes(fs *flag.FlagSet, args []string, notes string) error {
	// Every command reads the environment the same way: the variable a flag's help names sets it first (strictly), the
	// command line wins.
	if err := envFlags(fs, flagEnv(fs)); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			if notes != "" {
				fmt.Fprintln(os.Stdout, notes)
			}
			return errHelp
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// errHelp ends a command after its --help was printed.
var errHelp = errors.New("help printed")

// envInUsage finds the environment variable a flag's usage names: "(env SWITCHBOARD_ADDR)".
var envInUsage = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)`)

// flagEnv maps each flag of fs to the environment variable its usage names, so that the help text is the one list
// of what the environment can set.
func flagEnv(fs *flag.FlagSet) map[string]string {
	vars := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if m := envInUsage.FindStringSubmatch(f.Usage); m != nil {
			vars[f.Name] = m[1]
		}
	})
	return vars
}

// envFlags gives flags their values from the environment (flag name → variable name) before the command line is
// parsed, so the command line wins. A malformed value is an error naming the variable, never silently the default.
func envFlags(fs *flag.FlagSet, vars map[string]string) error {
	for name, env := range vars {
		if v, ok := os.LookupEnv(env); ok && v != "" {
			if err := fs.Set(name, v); err != nil {
				return usagef("%s=%q: %v", env, v, err)
			}
		}
	}
	return nil
}

func databaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "",
		"database: postgres://… or file:path for SQLite (env DATABASE_URL, default "+store.DefaultURL+")")
}

// openDB opens and migrates the database, so that every command works on a new installation.
func openDB(ctx context.Context, url string) (*store.DB, error) {
	db, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// loadCatalog reads the operator's model catalogue, or returns the built-in one when path is empty.
func loadCatalog(path string) (*modelcatalog.Catalog, error) {
	if path == "" {
		return modelcatalog.Default(), nil
	}
	return modelcatalog.Load(path)
}
