package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Sealer encrypts secrets at rest with the server key (a sealbox.Box): an instance's secret config and
// its session credentials. The associated data binds a sealed value to its instance.
type Sealer interface {
	Seal(plaintext, associatedData []byte) string
	Open(sealed string, associatedData []byte) ([]byte, error)
}

// Config configures the messaging capability.
type Config struct {
	// Providers are the networks instances can connect to.
	Providers []Provider
	// Sealer seals secrets at rest (required).
	Sealer Sealer
	// LookupTTL is how long a contacts lookup's answer is trusted (default DefaultLookupTTL).
	LookupTTL time.Duration
	// Media stores the bytes of media (default: the database's media_content table).
	Media MediaStore
	// Guard fetches media by URL and judges instances' proxies (default: public https targets only).
	Guard *egress.Guard
	// MaxMedia is the largest file uploaded or fetched, in bytes (default DefaultMaxMedia).
	MaxMedia int64
	// Logger receives what reaches no client (default slog.Default()).
	Logger *slog.Logger
	// BaseURL is the server's public URL, under which instances of providers that take pushes have their hook URL.
	BaseURL string
}

// Recorder is the messaging capability's records: the providers, the database, and every change of instances,
// messages, chats, contacts and groups with its events. It is built first, over the providers; the runtime records
// through it (it is the runtime's Ledger and, through SinkFor, every session's Sink), and the Service is built over
// it and the runtime. So construction runs one way: providers, Recorder, runtime, Service.
type Recorder struct {
	db        *store.DB
	events    *events.Outbox
	sealer    Sealer
	log       *slog.Logger
	providers map[string]Provider
	names     []string
	lookupTTL time.Duration
	media     MediaStore
	fetch     *http.Client
	guard     *egress.Guard
	vias      sync.Map // instances' proxies (see proxyOf)
	maxMedia  int64
	baseURL   string

	early earlyReceipts
	// routeWake tells the route worker that a route is due now.
	routeWake chan struct{}
	// commits writes the accepted sends and the sessions' runs of reports: concurrent ones share a transaction
	// (each in its own savepoint), their instances locked first, in ID order, as inTxFor locks them.
	commits *store.GroupCommit
}

// NewRecorder returns the records of the messaging capability over an open, migrated database, with its providers.
func NewRecorder(db *store.DB, outbox *events.Outbox, cfg Config) (*Recorder, error) {
	if cfg.Sealer == nil {
		return nil, errors.New("channels: the service needs a Sealer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LookupTTL <= 0 {
		cfg.LookupTTL = DefaultLookupTTL
	}
	if cfg.Media == nil {
		cfg.Media = DatabaseMedia{DB: db}
	}
	if cfg.Guard == nil {
		cfg.Guard = egress.NewGuard(egress.Policy{})
	}
	if cfg.MaxMedia <= 0 {
		cfg.MaxMedia = DefaultMaxMedia
	}
	s := &Recorder{db: db, events: outbox, sealer: cfg.Sealer, log: cfg.Logger, providers: map[string]Provider{},
		lookupTTL: cfg.LookupTTL, media: cfg.Media, baseURL: strings.TrimRight(cfg.BaseURL, "/"),
		fetch: cfg.Guard.Client(mediaFetchTimeout), guard: cfg.Guard, maxMedia: cfg.MaxMedia, routeWake: make(chan struct{}, 1)}
	s.commits = store.NewLockingGroupCommit(db, 0, func(ctx context.Context, tx store.Tx, ids []string) error {
		return db.Instances.LockAll(ctx, tx, ids)
	}).WithHooks(store.GroupHooks{
		// The events of every call are numbered and written once, at the end (see journaled).
		Begin: func(ctx context.Context) context.Context { ctx, _ = withJournal(ctx); return ctx },
		End:   func(ctx context.Context, tx store.Tx) error { return journalOf(ctx).flush(ctx, tx, s) },
	})
	for _, p := range cfg.Providers {
		name := p.Info().Name
		if _, dup := s.providers[name]; dup {
			return nil, fmt.Errorf("channels: provider %q registered twice", name)
		}
		s.providers[name] = p
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	return s, nil
}

// Runtime is what the service asks of the channel runtime: the sessions it holds and the send queue it drains.
// hub.Hub is the runtime; NoRuntime stands for none.
type Runtime interface {
	Sessions
	SendQueue
}

// Service is the messaging capability: instances and their state, messages, chats, contacts and groups. Handlers
// and the console call it; its failures a client can be told about are *problem.Error values. It records through
// its Recorder and reaches sessions and the send queue through the runtime it is built with.
type Service struct {
	*Recorder
	sessions Sessions
	queue    SendQueue
}

// New returns the messaging service over its records and the runtime built over them (NoRuntime in a process that
// holds no sessions).
func New(rec *Recorder, rt Runtime) (*Service, error) {
	if rec == nil || rt == nil {
		return nil, errors.New("channels: the service needs its Recorder and a Runtime")
	}
	return &Service{Recorder: rec, sessions: rt, queue: rt}, nil
}

func (s *Recorder) provider(name string) (Provider, bool) {
	p, ok := s.providers[name]
	return p, ok
}

// Providers returns every provider's Info, by name.
func (s *Recorder) Providers() []Info {
	out := make([]Info, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.providers[n].Info())
	}
	return out
}

// Provider returns a provider's Info. Returns a NotFound problem if there is no such provider.
func (s *Recorder) Provider(name string) (Info, error) {
	p, ok := s.provider(name)
	if !ok {
		return Info{}, problem.Errorf(problem.NotFound, "There is no provider %q; GET /api/v1/providers lists them.", name)
	}
	return p.Info(), nil
}

// providerNames lists the registered providers for messages.
func (s *Recorder) providerNames() string { return strings.Join(s.names, ", ") }

// inTx runs fn in a write transaction.
func (s *Recorder) inTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.db.RunInTx(ctx, fn)
}

