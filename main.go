// Command switchboard runs the Switchboard server and its operator CLI.
//
//	switchboard [serve]                     start the server (the default)
//	switchboard migrate                     apply database migrations
//	switchboard workspace create|list|models
//	switchboard key create|list|revoke
//
// Every command reads DATABASE_URL (or --database-url); without it the embedded SQLite file data/switchboard.db.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchboard/switchboard/apikey"
	"github.com/switchboard/switchboard/clicks"
	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/linkcache"
	"github.com/switchboard/switchboard/modelcatalog"
	"github.com/switchboard/switchboard/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, "switchboard:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "switchboard:", err)
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

Every command takes --database-url (env DATABASE_URL, default file:data/switchboard.db).
Run "switchboard serve --help" for the server's settings.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stderr)
	case "migrate":
		fs := newFlagSet("migrate")
		dbURL := databaseFlag(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Fprintf(stdout, "Database is up to date (%s).\n", db.Dialect())
		return nil
	case "workspace":
		return workspaceCmd(ctx, args, stdout)
	case "key":
		return keyCmd(ctx, args, stdout)
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return nil
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

func databaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", os.Getenv("DATABASE_URL"),
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

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve")
	dbURL := databaseFlag(fs)
	addr := fs.String("addr", envString("SWITCHBOARD_ADDR", ":8080"), "listen address (env SWITCHBOARD_ADDR)")
	baseURL := fs.String("base-url", os.Getenv("SWITCHBOARD_BASE_URL"),
		"public URL of the server, used in links it returns (env SWITCHBOARD_BASE_URL, default http://localhost<addr>)")
	modelsFile := fs.String("models-file", os.Getenv("SWITCHBOARD_MODELS_FILE"),
		"YAML or JSON model catalogue (env SWITCHBOARD_MODELS_FILE, default: the built-in list)")
	keyRate := fs.Int("rate-limit", envInt("SWITCHBOARD_RATE_LIMIT_PER_MINUTE", 600),
		"requests per minute per API key (env SWITCHBOARD_RATE_LIMIT_PER_MINUTE)")
	wsRate := fs.Int("workspace-rate-limit", envInt("SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE", 3000),
		"requests per minute per workspace (env SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE)")
	bodyLimit := fs.Int64("body-limit", int64(envInt("SWITCHBOARD_BODY_LIMIT_BYTES", 1<<20)),
		"maximum request body in bytes (env SWITCHBOARD_BODY_LIMIT_BYTES)")
	cacheTTL := fs.Duration("key-cache-ttl", envDuration("SWITCHBOARD_KEY_CACHE_TTL", 30*time.Second),
		"longest time a verified API key is trusted without a lookup (env SWITCHBOARD_KEY_CACHE_TTL)")
	trusted := fs.String("trusted-proxies", os.Getenv("SWITCHBOARD_TRUSTED_PROXIES"),
		"CIDRs of reverse proxies whose X-Forwarded-For is believed, e.g. 10.0.0.0/8 (env SWITCHBOARD_TRUSTED_PROXIES)")
	logLevel := fs.String("log-level", envString("SWITCHBOARD_LOG_LEVEL", "info"),
		"debug, info, warn or error (env SWITCHBOARD_LOG_LEVEL)")
	links := linkFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	catalog, err := loadCatalog(*modelsFile)
	if err != nil {
		return err
	}
	var proxies []*net.IPNet
	for _, cidr := range strings.Split(*trusted, ",") {
		if cidr = strings.TrimSpace(cidr); cidr == "" {
			continue
		}
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return usagef("--trusted-proxies: %v", err)
		}
		proxies = append(proxies, n)
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	recorder, geo, err := links.recorder(db, log)
	if err != nil {
		return err
	}
	defer geo.Close()
	// The recorder is drained last: after the HTTP server stopped serving redirects.
	drained := false
	drain := func() error {
		if drained {
			return nil
		}
		drained = true
		drainCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return recorder.Close(drainCtx)
	}
	defer drain()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *baseURL == "" {
		*baseURL = "http://" + displayAddr(ln.Addr())
	}
	srv, err := handlers.New(handlers.Config{
		BaseURL: strings.TrimSuffix(*baseURL, "/"), BodyLimit: *bodyLimit, KeyRateLimit: *keyRate,
		WorkspaceRateLimit: *wsRate, KeyCacheTTL: *cacheTTL, Models: catalog, TrustedProxies: proxies, Logger: log,
		Links: links.options(), Redirects: handlers.RedirectOptions{Clicks: recorder,
			Cache: linkcache.Config{Size: *links.cacheSize}},
	}, db)
	if err != nil {
		return err
	}
	if err := srv.RegisterMetrics(recorder.Collectors()...); err != nil {
		return err
	}
	con, err := console.New(console.Config{BaseURL: strings.TrimSuffix(*baseURL, "/"), Logger: log}, db)
	if err != nil {
		return err
	}
	srv.Mount(con.Register)
	httpSrv := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("switchboard listening", "addr", ln.Addr().String(), "base_url", *baseURL,
		"database", string(db.Dialect()), "docs", *baseURL+"/docs/", "models", len(catalog.All()))

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		srv.Close()
		return errors.Join(err, drain())
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = httpSrv.Shutdown(shutdownCtx)
	srv.Close()
	log.Info("draining buffered clicks")
	err = errors.Join(err, drain())
	log.Info("stopped")
	return err
}

