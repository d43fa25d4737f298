// Package handlers is the HTTP layer of Switchboard: it implements the strict server generated from
// api/openapi.yaml, and owns the middleware, the problem writer, authentication, rate limits and the public routes
// (reference, health, metrics).
package handlers

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/accounts"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/bots"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/eventstream"
	"github.com/switchboard/switchboard/internal/links"
	"github.com/switchboard/switchboard/internal/links/redirector"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Config is the HTTP layer's configuration; zero values take the documented defaults.
type Config struct {
	// BaseURL is the public URL of the server, used in links it returns.
	BaseURL string
	// BodyLimit caps request bodies in bytes (default DefaultBodyLimit).
	BodyLimit int64
	// MediaBodyLimit caps the bodies of media uploads (default: the largest file, channels.DefaultMaxMedia, and
	// room for the multipart framing).
	MediaBodyLimit int64
	// KeyRateLimit and WorkspaceRateLimit are requests per minute (defaults DefaultKeyRateLimit and
	// DefaultWorkspaceRateLimit).
	KeyRateLimit       int
	WorkspaceRateLimit int
	// BrowserKeyRateLimit is requests per minute of one browser key, all its visitors together (default
	// DefaultBrowserKeyRateLimit), and BrowserVisitorRateLimit those of one visitor (client address) with one
	// browser key (default DefaultBrowserVisitorRateLimit). The workspace's quota applies too.
	BrowserKeyRateLimit     int
	BrowserVisitorRateLimit int
	// HookRateLimit is how many verified pushes a minute one instance's hook URL takes (default
	// DefaultHookRateLimit). Refused pushes are charged to the sender's address instead (AddressRateLimit), so
	// that nobody who knows an instance's ID can spend its quota.
	HookRateLimit int
	// AddressRateLimit is how many requests a minute one client address may send without a valid API key (default
	// DefaultAddressRateLimit).
	AddressRateLimit int
	// CORSOrigins are the origins whose pages may call the API and the ingest URLs from a browser ("*" for any);
	// empty means none: no CORS header is sent.
	CORSOrigins []string
	// Verifier authenticates API keys (required). Its Run is the process's to run: it writes last-use times and
	// follows the revocations of other processes.
	Verifier *apikey.Verifier
	// Models is the operator's model catalogue (default modelcatalog.Default()).
	Models *modelcatalog.Catalog
	// LLM serves the models list and chat completions from the operator's upstreams when it has any (see
	// internal/llm); without it, or without upstreams, the models list is the catalogue and completions answer
	// model_not_found.
	LLM *llm.Service
	// Bots manages the instances' bots (see internal/bots); without it the bot operations answer 503.
	Bots *bots.Service
	// TrustedProxies are the networks of reverse proxies whose X-Forwarded-For is believed; empty means the client
	// address is the connection's.
	TrustedProxies []*net.IPNet
	// Links is the short-link capability (required).
	Links *links.Service
	// Redirects configures the public redirects of short links; without them no short link is answered.
	Redirects RedirectOptions
	// Box seals the stored answers of idempotent requests and the live streams' tokens (required).
	Box *sealbox.Box
	// Webhooks, Events, Channels and Automation are the capabilities the API serves (required): the process's own,
	// shared with the console and the background jobs (see internal/app).
	Webhooks   *webhook.Service
	Events     *events.Outbox
	Channels   *channels.Service
	Automation *automation.Service
	// Limiter holds the key and workspace quotas (default: in this process; a shared one, such as redislimit's,
	// makes them hold across replicas).
	Limiter ratelimit.Limiter
	// Streams serves the live event streams; its Run is the process's to run. Without one, streams answer 503.
	Streams *eventstream.Hub
	// StreamHeartbeat is how often a quiet event stream sends a keep-alive line (default DefaultStreamHeartbeat).
	StreamHeartbeat time.Duration
	// TxTimeout bounds each transaction of a request, its wait for the database's writer included (default
	// DefaultTxTimeout): past it the transaction is rolled back and the request answers 503 with Retry-After. On
	// SQLite, whose single writer every write of the server shares, it is the longest any request holds them all up.
	TxTimeout time.Duration
	Logger    *slog.Logger
}