// inTxFor runs fn in a write transaction that first locks the instances it changes. Every change of an instance's
// messages, chats, contacts or groups counts the instance's event sequence, which locks the instance's row; taking
// that lock first, in ID order, keeps transactions that also lock other rows (a chat, a message) from deadlocking
// on PostgreSQL. (SQLite's single writer needs no locks.)
func (s *Recorder) inTxFor(ctx context.Context, instanceIDs []string, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := s.db.Instances.LockAll(ctx, tx, instanceIDs); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

// sharedTxFor is inTxFor in a transaction shared with the concurrent calls of other requests and sessions (see
// store.GroupCommit): fn runs in a savepoint of its own, after the instances of every call are locked. For the
// small, frequent writes of one instance each (an accepted send, a run of reports), where the commit is the cost.
// The events fn emits are numbered and written with those of the other calls at the end of the shared transaction
// (see journaled): fn must not read them back.
func (s *Recorder) sharedTxFor(ctx context.Context, instanceIDs []string, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.commits.DoFor(ctx, instanceIDs, func(ctx context.Context, tx store.Tx) error {
		return journaled(ctx, tx, fn)
	})
}

// notFound is the problem of an object of a kind the workspace does not have.
func notFound(kind, id string) *problem.Error {
	return problem.Errorf(problem.NotFound, "There is no %s %s in this workspace.", kind, id)
}

// InstanceNotFound is the problem of an instance the workspace does not have (or a key limited to other instances
// does not reach: the answer is the same).
func InstanceNotFound(id string) *problem.Error { return notFound("instance", id) }

// notSupported is the problem of a call the instance's provider cannot make.
func notSupported(provider string, c Capability) *problem.Error {
	return problem.Errorf(problem.CapabilityNotSupported,
		"The %s provider cannot do this (it lacks the capability %s); GET /api/v1/providers/%s lists what it can do.",
		provider, c, provider)
}

// storeError maps the store's sentinel errors about an object to problems; other errors are internal.
func storeError(err error, kind, id string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(kind, id)
	case errors.Is(err, store.ErrConflict):
		return problem.New(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}

// capabilities is what an instance of a provider can do.
func capabilities(info Info) []Capability { return slices.Clone(info.Capabilities) }