// linkSettings are the flags of short links, redirects and click recording.
type linkSettings struct {
	shortBaseURL, shortDomains, allowedSchemes, blockedHosts *string
	tombstone                                                *time.Duration
	geoIP, dataDir                                           *string
	clickBuffer, clickBatch, cacheSize                       *int
	clickInterval                                            *time.Duration
}

func linkFlags(fs *flag.FlagSet) linkSettings {
	return linkSettings{
		shortBaseURL: fs.String("short-base-url", os.Getenv("SWITCHBOARD_SHORT_BASE_URL"),
			"origin of short URLs, e.g. https://sb.example.com; its host is the default short domain (env SWITCHBOARD_SHORT_BASE_URL, default the base URL)"),
		shortDomains: fs.String("short-domains", os.Getenv("SWITCHBOARD_SHORT_DOMAINS"),
			"comma-separated further short domains (host[:port]) links may use (env SWITCHBOARD_SHORT_DOMAINS)"),
		allowedSchemes: fs.String("link-allowed-schemes", os.Getenv("SWITCHBOARD_LINK_ALLOWED_SCHEMES"),
			"comma-separated destination schemes allowed besides http and https, e.g. mailto,tel (env SWITCHBOARD_LINK_ALLOWED_SCHEMES)"),
		blockedHosts: fs.String("link-blocked-hosts", os.Getenv("SWITCHBOARD_LINK_BLOCKED_HOSTS"),
			"comma-separated hosts (and their subdomains) refused as destinations (env SWITCHBOARD_LINK_BLOCKED_HOSTS)"),
		tombstone: fs.Duration("link-tombstone-period", envDuration("SWITCHBOARD_LINK_TOMBSTONE_PERIOD", 30*24*time.Hour),
			"how long a deleted link's slug stays reserved to its workspace (env SWITCHBOARD_LINK_TOMBSTONE_PERIOD)"),
		geoIP: fs.String("geoip-db", os.Getenv("SWITCHBOARD_GEOIP_DB"),
			"MaxMind .mmdb file (GeoLite2-Country or compatible) for click countries (env SWITCHBOARD_GEOIP_DB, default none)"),
		dataDir: fs.String("data-dir", os.Getenv("SWITCHBOARD_DATA_DIR"),
			"directory of the click spool (env SWITCHBOARD_DATA_DIR, default the SQLite file's directory, or ./data with PostgreSQL)"),
		clickBuffer: fs.Int("click-buffer", envInt("SWITCHBOARD_CLICK_BUFFER", 50_000),
			"clicks buffered in memory before they spill to the spool on disk (env SWITCHBOARD_CLICK_BUFFER)"),
		clickBatch: fs.Int("click-batch-size", envInt("SWITCHBOARD_CLICK_BATCH_SIZE", 1000),
			"most clicks written in one transaction (env SWITCHBOARD_CLICK_BATCH_SIZE)"),
		clickInterval: fs.Duration("click-interval", envDuration("SWITCHBOARD_CLICK_INTERVAL", 50*time.Millisecond),
			"how often buffered clicks are written (env SWITCHBOARD_CLICK_INTERVAL)"),
		cacheSize: fs.Int("link-cache-size", envInt("SWITCHBOARD_LINK_CACHE_SIZE", 100_000),
			"short links kept resolved in memory (env SWITCHBOARD_LINK_CACHE_SIZE)"),
	}
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (l linkSettings) options() handlers.LinkOptions {
	return handlers.LinkOptions{ShortBaseURL: strings.TrimSuffix(*l.shortBaseURL, "/"), Domains: splitList(*l.shortDomains),
		AllowedSchemes: splitList(*l.allowedSchemes), BlockedHosts: splitList(*l.blockedHosts), TombstonePeriod: *l.tombstone}
}

// recorder opens the GeoIP database (nil without one) and starts the click recorder, whose spool lives in the
// data directory.
func (l linkSettings) recorder(db *store.DB, log *slog.Logger) (*clicks.Recorder, *clicks.GeoIP, error) {
	var geo *clicks.GeoIP
	if *l.geoIP != "" {
		var err error
		if geo, err = clicks.OpenGeoIP(*l.geoIP); err != nil {
			return nil, nil, err
		}
	}
	dir := *l.dataDir
	if dir == "" {
		dir = db.DataDir()
	}
	if dir == "" {
		dir = "data"
	}
	rec, err := clicks.New(db, clicks.Config{BatchSize: *l.clickBatch, Interval: *l.clickInterval,
		HighWater: *l.clickBuffer, SpoolDir: filepath.Join(dir, "spool"), GeoIP: geo, Logger: log})
	if err != nil {
		_ = geo.Close()
		return nil, nil, err
	}
	return rec, geo, nil
}

// displayAddr turns ":8080" into "localhost:8080" for links.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || host == "" || host == "::" || host == "0.0.0.0" {
		return "localhost:" + port
	}
	return net.JoinHostPort(host, port)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList prints items as a JSON array (asJSON) or as a table with the given header and one row per item.
