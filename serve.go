package main

// serve: the server's settings (flags mirroring the environment, each default taken from the package that owns
// the setting), its wiring, and the one runner of every background job.

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/ratelimit/redislimit"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve")
	dbURL := databaseFlag(fs)
	addr := fs.String("addr", ":8080", "listen address (env SWITCHBOARD_ADDR)")
	baseURL := fs.String("base-url", "",
		"public URL of the server, used in links it returns (env SWITCHBOARD_BASE_URL, default http://localhost<addr>)")
	modelsFile := fs.String("models-file", "",
		"YAML or JSON model catalogue (env SWITCHBOARD_MODELS_FILE, default: the built-in list)")
	modelLimits := llm.Limits{}
	fs.IntVar(&modelLimits.RequestsPerMinute, "model-requests-per-minute", 60,
		"chat completions per minute per workspace, bots' included; 0 for no limit (env SWITCHBOARD_MODEL_REQUESTS_PER_MINUTE)")
	fs.IntVar(&modelLimits.RequestsPerDay, "model-requests-per-day", 10000,
		"chat completions per UTC day per workspace; 0 for no limit (env SWITCHBOARD_MODEL_REQUESTS_PER_DAY)")
	fs.IntVar(&modelLimits.TokensPerMinute, "model-tokens-per-minute", 200000,
		"tokens per minute per workspace, as the upstreams' usage counts them; 0 for no limit (env SWITCHBOARD_MODEL_TOKENS_PER_MINUTE)")
	fs.IntVar(&modelLimits.TokensPerDay, "model-tokens-per-day", 2000000,
		"tokens per UTC day per workspace; 0 for no limit (env SWITCHBOARD_MODEL_TOKENS_PER_DAY)")
	keyRate := fs.Int("rate-limit", handlers.DefaultKeyRateLimit,
		"requests per minute per API key (env SWITCHBOARD_RATE_LIMIT_PER_MINUTE)")
	wsRate := fs.Int("workspace-rate-limit", handlers.DefaultWorkspaceRateLimit,
		"requests per minute per workspace (env SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE)")
	hookRate := fs.Int("hook-rate-limit", handlers.DefaultHookRateLimit,
		"pushes per minute one instance's hook URL takes, Telegram and WhatsApp Cloud (env SWITCHBOARD_HOOK_RATE_LIMIT_PER_MINUTE)")
	browserKeyRate := fs.Int("browser-key-rate-limit", handlers.DefaultBrowserKeyRateLimit,
		"requests per minute per browser key, all its visitors together (env SWITCHBOARD_BROWSER_KEY_RATE_LIMIT_PER_MINUTE)")
	visitorRate := fs.Int("browser-visitor-rate-limit", handlers.DefaultBrowserVisitorRateLimit,
		"requests per minute one visitor (client address) may send with one browser key (env SWITCHBOARD_BROWSER_VISITOR_RATE_LIMIT_PER_MINUTE)")
	addrRate := fs.Int("address-rate-limit", handlers.DefaultAddressRateLimit,
		"requests per minute one client address may send without a valid API key (env SWITCHBOARD_ADDRESS_RATE_LIMIT_PER_MINUTE)")
	corsOrigins := fs.String("cors-origins", "",
		"origins whose pages may call the API from a browser, comma-separated, or * for any (env SWITCHBOARD_CORS_ORIGINS; default none)")
	bodyLimit := fs.Int64("body-limit", handlers.DefaultBodyLimit,
		"maximum request body in bytes (env SWITCHBOARD_BODY_LIMIT_BYTES)")
	cacheTTL := fs.Duration("key-cache-ttl", apikey.DefaultCacheTTL,
		"longest time a verified API key is trusted without a lookup (env SWITCHBOARD_KEY_CACHE_TTL)")
	trusted := fs.String("trusted-proxies", "",
		"CIDRs of reverse proxies whose X-Forwarded-For is believed, e.g. 10.0.0.0/8 (env SWITCHBOARD_TRUSTED_PROXIES)")
	logLevel := fs.String("log-level", "info",
		"debug, info, warn or error (env SWITCHBOARD_LOG_LEVEL)")
	redisTimeout := fs.Duration("redis-timeout", redislimit.DefaultTimeout,
		"longest wait for Redis before a limit is decided in process (env SWITCHBOARD_REDIS_TIMEOUT)")
	txTimeout := fs.Duration("tx-timeout", handlers.DefaultTxTimeout,
		"longest a request's transaction may wait for and hold the database's writer before it answers 503 (env SWITCHBOARD_TX_TIMEOUT)")
	otlpEndpoint := fs.String("otlp-endpoint", "",
		"OpenTelemetry collector's OTLP/HTTP base URL, e.g. http://collector:4318: traces of requests, database statements, webhook attempts and provider calls (env SWITCHBOARD_OTLP_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT; default off)")
	sampleRatio := fs.Float64("trace-sample-ratio", 1,
		"share of new traces kept, 0 to 1; a caller's sampled traceparent is always followed (env SWITCHBOARD_TRACE_SAMPLE_RATIO)")
	wh := addWebhookFlags(fs)
	shortLinks := linkFlags(fs)
	chans := channelFlags(fs)
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
	// Lines are buffered (a write per request would be as many system calls as the answers) and flushed within
	// telemetry.DefaultLogFlushInterval; the deferred Close runs after every other deferred step, so a clean exit
	// writes every line.
	logOut := telemetry.NewLogWriter(stderr, 0, 0)
	defer logOut.Close()
	log := telemetry.NewJSONLogger(logOut, level)

	if *otlpEndpoint == "" {
		*otlpEndpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	stopTracing, err := telemetry.Setup(ctx, telemetry.Options{Endpoint: *otlpEndpoint, SampleRatio: *sampleRatio})
	if err != nil {
		return usagef("--otlp-endpoint: %v", err)
	}
	defer func() { // last: the spans of the shutdown are sent too
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(flush)
	}()

	catalog, err := loadCatalog(*modelsFile)
	if err != nil {
		return err
	}
	upstreams, err := llm.ParseUpstreams(os.Getenv("SWITCHBOARD_MODEL_UPSTREAMS"))
	if err != nil {
		return usagef("%v", err)
	}
	var proxies []*net.IPNet
	for _, cidr := range splitList(*trusted) {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return usagef("--trusted-proxies: %v", err)
		}
		proxies = append(proxies, n)
	}
	// The address is taken before anything touches the database or the data directory, so that a start that
	// cannot serve (a port out of range, one in use) migrates nothing and writes no key. Closing it again once
	// the HTTP server has closed it is harmless.
	if _, err := net.ResolveTCPAddr("tcp", *addr); err != nil {
		return usagef("--addr: %v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Served from now on, by the gate (503 with Retry-After) until the server is built: see handlers.Gate.
	gate := &handlers.Gate{}
	httpSrv := &http.Server{
		Handler:           gate,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	opened := false
	defer func() {
		if !opened { // the start failed: the gate's answers end with it
			_ = httpSrv.Close()
			<-served
		}
	}()
	db, err := store.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	// Closed last: after every job that uses it has returned.
	defer db.Close()
	if *otlpEndpoint != "" {
		db.TraceQueries()
	}
	// The key is checked before migrating, so that a misconfigured start changes nothing.
	key, created, err := sealbox.LoadOrCreateKey(os.Getenv("SWITCHBOARD_SECRET_KEY"), db.DataDir())
	if err != nil {
		return err
	}
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	if created {
		log.Warn("generated the server secret key that encrypts webhook secrets: back it up, without it they cannot be opened",
			"path", filepath.Join(db.DataDir(), sealbox.KeyFile))
	}
	limits, err := openLimits(ctx, os.Getenv("SWITCHBOARD_REDIS_URL"), *redisTimeout, log)
	if err != nil {
		return err
	}
	defer limits.close()
	clickConfig, geo, err := shortLinks.clicks(log)
	if err != nil {
		return err
	}
	defer geo.Close()
	if *baseURL == "" {
		*baseURL = "http://" + displayAddr(ln.Addr())
	}
	*baseURL = strings.TrimSuffix(*baseURL, "/")
	runtimeOptions := chans.options(log)
	// The runtime slot lets a restart in this process's place take the instances it leaves at once (see hub.Options).
	host, _ := os.Hostname()
	slot, err := db.LockRuntimeSlot(ctx, host)
	switch {
	case errors.Is(err, store.ErrNoRuntimeSlot):
		log.Warn("every runtime slot of this host is held: after a restart, this process's instances wait for their leases to run out")
	case err != nil:
		return err
	default:
		defer slot.Close()
		runtimeOptions.Slot = slot.Name
	}
	// The one value of every service of the process: the API, the console and the jobs below share it.
	a, err := app.New(ctx, db, app.Config{BaseURL: *baseURL, Logger: log, SecretKey: key, Egress: whPolicy,
		Webhooks: whConfig, Limiter: limits.limiter, Nonces: limits.nonces, KeyCacheTTL: *cacheTTL, Models: catalog,
		ModelUpstreams: upstreams, ModelLimits: modelLimits,
		Links: shortLinks.config(), Clicks: &clickConfig, RedirectCacheSize: *shortLinks.cacheSize,
		Channels: runtimeOptions, MediaBucket: os.Getenv("SWITCHBOARD_MEDIA_BUCKET")})
	if err != nil {
		return err
	}
	srv, err := handlers.New(handlers.Config{
		BaseURL: *baseURL, BodyLimit: *bodyLimit, KeyRateLimit: *keyRate, HookRateLimit: *hookRate,
		BrowserKeyRateLimit: *browserKeyRate, BrowserVisitorRateLimit: *visitorRate,
		AddressRateLimit: *addrRate, CORSOrigins: splitList(*corsOrigins),
		WorkspaceRateLimit: *wsRate, Verifier: a.Verifier, Models: a.Models, LLM: a.LLM, Bots: a.Bots, TrustedProxies: proxies, Logger: log,
		Box: a.Box, Webhooks: a.Webhooks, Events: a.Events, Links: a.Links, Automation: a.Automation,
		Limiter: a.Limiter, Channels: a.Messaging, Streams: a.Streams, TxTimeout: *txTimeout,
		Redirects: handlers.RedirectOptions{Clicks: a.Clicks, Cache: a.Redirects},
	}, db)
	if err != nil {
		return err
	}
	if err := srv.RegisterMetrics(slices.Concat(a.Collectors(), limits.collectors)...); err != nil {
		return err
	}
	con, err := console.New(console.Config{BaseURL: *baseURL, Logger: log, Automation: a.Automation,
		Workspaces: a.Workspaces, Links: a.Links, Webhooks: a.Webhooks, Channels: a.Messaging, Bots: a.Bots, LLM: a.LLM, Limiter: a.Limiter,
		Nonces: a.Nonces, StreamBox: a.Box}, db)
	if err != nil {
		return err
	}
	srv.Mount(con.Register)
	gate.Open(srv)
	opened = true

	// Every background job of the process, stopped in stages when ctx ends (SIGTERM), so that a shutdown loses
	// nothing: stage 0 stops taking work and drains it side by side — the requests in flight and the work of the
	// engines (app.Register says which); stage 1 then drains what those last requests recorded; stage 2 writes the
	// key last-use times they left. Only then does serve return and close the database. A job that fails stops
	// them all the same way.
	jobs := runner.New(log)
	jobs.Go(0, "http server", serveHTTP(httpSrv, served, log))
	jobs.Go(0, "console session sweep", con.Run)
	jobs.Go(0, "idempotency key pruning", srv.PruneIdempotencyKeys)
	a.Register(jobs)

	log.Info("switchboard listening", "addr", ln.Addr().String(), "base_url", *baseURL,
		"database", string(db.Dialect()), "docs", *baseURL+"/docs/", "models", len(a.Models.All()))
	err = jobs.Run(ctx)
	log.Info("stopped")
	return err
}

// shutdownTimeout bounds the drain of the requests in flight.
const shutdownTimeout = 30 * time.Second

// serveHTTP is the HTTP server's job: the server serves (served reports its end) until ctx ends; then it closes the
// listener and waits for the requests in flight.
func serveHTTP(httpSrv *http.Server, served <-chan error, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
		}
		log.Info("shutting down: draining in-flight requests and webhook attempts")
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		err := httpSrv.Shutdown(shutdownCtx)
		if served := <-served; !errors.Is(served, http.ErrServerClosed) {
			err = errors.Join(err, served)
		}
		return err
	}
}