// Defaults of Config.
const (
	DefaultBodyLimit     = 1 << 20
	DefaultHookRateLimit = 60000
	DefaultKeyRateLimit  = 600
	// A browser key serves many visitors, each of whom may script it: a visitor gets a few requests a minute.
	DefaultBrowserKeyRateLimit     = 300
	DefaultBrowserVisitorRateLimit = 20
	DefaultWorkspaceRateLimit      = 3000
	DefaultTombstonePeriod         = 30 * 24 * time.Hour
	DefaultTxTimeout               = 5 * time.Second
)

// Server serves the whole product over HTTP.
type Server struct {
	cfg      Config
	db       *store.DB
	log      *slog.Logger
	verifier *apikey.Verifier
	// accounts checks the console sessions that console stream tokens act for.
	accounts *accounts.Service
	limiter  ratelimit.Limiter
	ops      *operations
	links    *links.Service
	webhooks *webhook.Service
	channels *channels.Service
	// automation serves sources, their ingest URLs and custom event types.
	automation *automation.Service
	// redirects is nil when the server answers no short links.
	redirects   *redirector.Redirector
	idempotency *idempotency
	metrics     *metrics
	echo        *echo.Echo
	models      map[string]gen.Model
	// events is the outbox and, through it, the event catalogue.
	events *events.Outbox
	// modelLists holds encoded ListModels bodies by set of enabled models (see ListModels).
	modelLists     sync.Map
	modelListCount atomic.Int64

	keyPolicy, workspacePolicy, addressPolicy ratelimit.Policy
	browserKeyPolicy, visitorPolicy           ratelimit.Policy
	corsOrigins                               map[string]bool
	// policyHeader is the RateLimit-Policy value, shared read-only by every response.
	policyHeader []string
	// chain is the whole of a request's way through the server (see ServeHTTP).
	chain echo.HandlerFunc
	// accessOut is the writer under the logger when the access log formats its lines itself (see logAccess).
	accessOut io.Writer
	// txTimeout is Config.TxTimeout as the requests' contexts answer it (see requestState).
	txTimeout any
}

var _ gen.StrictServerInterface = (*Server)(nil)