func printList[T, J any](w io.Writer, items []T, asJSON bool, toJSON func(T) J, header string, row func(T) []string) error {
	if asJSON {
		out := make([]J, len(items))
		for i, it := range items {
			out[i] = toJSON(it)
		}
		return printJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, strings.Join(row(it), "\t"))
	}
	return tw.Flush()
}

// workspaceJSON is the CLI's JSON form of a workspace.
type workspaceJSON struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	EnabledModels []string  `json:"enabled_models"`
	CreatedAt     time.Time `json:"created_at"`
}

func toWorkspaceJSON(w store.Workspace) workspaceJSON {
	return workspaceJSON{ID: w.ID, Name: w.Name, EnabledModels: w.EnabledModels, CreatedAt: w.CreatedAt}
}

func workspaceCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("workspace: missing subcommand (create, list, models, add-member)")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("workspace " + sub)
	dbURL := databaseFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	switch sub {
	case "create":
		name := fs.String("name", "", "workspace name (required)")
		if err := parse(fs, args); err != nil {
			return err
		}
		*name = strings.TrimSpace(*name)
		if *name == "" || len(*name) > 100 {
			return usagef("workspace create: --name is required (1 to 100 characters)")
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := db.Workspaces.Create(ctx, *name)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, toWorkspaceJSON(w))
		}
		fmt.Fprintf(stdout, "Created workspace %s (%s).\nNext: switchboard key create --workspace %s --name \"my key\" --scopes models:read\n", w.ID, w.Name, w.ID)
		return nil
	case "list":
		if err := parse(fs, args); err != nil {
			return err
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		ws, err := db.Workspaces.List(ctx)
		if err != nil {
			return err
		}
		return printList(stdout, ws, *asJSON, toWorkspaceJSON, "ID\tNAME\tMODELS\tCREATED", func(w store.Workspace) []string {
			models := "all"
			if w.EnabledModels != nil {
				models = strings.Join(w.EnabledModels, ",")
			}
			return []string{w.ID, w.Name, models, w.CreatedAt.Format(time.RFC3339)}
		})
	case "models":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		enable := fs.String("enable", "", "comma-separated model IDs the workspace may use")
		all := fs.Bool("all", false, "enable every model of the catalogue")
		modelsFile := fs.String("models-file", os.Getenv("SWITCHBOARD_MODELS_FILE"), "model catalogue to check IDs against")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" || (*enable == "") == !*all {
			return usagef("workspace models: --workspace and exactly one of --enable or --all are required")
		}
		catalog, err := loadCatalog(*modelsFile)
		if err != nil {
			return err
		}
		var models []string
		if !*all {
			models = []string{}
			for _, id := range strings.Split(*enable, ",") {
				if id = strings.TrimSpace(id); id == "" {
					continue
				}
				if !catalog.Has(id) {
					return usagef("workspace models: %q is not in the model catalogue", id)
				}
				models = append(models, id)
			}
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := db.Workspaces.SetEnabledModels(ctx, *wsID, models)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no workspace %s", *wsID)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, toWorkspaceJSON(w))
		}
		if models == nil {
			fmt.Fprintf(stdout, "Workspace %s may use every model.\n", w.ID)
		} else {
			fmt.Fprintf(stdout, "Workspace %s may use: %s\n", w.ID, strings.Join(models, ", "))
		}
		return nil
	case "add-member":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		email := fs.String("email", "", "email of a user who signed up in the console (required)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" || strings.TrimSpace(*email) == "" {
			return usagef("workspace add-member: --workspace and --email are required")
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		u, err := db.Users.ByEmail(ctx, *email)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no user %s: they must sign up in the console first", store.NormalizeEmail(*email))
		}
		if err != nil {
			return err
		}
		err = db.Workspaces.AddMember(ctx, *wsID, u.ID, store.RoleOwner)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no workspace %s", *wsID)
		case errors.Is(err, store.ErrConflict):
			return fmt.Errorf("%s is already a member of %s", u.Email, *wsID)
		case err != nil:
			return err
		}
		if *asJSON {
			return printJSON(stdout, map[string]string{"workspace_id": *wsID, "user_id": u.ID, "email": u.Email, "role": store.RoleOwner})
		}
		fmt.Fprintf(stdout, "%s is now an owner of workspace %s.\n", u.Email, *wsID)
		return nil
	}
	return usagef("workspace: unknown subcommand %q (create, list, models, add-member)", sub)
}

