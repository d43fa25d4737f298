// Package app is the composition root of a Switchboard process: it builds every capability and engine once, over
// one database, in the order they depend on each other, and names the background jobs that keep them running.
// serve, the benchmarks and the tests build the product through it, so that the API, the console and the jobs of a
// process share one instance of each service and nothing else assembles them.
package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/bots"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud"
	"github.com/switchboard/switchboard/internal/channels/xmpp"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/links/linkcache"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
)

// Config is what a process chooses; zero values take the defaults of the package that owns each setting, which is
// what tests and tools want.
type Config struct {
	// BaseURL is the server's public URL (no trailing slash): links it returns, ingest URLs, hook URLs of
	// instances.
	BaseURL string
	// Logger receives what reaches no client (default slog.Default()).
	Logger *slog.Logger
	// SecretKey is the server key that seals secrets at rest (sealbox.KeySize bytes). Without one a random key is
	// used: right for tests and tools, whose sealed secrets need not outlive the process.
	SecretKey []byte
	// Egress is the policy of every outbound connection made for a customer: webhook and broker deliveries, media
	// fetched by URL, networks' servers named by instance configs. Guard, when set, is used instead.
	Egress egress.Policy
	Guard  *egress.Guard
	// Webhooks configures the delivery engine (its Logger and Limiter default to the process's).
	Webhooks webhook.Config
	// Limiter holds the request quotas and Nonces the console's key-creation forms (default: in this process; a
	// shared one, such as redislimit's, makes them hold across replicas).
	Limiter ratelimit.Limiter
	Nonces  ratelimit.Nonces
	// KeyCacheTTL is the longest a verified API key is trusted without a lookup (default apikey.DefaultCacheTTL).
	KeyCacheTTL time.Duration
	// Models is the operator's model catalogue (default modelcatalog.Default()).
	Models *modelcatalog.Catalog
	// ModelUpstreams are the operator's OpenAI-compatible servers: when set, the models list is theirs and chat
	// completions and model bots go to them; ModelLimits are each workspace's quotas of completions.
	ModelUpstreams []llm.Upstream
	ModelLimits    llm.Limits
	// Bots tunes the bot engine (tries, retry delay, poll interval); its services are the process's.
	Bots bots.Config
	// LLM, when set, is used instead of a service over ModelUpstreams (a test's, over upstreams its egress policy
	// would not reach).
	LLM *llm.Service
	// Links configures short links; its BaseURL and Logger default to the process's.
	Links links.Config
	// Clicks configures the click recorder of redirects (SpoolDir defaults to "spool" in the database's data
	// directory); nil builds no recorder and no redirect cache: the process answers no short links.
	Clicks *clicks.Config
	// RedirectCacheSize is how many short links redirects keep resolved in memory (default linkcache.DefaultSize).
	RedirectCacheSize int
	// Channels configures the channel runtime (its Logger defaults to the process's).
	Channels hub.Options
	// MediaBucket, when set, is the URL of an S3-compatible bucket that keeps media bytes instead of the database
	// or the data directory (see channels.NewS3Media; it holds the bucket's secret key).
	MediaBucket string
	// Streams configures the live event streams (its Logger defaults to the process's).
	Streams eventstream.Config
	// Events is the outbox of every service (default: one over the database with the built-in event types); a
	// test that records events of its own passes the one it reads.
	Events *events.Outbox
}

// App is every capability and engine of one process. Its fields are built by New and shared, read-only, by the
// API, the console and the background jobs.
type App struct {
	DB  *store.DB
	Log *slog.Logger
	// Box seals secrets at rest; Guard checks and dials every outbound connection made for a customer.
	Box   *sealbox.Box
	Guard *egress.Guard
	// Events is the outbox every change records its events in, and through it the event catalogue.
	Events   *events.Outbox
	Limiter  ratelimit.Limiter
	Nonces   ratelimit.Nonces
	Verifier *apikey.Verifier
	Models   *modelcatalog.Catalog
	// LLM lists the upstreams' models and passes completions to them (Configured is false without upstreams).
	LLM *llm.Service

	Workspaces *workspaces.Service
	Links      *links.Service
	// Clicks and Redirects serve short links: nil when Config.Clicks was.
	Clicks    *clicks.Recorder
	Redirects *linkcache.Cache[*links.Target]

	Dispatcher *webhook.Dispatcher
	Webhooks   *webhook.Service
	Automation *automation.Service
	Messaging  *channels.Service
	// Bots answers the instances' inbound messages; its Run follows the event log.
	Bots *bots.Service
	// Runtime holds this process's channel sessions and runs its send queue.
	Runtime *hub.Hub
	Streams *eventstream.Hub
}