// New builds the server over an open, migrated database.
func New(cfg Config, db *store.DB) (*Server, error) {
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.MediaBodyLimit <= 0 {
		cfg.MediaBodyLimit = channels.DefaultMaxMedia + 64<<10
	}
	if cfg.KeyRateLimit <= 0 {
		cfg.KeyRateLimit = DefaultKeyRateLimit
	}
	if cfg.BrowserKeyRateLimit <= 0 {
		cfg.BrowserKeyRateLimit = DefaultBrowserKeyRateLimit
	}
	if cfg.BrowserVisitorRateLimit <= 0 {
		cfg.BrowserVisitorRateLimit = DefaultBrowserVisitorRateLimit
	}
	if cfg.HookRateLimit <= 0 {
		cfg.HookRateLimit = DefaultHookRateLimit
	}
	if cfg.WorkspaceRateLimit <= 0 {
		cfg.WorkspaceRateLimit = DefaultWorkspaceRateLimit
	}
	if cfg.AddressRateLimit <= 0 {
		cfg.AddressRateLimit = DefaultAddressRateLimit
	}
	if cfg.Models == nil {
		cfg.Models = modelcatalog.Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TxTimeout <= 0 {
		cfg.TxTimeout = DefaultTxTimeout
	}
	if cfg.StreamHeartbeat <= 0 {
		cfg.StreamHeartbeat = DefaultStreamHeartbeat
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New()
	}
	for name, missing := range map[string]bool{"Verifier": cfg.Verifier == nil, "Links": cfg.Links == nil,
		"Box": cfg.Box == nil, "Webhooks": cfg.Webhooks == nil, "Events": cfg.Events == nil,
		"Channels": cfg.Channels == nil, "Automation": cfg.Automation == nil, "LLM": cfg.LLM == nil, "Bots": cfg.Bots == nil} {
		if missing {
			return nil, fmt.Errorf("handlers: Config.%s is required (app.New builds every service of a process)", name)
		}
	}
	spec, err := gen.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	ops, err := indexOperations(spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	s := &Server{
		cfg: cfg, db: db, log: cfg.Logger, ops: ops,
		accounts:         accounts.New(db, 0),
		verifier:         cfg.Verifier,
		limiter:          cfg.Limiter,
		metrics:          newMetrics(db),
		keyPolicy:        ratelimit.Policy{Name: "key", Quota: cfg.KeyRateLimit, Window: time.Minute},
		workspacePolicy:  ratelimit.Policy{Name: "workspace", Quota: cfg.WorkspaceRateLimit, Window: time.Minute},
		addressPolicy:    ratelimit.Policy{Name: "address", Quota: cfg.AddressRateLimit, Window: time.Minute},
		browserKeyPolicy: ratelimit.Policy{Name: "key", Quota: cfg.BrowserKeyRateLimit, Window: time.Minute},
		visitorPolicy:    ratelimit.Policy{Name: "visitor", Quota: cfg.BrowserVisitorRateLimit, Window: time.Minute},
		corsOrigins:      map[string]bool{},
		models:           map[string]gen.Model{},
		events:           cfg.Events,
	}
	s.links, s.webhooks, s.channels, s.automation = cfg.Links, cfg.Webhooks, cfg.Channels, cfg.Automation
	s.txTimeout = cfg.TxTimeout
	if w, ok := telemetry.AccessLogWriter(cfg.Logger); ok {
		s.accessOut = w
	}
	s.policyHeader = []string{fmt.Sprintf(`"key";q=%d;w=60, "workspace";q=%d;w=60`, cfg.KeyRateLimit, cfg.WorkspaceRateLimit)}
	for _, m := range cfg.Models.All() {
		s.models[m.ID] = apiModel(m)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The client address limits sign-ins and is logged: take it from the connection, or from X-Forwarded-For only
	// when the hop that sent it is one of the operator's proxies.
	e.IPExtractor = echo.ExtractIPDirect()
	if len(cfg.TrustedProxies) > 0 {
		var trust []echo.TrustOption
		for _, n := range cfg.TrustedProxies {
			trust = append(trust, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(append(trust, echo.TrustLoopback(false), echo.TrustLinkLocal(false),
			echo.TrustPrivateNet(false))...)
	}
	e.HTTPErrorHandler = s.ErrorHandler
	for _, o := range cfg.CORSOrigins {
		s.corsOrigins[o] = true
	}
	// What Pre(headAsGet, cors) and Use(requestContext, bodyLimit) would do, composed once: Echo composes its
	// middleware anew for every request, a closure per layer (see ServeHTTP).
	s.chain = headAsGet(e)(s.cors(func(c echo.Context) error {
		r := c.Request()
		e.Router().Find(r.Method, echo.GetPath(r), c)
		return s.requestContext(c, c.Handler())
	}))

	routes, err := apiRoutes()
	if err != nil {
		return nil, err
	}
	perOp := map[string][]echo.MiddlewareFunc{}
	s.idempotency = newIdempotency(s)
	for id, route := range routes {
		perOp[id] = []echo.MiddlewareFunc{s.validatorFor(route)}
		if ops.byID[id].Idempotent {
			perOp[id] = append(perOp[id], s.idempotency.middleware)
		}
	}
	gen.RegisterHandlersWithOptions(preapplied{e}, gen.NewStrictHandler(s, nil),
		gen.RegisterHandlersOptions{OperationMiddlewares: perOp})
	if err := s.registerPublicRoutes(e); err != nil {
		return nil, err
	}
	s.registerIngest(e)
	s.registerChannelHooks(e)
	if err := s.registerRedirects(e); err != nil {
		return nil, err
	}
	s.echo = e
	s.reserveRoutes()
	return s, nil
}

// preapplied registers routes with their route middleware (validation, idempotency) applied once, at
// registration: Echo applies a route's middleware on every request, a closure per layer each time.
type preapplied struct{ *echo.Echo }

func applied(h echo.HandlerFunc, m []echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(m) - 1; i >= 0; i-- { // as Echo applies them: the first is the outermost
		h = m[i](h)
	}
	return h
}

func (p preapplied) CONNECT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodConnect, path, h, m)
}
func (p preapplied) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodDelete, path, h, m)
}
func (p preapplied) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodGet, path, h, m)
}
func (p preapplied) HEAD(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodHead, path, h, m)
}
func (p preapplied) OPTIONS(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodOptions, path, h, m)
}
func (p preapplied) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodPatch, path, h, m)
}
func (p preapplied) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodPost, path, h, m)
}
func (p preapplied) PUT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodPut, path, h, m)
}
func (p preapplied) TRACE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return p.add(http.MethodTrace, path, h, m)
}