// serveNotes ends `serve --help`: the settings read from the environment only.
const serveNotes = `
Environment only (a secret does not belong on a command line):
  SWITCHBOARD_SECRET_KEY
    	base64 of 32 random bytes (openssl rand -base64 32) that encrypts webhook secrets at rest. Required on
    	PostgreSQL; on SQLite generated into the data directory (secret.key) on first start when unset.
  SWITCHBOARD_REDIS_URL
    	redis://[user:password@]host:port[/db] (rediss:// for TLS): every rate limit and the console's form nonces are
    	shared through it by all replicas. Unset: each process limits alone. While it does not answer, each process
    	limits alone too (switchboard_ratelimit_redis_up is 0) and nothing is refused because of it.
  SWITCHBOARD_MODEL_UPSTREAMS
    	the OpenAI-compatible model servers, as a JSON list or the path of a JSON or YAML file holding one:
    	[{"name": "local", "base_url": "http://ollama:11434/v1", "api_key": "…", "models": ["llama3.1"]}] (models,
    	optional, narrows what the upstream lists). Set: GET /api/v1/models lists their models, and chat
    	completions and model bots go to them; their addresses pass the egress guard (--webhook-allowed-networks
    	for one on a private network). Unset: the models list is the catalogue.`

// limits are the rate limits and form nonces of the process: shared through Redis, or its own.
type limits struct {
	limiter    ratelimit.Limiter
	nonces     ratelimit.Nonces
	collectors []prometheus.Collector
	close      func()
}

