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
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/internal/webhook"
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

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve")
	dbURL := databaseFlag(fs)
	addr := fs.String("addr", ":8080", "listen address (env SWITCHBOARD_ADDR)")
	baseURL := fs.String("base-url", "",
		"public URL of the server, used in links it returns (env SWITCHBOARD_BASE_URL, default http://localhost<addr>)")
	modelsFile := fs.String("models-file", "",
		"YAML or JSON model catalogue (env SWITCHBOARD_MODELS_FILE, default: the built-in list)")
	keyRate := fs.Int("rate-limit", 600,
		"requests per minute per API key (env SWITCHBOARD_RATE_LIMIT_PER_MINUTE)")
	wsRate := fs.Int("workspace-rate-limit", 3000,
		"requests per minute per workspace (env SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE)")
	bodyLimit := fs.Int64("body-limit", int64(1<<20),
		"maximum request body in bytes (env SWITCHBOARD_BODY_LIMIT_BYTES)")
	cacheTTL := fs.Duration("key-cache-ttl", 30*time.Second,
		"longest time a verified API key is trusted without a lookup (env SWITCHBOARD_KEY_CACHE_TTL)")
	trusted := fs.String("trusted-proxies", "",
		"CIDRs of reverse proxies whose X-Forwarded-For is believed, e.g. 10.0.0.0/8 (env SWITCHBOARD_TRUSTED_PROXIES)")
	logLevel := fs.String("log-level", "info",
		"debug, info, warn or error (env SWITCHBOARD_LOG_LEVEL)")
	wh := addWebhookFlags(fs)
	shortLinks := linkFlags(fs)
	if err := parseWithNotes(fs, args, serveNotes); err != nil {
		return err
	}
	whConfig, whPolicy, err := wh.config()
	if err != nil {
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
	db, err := store.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	// The key is checked before migrating, so that a misconfigured start changes nothing.
	key, created, err := webhook.LoadOrCreateKey(os.Getenv("SWITCHBOARD_SECRET_KEY"), db.DataDir())
	if err != nil {
		return err
	}
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	if created {
		log.Warn("generated the server secret key that encrypts webhook secrets: back it up, without it they cannot be opened",
			"path", filepath.Join(db.DataDir(), webhook.KeyFile))
	}
	box, err := webhook.NewBox(key)
	if err != nil {
		return err
	}
	guard := egress.NewGuard(whPolicy)
	whConfig.Logger = log
	dispatcher := webhook.NewDispatcher(db, box, guard, whConfig)
	recorder, geo, err := shortLinks.recorder(db, log)
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
	outbox := events.NewOutbox(db, events.Builtin())
	linkService, err := links.New(db, outbox, shortLinks.config(strings.TrimSuffix(*baseURL, "/"), log))
	if err != nil {
		return err
	}
	redirectCache := linkcache.New(linkService.Resolve, db.LinkChanges, linkcache.Config{Size: *shortLinks.cacheSize})
	srv, err := handlers.New(handlers.Config{
		BaseURL: strings.TrimSuffix(*baseURL, "/"), BodyLimit: *bodyLimit, KeyRateLimit: *keyRate,
		WorkspaceRateLimit: *wsRate, KeyCacheTTL: *cacheTTL, Models: catalog, TrustedProxies: proxies, Logger: log,
		Webhooks: handlers.WebhookEngine{Box: box, Guard: guard, Sender: dispatcher.Sender(), Wake: dispatcher.Wake},
		Events:   outbox, Links: linkService,
		Redirects: handlers.RedirectOptions{Clicks: recorder, Cache: redirectCache},
	}, db)
	if err != nil {
		return err
	}
	if err := srv.RegisterMetrics(append(dispatcher.Collectors(), recorder.Collectors()...)...); err != nil {
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

	// The dispatcher and the pruning of expired idempotency keys run on a context of their own: on shutdown they are
	// stopped after the listener is closed, and waited for before the database is.
	jobs := runner.New(log)
	jobs.Go(0, "webhook dispatcher", dispatcher.Run)
	jobs.Go(0, "idempotency key pruning", srv.PruneIdempotencyKeys)
	dispatchCtx, stopDispatcher := context.WithCancel(context.Background())
	dispatched := make(chan error, 1)
	go func() { dispatched <- jobs.Run(dispatchCtx) }()
	// The link jobs stop once the HTTP server drained: redirects in flight still hear of link changes.
	linkJobs := runner.New(log)
	linkJobs.Go(0, "link expiry announcer", linkService.Run)
	linkJobs.Go(0, "redirect cache watch", redirectCache.Run)
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	jobsDone := make(chan error, 1)
	go func() { jobsDone <- linkJobs.Run(jobsCtx) }()

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		stopDispatcher()
		<-dispatched
		stopJobs()
		err = errors.Join(err, <-jobsDone)
		srv.Close()
		return errors.Join(err, drain())
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests and webhook attempts")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Shutdown closes the listener at once and then waits for the requests in flight; meanwhile the dispatcher
	// finishes and records its attempts in flight (each bounded by the webhook timeout), so the two drains overlap
	// instead of adding up.
	shutdown := make(chan error, 1)
	go func() { shutdown <- httpSrv.Shutdown(shutdownCtx) }()
	stopDispatcher()
	err = errors.Join(<-dispatched, <-shutdown)
	stopJobs()
	err = errors.Join(err, <-jobsDone)
	srv.Close()
	log.Info("draining buffered clicks")
	err = errors.Join(err, drain())
	log.Info("stopped")
	return err
}

// serveNotes ends `serve --help`: the settings read from the environment only.
const serveNotes = `
Environment only (a secret does not belong on a command line):
  SWITCHBOARD_SECRET_KEY
    	base64 of 32 random bytes (openssl rand -base64 32) that encrypts webhook secrets at rest. Required on
    	PostgreSQL; on SQLite generated into the data directory (secret.key) on first start when unset.`

// webhookFlags are the webhook engine's settings of serve.
type webhookFlags struct {
	schedule, networks                                     string
	allowHTTP                                              bool
	timeout, lease, retention, throttledWait, disableAfter time.Duration
	workers                                                int
}

func addWebhookFlags(fs *flag.FlagSet) *webhookFlags {
	w := &webhookFlags{}
	fs.StringVar(&w.schedule, "webhook-retry-schedule", "",
		"delays of a delivery's attempts, comma-separated: the first from the event, each next from the attempt before "+
			"(env SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE, default 0s,5s,5m,30m,2h,5h,10h,14h,20h,24h; ±20 % jitter)")
	fs.BoolVar(&w.allowHTTP, "webhook-allow-http", false,
		"allow plain http:// webhook URLs; https only by default (env SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true)")
	fs.StringVar(&w.networks, "webhook-allowed-networks", "",
		"CIDRs webhooks may reach although they are not public, e.g. 10.0.0.0/8,127.0.0.0/8 (env SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS)")
	fs.DurationVar(&w.timeout, "webhook-timeout", webhook.DefaultTimeout,
		"longest webhook attempt, response included (env SWITCHBOARD_WEBHOOK_TIMEOUT)")
	fs.DurationVar(&w.lease, "webhook-lease", 0,
		"how long a claimed delivery is held: after a crash it is retried once this has passed; must exceed the timeout "+
			"(env SWITCHBOARD_WEBHOOK_LEASE, default timeout + 1m)")
	fs.IntVar(&w.workers, "webhook-workers", webhook.DefaultWorkers,
		"webhook attempts this process runs at once (env SWITCHBOARD_WEBHOOK_WORKERS)")
	fs.DurationVar(&w.retention, "webhook-retention", webhook.DefaultRetention,
		"how long events, deliveries and attempts are kept; events still being delivered are kept longer (env SWITCHBOARD_WEBHOOK_RETENTION)")
	fs.DurationVar(&w.throttledWait, "webhook-throttled-wait", webhook.DefaultThrottledWait,
		"least wait before retrying after a timeout or a 429 (env SWITCHBOARD_WEBHOOK_THROTTLED_WAIT)")
	fs.DurationVar(&w.disableAfter, "webhook-disable-after", webhook.DefaultDisableAfter,
		"disable an endpoint that has failed this long without a success (env SWITCHBOARD_WEBHOOK_DISABLE_AFTER)")
	return w
}

// config checks the settings and returns the dispatcher's configuration (without logger and database) and the
// egress policy.
func (w *webhookFlags) config() (webhook.Config, egress.Policy, error) {
	cfg := webhook.Config{Timeout: w.timeout, Lease: w.lease, Workers: w.workers, Retention: w.retention,
		ThrottledWait: w.throttledWait, DisableAfter: w.disableAfter}
	for name, d := range map[string]time.Duration{"--webhook-timeout": w.timeout, "--webhook-retention": w.retention,
		"--webhook-throttled-wait": w.throttledWait, "--webhook-disable-after": w.disableAfter} {
		if d <= 0 {
			return cfg, egress.Policy{}, usagef("%s must be positive", name)
		}
	}
	if w.lease != 0 && w.lease <= w.timeout {
		return cfg, egress.Policy{}, usagef("--webhook-lease (%s) must exceed --webhook-timeout (%s)", w.lease, w.timeout)
	}
	if w.workers < 1 {
		return cfg, egress.Policy{}, usagef("--webhook-workers must be at least 1")
	}
	if w.schedule != "" {
		schedule, err := webhook.ParseSchedule(w.schedule)
		if err != nil {
			return cfg, egress.Policy{}, usagef("--webhook-retry-schedule: %v", err)
		}
		cfg.Schedule = schedule
	}
	networks, err := egress.ParseNetworks(w.networks)
	if err != nil {
		return cfg, egress.Policy{}, usagef("--webhook-allowed-networks: %v", err)
	}
	return cfg, egress.Policy{AllowHTTP: w.allowHTTP, AllowedNetworks: networks}, nil
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
		shortBaseURL: fs.String("short-base-url", "",
			"origin of short URLs, e.g. https://sb.example.com; its host is the default short domain (env SWITCHBOARD_SHORT_BASE_URL, default the base URL)"),
		shortDomains: fs.String("short-domains", "",
			"comma-separated further short domains (host[:port]) links may use (env SWITCHBOARD_SHORT_DOMAINS)"),
		allowedSchemes: fs.String("link-allowed-schemes", "",
			"comma-separated destination schemes allowed besides http and https, e.g. mailto,tel (env SWITCHBOARD_LINK_ALLOWED_SCHEMES)"),
		blockedHosts: fs.String("link-blocked-hosts", "",
			"comma-separated hosts (and their subdomains) refused as destinations (env SWITCHBOARD_LINK_BLOCKED_HOSTS)"),
		tombstone: fs.Duration("link-tombstone-period", links.DefaultTombstonePeriod,
			"how long a deleted link's slug stays reserved to its workspace (env SWITCHBOARD_LINK_TOMBSTONE_PERIOD)"),
		geoIP: fs.String("geoip-db", "",
			"MaxMind .mmdb file (GeoLite2-Country or compatible) for click countries (env SWITCHBOARD_GEOIP_DB, default none)"),
		dataDir: fs.String("data-dir", "",
			"directory of the click spool (env SWITCHBOARD_DATA_DIR, default the SQLite file's directory, or ./data with PostgreSQL)"),
		clickBuffer: fs.Int("click-buffer", 50_000,
			"clicks buffered in memory before they spill to the spool on disk (env SWITCHBOARD_CLICK_BUFFER)"),
		clickBatch: fs.Int("click-batch-size", 1000,
			"most clicks written in one transaction (env SWITCHBOARD_CLICK_BATCH_SIZE)"),
		clickInterval: fs.Duration("click-interval", 50*time.Millisecond,
			"how often buffered clicks are written (env SWITCHBOARD_CLICK_INTERVAL)"),
		cacheSize: fs.Int("link-cache-size", 100_000,
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

// config is the configuration of the links service of a server at baseURL.
func (l linkSettings) config(baseURL string, log *slog.Logger) links.Config {
	return links.Config{BaseURL: baseURL, ShortBaseURL: strings.TrimSuffix(*l.shortBaseURL, "/"),
		Domains: splitList(*l.shortDomains), AllowedSchemes: splitList(*l.allowedSchemes),
		BlockedHosts: splitList(*l.blockedHosts), TombstonePeriod: *l.tombstone, Logger: log}
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
		modelsFile := fs.String("models-file", "",
			"model catalogue to check IDs against (env SWITCHBOARD_MODELS_FILE, default: the built-in list)")
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