// New builds the product over an open, migrated database. It loads what the services keep in memory (the custom
// event types); nothing runs until the jobs Register adds are run.
func New(ctx context.Context, db *store.DB, cfg Config) (*App, error) {
	a := &App{DB: db, Log: cfg.Logger, Limiter: cfg.Limiter, Nonces: cfg.Nonces, Models: cfg.Models, Guard: cfg.Guard}
	if a.Log == nil {
		a.Log = slog.Default()
	}
	if a.Limiter == nil {
		a.Limiter = ratelimit.New()
	}
	if a.Nonces == nil {
		a.Nonces = ratelimit.NewNonces()
	}
	if a.Models == nil {
		a.Models = modelcatalog.Default()
	}
	if a.Guard == nil {
		a.Guard = egress.NewGuard(cfg.Egress)
	}
	key := cfg.SecretKey
	if key == nil {
		key = make([]byte, sealbox.KeySize)
		_, _ = rand.Read(key)
	}
	var err error
	if a.Box, err = sealbox.New(key); err != nil {
		return nil, err
	}
	// An upstream's stream can last minutes: the service bounds each call itself, so the client sets no timeout.
	if a.LLM = cfg.LLM; a.LLM == nil {
		a.LLM = llm.New(llm.Config{Upstreams: cfg.ModelUpstreams, Client: a.Guard.Client(0), Limits: cfg.ModelLimits,
			Logger: a.Log, DB: db, Box: a.Box, Guard: a.Guard})
	}
	baseURL := strings.TrimSuffix(cfg.BaseURL, "/")
	if a.Events = cfg.Events; a.Events == nil {
		a.Events = events.NewOutbox(db, events.Builtin())
	}
	a.Verifier = apikey.NewVerifier(db.APIKeys, cfg.KeyCacheTTL, a.Log)
	a.Workspaces = workspaces.New(db, workspaces.Config{Models: a.Models, ForgetKey: a.Verifier.Forget})

	lc := cfg.Links
	if lc.BaseURL == "" {
		lc.BaseURL = baseURL
	}
	if lc.Logger == nil {
		lc.Logger = a.Log
	}
	if a.Links, err = links.New(db, a.Events, lc); err != nil {
		return nil, err
	}
	if cfg.Clicks != nil {
		cc := *cfg.Clicks
		if cc.Logger == nil {
			cc.Logger = a.Log
		}
		if cc.SpoolDir == "" {
			dir := db.DataDir()
			if dir == "" {
				dir = "data"
			}
			cc.SpoolDir = filepath.Join(dir, "spool")
		}
		if a.Clicks, err = clicks.New(db, cc); err != nil {
			return nil, err
		}
		a.Redirects = linkcache.New(a.Links.Resolve, db.LinkChanges, linkcache.Config{Size: cfg.RedirectCacheSize})
	}

	wc := cfg.Webhooks
	if wc.Logger == nil {
		wc.Logger = a.Log
	}
	if wc.Limiter == nil {
		wc.Limiter = a.Limiter
	}
	a.Dispatcher = webhook.NewDispatcher(db, a.Box, a.Guard, wc)
	if a.Webhooks, err = webhook.NewService(db, a.Events, webhook.ServiceConfig{Box: a.Box, Guard: a.Guard,
		Sender: a.Dispatcher.Sender(), Wake: a.Dispatcher.Wake, Logger: a.Log}); err != nil {
		return nil, err
	}
	if a.Automation, err = automation.New(db, a.Events, automation.Config{BaseURL: baseURL, Box: a.Box, Logger: a.Log,
		Limiter: a.Limiter}); err != nil {
		return nil, err
	}
	if err := a.Automation.LoadTypes(ctx); err != nil {
		return nil, fmt.Errorf("load custom event types: %w", err)
	}
	if err := a.messaging(ctx, baseURL, cfg.Channels, cfg.MediaBucket); err != nil {
		return nil, err
	}
	bc := cfg.Bots
	bc.Events, bc.Channels, bc.LLM, bc.Box, bc.Guard, bc.Logger = a.Events, a.Messaging, a.LLM, a.Box, a.Guard, a.Log
	a.Bots = bots.New(db, bc)
	sc := cfg.Streams
	if sc.Logger == nil {
		sc.Logger = a.Log
	}
	a.Streams = eventstream.NewHub(db, a.Events.Types(), sc)
	return a, nil
}