func (p preapplied) add(method, path string, h echo.HandlerFunc, m []echo.MiddlewareFunc) *echo.Route {
	return p.Echo.Add(method, path, applied(h, m))
}

// Mount lets another part of the product (the console) add its routes; they get the same request ids, logs,
// metrics, body limit and error handler as the API.
func (s *Server) Mount(register func(*echo.Echo)) {
	register(s.echo)
	s.reserveRoutes()
}

// reserveRoutes hands the paths of every route to the links service, so that no link can shadow a page of the
// product (or a page added later under a new top-level path).
func (s *Server) reserveRoutes() {
	var paths []string
	for _, rt := range s.echo.Routes() {
		paths = append(paths, rt.Path)
	}
	s.links.ReserveRoutes(paths)
}

// ServeHTTP makes the server an http.Handler. It is Echo's ServeHTTP with the server's middleware composed once
// (s.chain) rather than on every request: routes still take Echo's context, router and error handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := s.echo.AcquireContext()
	c.Reset(r, w)
	if err := s.chain(c); err != nil {
		s.echo.HTTPErrorHandler(err, c)
	}
	s.echo.ReleaseContext(c)
}

// PruneIdempotencyKeys is the job that deletes expired Idempotency-Key records while the server runs (run it with
// the process's other background work): a bounded batch every so many claims of this server, one delete at a time,
// so that no request waits for it. It returns once ctx ends and a delete in progress has finished.
func (s *Server) PruneIdempotencyKeys(ctx context.Context) error {
	return s.idempotency.svc.RunPruning(ctx)
}

var nosniff = []string{"nosniff"}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// headAsGet answers HEAD wherever GET is answered (health checks, the reference, every API GET): the request is
// routed, validated and handled as the GET it mirrors (Echo routes the request as Pre middleware leaves it, so the
// method changes in place, as Echo's method override does), with the same headers and no body. Short links keep
// their own HEAD route (a HEAD is no visit).
func headAsGet(e *echo.Echo) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method != http.MethodHead {
				return next(c)
			}
			probe := e.NewContext(r, nil)
			e.Router().Find(http.MethodGet, echo.GetPath(r), probe)
			if path := probe.Path(); path == "" || path == redirectRoute {
				return next(c)
			}
			r.Method = http.MethodGet
			w := &bodiless{ResponseWriter: c.Response().Writer, status: http.StatusOK}
			c.Response().Writer = w
			err := next(c)
			// The answer goes out as the HEAD it is, with the length the GET's body would have had.
			r.Method = http.MethodHead
			if w.ResponseWriter.Header().Get(echo.HeaderContentLength) == "" {
				w.ResponseWriter.Header().Set(echo.HeaderContentLength, strconv.Itoa(w.n))
			}
			w.ResponseWriter.WriteHeader(w.status)
			return err
		}
	}
}

// bodiless is the response writer of a HEAD answered as a GET: it keeps the status and counts the body, which
// headAsGet then answers without.
type bodiless struct {
	http.ResponseWriter
	status, n int
}