// openLimits shares the limits through the Redis at redisURL, or keeps them in process when it is "". A Redis that
// does not answer at start is only logged: the limits work in process until it does.
func openLimits(ctx context.Context, redisURL string, timeout time.Duration, log *slog.Logger) (limits, error) {
	local, nonces := ratelimit.New(), ratelimit.NewNonces()
	if redisURL == "" {
		return limits{limiter: local, nonces: nonces, close: func() {}}, nil
	}
	r, err := redislimit.Open(redislimit.Config{URL: redisURL, Timeout: timeout, Logger: log})
	if err != nil {
		// The URL may hold a password: name the variable, not its value.
		return limits{}, usagef("SWITCHBOARD_REDIS_URL is not a redis:// or rediss:// URL")
	}
	if err := r.Ping(ctx); err != nil {
		log.Warn("redis does not answer at start: rate limits and form nonces are per process until it does",
			"error", err.Error())
	} else {
		log.Info("rate limits and form nonces are shared through redis")
	}
	return limits{limiter: r.Limiter(local), nonces: r.Nonces(nonces), collectors: r.Collectors(),
		close: func() { _ = r.Close() }}, nil
}

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
		clickBuffer: fs.Int("click-buffer", clicks.DefaultHighWater,
			"clicks buffered in memory before they spill to the spool on disk (env SWITCHBOARD_CLICK_BUFFER)"),
		clickBatch: fs.Int("click-batch-size", clicks.DefaultBatchSize,
			"most clicks written in one transaction (env SWITCHBOARD_CLICK_BATCH_SIZE)"),
		clickInterval: fs.Duration("click-interval", clicks.DefaultInterval,
			"how often buffered clicks are written (env SWITCHBOARD_CLICK_INTERVAL)"),
		cacheSize: fs.Int("link-cache-size", linkcache.DefaultSize,
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

// config is the configuration of short links (the base URL and logger are the process's).
func (l linkSettings) config() links.Config {
	return links.Config{ShortBaseURL: strings.TrimSuffix(*l.shortBaseURL, "/"),
		Domains: splitList(*l.shortDomains), AllowedSchemes: splitList(*l.allowedSchemes),
		BlockedHosts: splitList(*l.blockedHosts), TombstonePeriod: *l.tombstone}
}

// clicks opens the GeoIP database (nil without one) and returns the click recorder's configuration, whose spool
// lives in --data-dir (default: the database's data directory).
func (l linkSettings) clicks(log *slog.Logger) (clicks.Config, *clicks.GeoIP, error) {
	var geo *clicks.GeoIP
	if *l.geoIP != "" {
		var err error
		if geo, err = clicks.OpenGeoIP(*l.geoIP); err != nil {
			return clicks.Config{}, nil, err
		}
	}
	c := clicks.Config{BatchSize: *l.clickBatch, Interval: *l.clickInterval, HighWater: *l.clickBuffer, GeoIP: geo,
		Logger: log}
	if *l.dataDir != "" {
		c.SpoolDir = filepath.Join(*l.dataDir, "spool")
	}
	return c, geo, nil
}

// displayAddr turns ":8080" into "localhost:8080" for links.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || host == "" || host == "::" || host == "0.0.0.0" {
		return "localhost:" + port
	}
	return net.JoinHostPort(host, port)
}