// messaging builds the messaging capability one way: the providers first, the records over them, the runtime over
// the records (it opens sessions and records what they report through them), then the service over the records and
// the runtime. The sandbox's sessions wake each other across processes through the runtime that opens them. Media
// bytes live in the data directory on SQLite (files beside the database, out of its single writer) and in the
// database on PostgreSQL (shared by every process), unless the operator names a bucket: then in the bucket.
func (a *App) messaging(ctx context.Context, baseURL string, opts hub.Options, bucket string) error {
	if opts.Logger == nil {
		opts.Logger = a.Log
	}
	var media channels.MediaStore = channels.DatabaseMedia{DB: a.DB}
	if a.DB.Dialect() == store.SQLite {
		media = channels.DirMedia{DB: a.DB, Dir: filepath.Join(a.DB.DataDir(), "media")}
	}
	if bucket != "" {
		s3, err := channels.NewS3Media(ctx, a.DB, bucket)
		if err != nil {
			return err
		}
		s3.Earlier, media = media, s3 // files stored before the bucket stay readable
	}
	// XMPP servers, Bot API servers and Graph API base URLs are named by instance configs, that is by customers:
	// their connections go through the egress guard like webhooks (a server on a private network needs
	// --webhook-allowed-networks). Telegram and WhatsApp Cloud push to the hook URLs under the public base URL.
	providers := []channels.Provider{
		sandbox.New(a.DB.Sandbox, sandbox.Options{Logger: a.Log, Delivered: sandbox.DefaultDelivered, Read: sandbox.DefaultRead}),
		xmpp.New(xmpp.Options{Dial: a.Guard.DialContext, HTTP: a.Guard.Client(xmpp.DefaultUploadTimeout)}),
		telegram.New(telegram.Options{PublicURL: baseURL, HTTP: a.Guard.Client(time.Minute)}),
		whatsappcloud.New(whatsappcloud.Options{HTTP: a.Guard.Client(time.Minute)}),
	}
	for _, build := range optionalProviders {
		providers = append(providers, build(a))
	}
	rec, err := channels.NewRecorder(a.DB, a.Events, channels.Config{Providers: providers, Sealer: a.Box, Media: media,
		Guard: a.Guard, Logger: a.Log, BaseURL: baseURL})
	if err != nil {
		return err
	}
	a.Runtime = hub.New(a.DB, rec, opts)
	a.Messaging, err = channels.New(rec, a.Runtime)
	return err
}

// optionalProviders are the providers of build tags: files built only with a tag append to it in their init (the
// WhatsApp Web provider, whatsapp_web, links GPL-3.0 code that the default build leaves out).
var optionalProviders []func(a *App) channels.Provider

// Register adds the background jobs of the product to jobs, in the stages of a shutdown that loses nothing: stage
// 0 stops taking work and drains it (webhook attempts, open streams, channel sessions and sends); stage 1 drains
// what the last requests recorded (clicks) and keeps redirects hearing of link changes until the HTTP server has
// drained; stage 2 writes the key last-use times they left. The HTTP server, the console and the API's own jobs
// are the caller's.
func (a *App) Register(jobs *runner.Runner) {
	jobs.Go(0, "webhook dispatcher", a.Dispatcher.Run)
	// Open event streams end when it stops, so that the HTTP server's drain does not wait for them.
	jobs.Go(0, "event streams", func(ctx context.Context) error { a.Streams.Run(ctx); return nil })
	// The channel runtime drains the sends in flight, closes its sessions and gives its leases to the other replicas.
	jobs.Go(0, "channel runtime", a.Runtime.Run)
	// Routes to people fail over on deadlines kept in the database: every replica's worker carries them on.
	jobs.Go(0, "message routes", a.Messaging.RunRoutes)
	jobs.Go(0, "source request log pruning", a.Automation.Run)
	// Bots stop taking messages first and finish the answers under way while the channel runtime still sends.
	jobs.Go(0, "bots", a.Bots.Run)
	jobs.Go(1, "link expiry announcer", a.Links.Run)
	if a.Clicks != nil {
		jobs.Go(1, "redirect cache watch", a.Redirects.Run)
		jobs.Go(1, "click recorder", a.Clicks.Run)
	}
	jobs.Go(2, "api key verifier", a.Verifier.Run)
}

// Collectors are the metrics of the engines (the HTTP layer adds its own).
func (a *App) Collectors() []prometheus.Collector {
	var out []prometheus.Collector
	out = append(out, a.Dispatcher.Collectors()...)
	out = append(out, a.Runtime.Collectors()...)
	if a.Clicks != nil {
		out = append(out, a.Clicks.Collectors()...)
	}
	return out
}