// keyJSON is the CLI's JSON form of a key; Secret is set only by key create.
type keyJSON struct {
	ID          string     `json:"id"`
	Secret      string     `json:"secret,omitempty"`
	Name        string     `json:"name"`
	WorkspaceID string     `json:"workspace_id"`
	Masked      string     `json:"masked"`
	Scopes      []string   `json:"scopes"`
	Status      string     `json:"status"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
}

func toKeyJSON(k store.APIKey) keyJSON {
	return keyJSON{
		ID: k.ID, Name: k.Name, WorkspaceID: k.WorkspaceID, Masked: apikey.Mask(k.DisplayPrefix, k.Last4),
		Scopes: k.Scopes, Status: k.Status(time.Now()), CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, LastUsedAt: k.LastUsedAt,
	}
}

func keyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("key: missing subcommand (create, list, revoke)")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("key " + sub)
	dbURL := databaseFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	switch sub {
	case "create":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		name := fs.String("name", "", "key name (required)")
		scopes := fs.String("scopes", "", "comma-separated scopes (required): "+strings.Join(apikey.All(), ","))
		expiresIn := fs.Duration("expires-in", 0, "lifetime, e.g. 720h (default: never expires)")
		if err := parse(fs, args); err != nil {
			return err
		}
		*name = strings.TrimSpace(*name)
		if *wsID == "" || *name == "" || len(*name) > 100 {
			return usagef("key create: --workspace and --name (1 to 100 characters) are required")
		}
		parsed, err := apikey.ParseScopes(strings.Split(*scopes, ","))
		if err != nil {
			return usagef("key create: --scopes: %v", err)
		}
		if *expiresIn < 0 {
			return usagef("key create: --expires-in must be positive")
		}
		var expiresAt *time.Time
		if *expiresIn > 0 {
			t := time.Now().Add(*expiresIn)
			expiresAt = &t
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		k, secret, err := apikey.Issue(ctx, db.APIKeys, store.NewAPIKey{
			WorkspaceID: *wsID, Name: *name, Scopes: parsed, CreatedBy: "cli", ExpiresAt: expiresAt,
		})
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no workspace %s", *wsID)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			out := toKeyJSON(k)
			out.Secret = secret
			return printJSON(stdout, out)
		}
		expires := "never"
		if k.ExpiresAt != nil {
			expires = k.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "Created API key %s (%q) in workspace %s.\nScopes:  %s\nExpires: %s\n\n    %s\n\n"+
			"Copy the key now: it is stored only as a hash and will not be shown again.\n"+
			"Try it:  curl -H \"Authorization: Bearer %s\" http://localhost:8080/api/v1/models\n",
			k.ID, k.Name, k.WorkspaceID, strings.Join(k.Scopes, " "), expires, secret, secret)
		return nil
	case "list":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" {
			return usagef("key list: --workspace is required")
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Workspaces.Get(ctx, *wsID); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no workspace %s", *wsID)
		}
		keys, err := db.APIKeys.List(ctx, *wsID)
		if err != nil {
			return err
		}
		return printList(stdout, keys, *asJSON, toKeyJSON, "ID\tNAME\tKEY\tSCOPES\tSTATUS\tLAST USED", func(k store.APIKey) []string {
			last := "never"
			if k.LastUsedAt != nil {
				last = k.LastUsedAt.Format(time.RFC3339)
			}
			return []string{k.ID, k.Name, apikey.Mask(k.DisplayPrefix, k.Last4), strings.Join(k.Scopes, ","),
				k.Status(time.Now()), last}
		})
	case "revoke":
		// Accept the key ID before or after the flags.
		var id string
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			id, args = args[0], args[1:]
		}
		if err := parse(fs, args); err != nil {
			return err
		}
		if id == "" && fs.NArg() == 1 {
			id = fs.Arg(0)
		}
		if id == "" {
			return usagef("key revoke: KEY_ID is required")
		}
		db, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		k, err := db.APIKeys.Revoke(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no API key %s", id)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, toKeyJSON(k))
		}
		fmt.Fprintf(stdout, "Revoked API key %s (%q) at %s. Requests with it now answer 401 api_key_revoked.\n",
			k.ID, k.Name, k.RevokedAt.Format(time.RFC3339))
		return nil
	}
	return usagef("key: unknown subcommand %q (create, list, revoke)", sub)
}