func (w *bodiless) WriteHeader(status int)      { w.status = status }
func (w *bodiless) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *bodiless) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestContext runs around every request: request ID (taken from X-Request-Id when well-formed), a logger that
// carries it, the bound of its transactions (Config.TxTimeout), deprecation headers, panic recovery, metrics by
// operationId and one access log line.
func (s *Server) requestContext(c echo.Context, next echo.HandlerFunc) error {
	start := time.Now()
	req := c.Request()
	id := req.Header.Get(echo.HeaderXRequestID)
	if id == "" || !requestIDPattern.MatchString(id) {
		id = newRequestID()
	}
	st := &requestState{ID: id, Path: publicPath(req.URL.EscapedPath()), header: c.Response().Header(), echo: c,
		txTimeout: s.txTimeout}
	st.idHeader[0] = id
	c.Response().Header()[echo.HeaderXRequestID] = st.idHeader[:]
	// No answer of this server is to be sniffed into another type (an excerpt of a receiver's body, an upload).
	c.Response().Header()[echo.HeaderXContentTypeOptions] = nosniff
	// The state carries the bound of the request's transactions itself (store.WithTxTimeout's answer).
	c.SetRequest(req.WithContext(withRequestState(req.Context(), st)))

	op := s.ops.byEchoRoute(req.Method, c.Path())
	spanName := c.Path()
	if op != nil {
		spanName = op.ID
	}
	traced, span := telemetry.Server(c.Request(), spanName, c.Path())
	c.SetRequest(traced)
	if op != nil && op.Deprecation != "" {
		c.Response().Header().Set("Deprecation", op.Deprecation)
		c.Response().Header().Set("Sunset", op.Sunset)
	}
	if err := s.recovered(next, c); err != nil {
		c.Error(err)
	}

	status := c.Response().Status
	if st.spent != nil && (status < 200 || status > 299 || c.Response().Header().Get(replayedHeader) == "true") {
		s.limiter.Refund(st.spent.Key, st.spent.Policy)
	}
	telemetry.EndServer(span, status, id)
	elapsed := time.Since(start)
	label := "unmatched"
	switch {
	case op != nil:
		label = op.ID
	case c.Path() != "" && c.Path() != "/*" && status != http.StatusNotFound:
		label = c.Path()
	}
	s.metrics.observe(label, req.Method, status, elapsed)
	if c.Path() == redirectRoute && status < http.StatusInternalServerError {
		return nil // a redirect is recorded as a click; a log line each would cost more than the redirect
	}
	line := accessLine{requestID: id, method: req.Method, path: st.Path, status: status, elapsed: elapsed,
		operation: label}
	if st.key != nil {
		line.keyID, line.workspaceID = st.key.ID, st.key.WorkspaceID
	}
	s.logAccess(req.Context(), line)
	return nil
}

// newRequestID returns "req_" and a ULID: sortable by time, unique enough to find a log line. It needs no
// cryptographic randomness, so it skips crypto/rand on the hot path.
func newRequestID() string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Now())
	binary.BigEndian.PutUint64(id[6:14], rand.Uint64())
	binary.BigEndian.PutUint16(id[14:], uint16(rand.Uint32()))
	var b [len("req_") + ulid.EncodedSize]byte
	copy(b[:], "req_")
	_ = id.MarshalTextTo(b[len("req_"):])
	return string(b[:]) // one allocation, where "req_" + id.String() takes two
}

// recovered runs next within the body limit (bodyLimit) and turns a panic into an internal error.
func (s *Server) recovered(next echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return s.bodyLimit(c, next)
}

// mediaUploadPath takes files, so its bodies have a limit of their own.
const mediaUploadPath = "/api/v1/media"

// fileRoutes are the console's forms that upload a picture: like mediaUploadPath, they take the media limit, so
// that a picture over the API's body limit reaches the form and is refused there with the network's reason.
var fileRoutes = map[string]bool{"/user/channels/:id/profile": true, "/user/channels/:id/groups/:group/picture": true}

// bodyLimit refuses bodies over the limit: at once when Content-Length says so, else when reading passes it. A
// source's ingest URL applies the limit itself (it reads no more than it), so that the refusal is in the source's
// request log like every other.
func (s *Server) bodyLimit(c echo.Context, next echo.HandlerFunc) error {
	req := c.Request()
	if req.Method == http.MethodPost && c.Path() == ingestRoute {
		return next(c)
	}
	limit := s.cfg.BodyLimit
	if req.Method == http.MethodPost && (req.URL.Path == mediaUploadPath || fileRoutes[c.Path()]) {
		limit = s.cfg.MediaBodyLimit
	}
	if req.ContentLength > limit {
		return bodyTooLarge(req.ContentLength, limit)
	}
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
	}
	return next(c)
}
