package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/queue"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

// Config tunes the Dispatcher; zero values take the defaults.
type Config struct {
	// Schedule is the retry schedule (default DefaultSchedule; SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE).
	Schedule []time.Duration
	// ThrottledWait is the least wait after a timeout or a 429 (default DefaultThrottledWait, 60 s).
	ThrottledWait time.Duration
	// Timeout bounds one attempt (default 15 s); Lease, how long a claimed delivery is held, must exceed it
	// (default Timeout + 1 min): a dispatcher that dies mid-attempt releases its deliveries when the lease runs out.
	Timeout time.Duration
	Lease   time.Duration
	// Workers is how many attempts run at once (default 32); PerEndpoint caps those of one endpoint (default 4), so a
	// slow receiver holds at most that many workers and never delays the others.
	Workers     int
	PerEndpoint int
	// Poll is how often an idle dispatcher looks for due deliveries (default 250 ms). It is woken sooner when
	// deliveries are queued: by Wake in this process, by LISTEN/NOTIFY on PostgreSQL, and on SQLite by any commit
	// (seen in the WAL index within 10 ms).
	Poll time.Duration
	// DisableAfter disables an endpoint that has failed without a success for this long (default 5 days).
	DisableAfter time.Duration
	// Retention is how long events, their deliveries and attempts are kept (default 30 days); PruneEvery is how
	// often they are pruned (default hourly, and once at start). Events with a pending delivery are always kept.
	Retention  time.Duration
	PruneEvery time.Duration
	// Events records the operational events (an endpoint disabled, a delivery exhausted) in the transaction of the
	// attempt that caused them (default: an outbox of the built-in types).
	Events *events.Outbox
	// Limiter enforces the endpoints' rate limits (default: in this process only; a shared one, such as
	// redislimit's, makes an endpoint's rate hold across every dispatcher of the database).
	Limiter ratelimit.Limiter
	Logger  *slog.Logger
}

// Defaults of Config.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultWorkers      = 32
	DefaultPerEndpoint  = 4
	DefaultDisableAfter = 5 * 24 * time.Hour
	DefaultRetention    = 30 * 24 * time.Hour
)

// maxRecordBatch bounds how many attempts one transaction records.
const maxRecordBatch = 128

// Dispatcher delivers queued webhooks: the queue engine claims due deliveries with a lease and runs their attempts;
// the dispatcher signs and sends each through the SSRF-guarded client and records every attempt with its
// consequences. Any number of dispatchers may run against one PostgreSQL database; on SQLite run one per database.
//
// An endpoint's rate limit is enforced by Config.Limiter: per process by default, in which case with several
// processes on one database a receiver may get up to that many times its rate.
type Dispatcher struct {
	db       *store.DB
	recorder *Recorder
	sender   *Sender
	cfg      Config
	retry    RetryPolicy
	log      *slog.Logger
	limiter  ratelimit.Limiter
	metrics  *metrics
	engine   *queue.Engine[claimed, AttemptResult]
	// endpoints are the copies of endpoints that claims find current.
	endpoints endpointCopies
}

// NewDispatcher returns a dispatcher; Run starts it.
func NewDispatcher(db *store.DB, box *sealbox.Box, guard *egress.Guard, cfg Config) *Dispatcher {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.ThrottledWait <= 0 {
		cfg.ThrottledWait = DefaultThrottledWait
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Lease <= cfg.Timeout {
		cfg.Lease = cfg.Timeout + time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = DefaultPerEndpoint
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.DisableAfter <= 0 {
		cfg.DisableAfter = DefaultDisableAfter
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New()
	}
	d := &Dispatcher{db: db, recorder: NewRecorder(db, cfg.Events, cfg.DisableAfter), sender: NewSender(box, guard, cfg.Timeout),
		cfg: cfg, retry: RetryPolicy{Schedule: cfg.Schedule, ThrottledWait: cfg.ThrottledWait}, log: cfg.Logger,
		limiter: cfg.Limiter}
	// PostgreSQL runs two recording transactions side by side (endpoints split between them); SQLite's one writer
	// would only queue the second.
	lanes := 1
	if db.Dialect() == store.Postgres {
		lanes = 2
	}
	d.engine = queue.New(db, queue.Client[claimed, AttemptResult](deliveryQueue{d}), queue.Config{
		Name: "webhook", Workers: cfg.Workers, PerTarget: cfg.PerEndpoint, Lease: cfg.Lease, Poll: cfg.Poll,
		Channel: store.DeliveriesChannel, MaxBatch: maxRecordBatch, RecordLanes: lanes,
		InFlightMetric: "switchboard_webhook_attempts_in_flight", Logger: cfg.Logger})
	d.metrics = newMetrics(d)
	return d
}

// Sender is the dispatcher's sender, for the API's test pings: the same server key, guard and timeout.
func (d *Dispatcher) Sender() *Sender { return d.sender }

// Collectors are the dispatcher's Prometheus metrics; register them on the server's registry.
func (d *Dispatcher) Collectors() []prometheus.Collector { return d.metrics.collectors() }

// Wake makes an idle dispatcher look for due deliveries now (after this process queued some).
func (d *Dispatcher) Wake() { d.engine.Wake() }

// Run delivers (and prunes old events) until ctx ends, then waits for the attempts in flight to be recorded (they
// finish or time out), so that a graceful shutdown loses nothing and leaves no delivery leased.
func (d *Dispatcher) Run(ctx context.Context) error {
	var pruning sync.WaitGroup
	pruning.Go(func() { d.prune(ctx) })
	err := d.engine.Run(ctx)
	pruning.Wait()
	d.sender.Close()
	return err
}

// claimed is a leased delivery with what sending it needs: its event comes with the claim, its endpoint from
// Prepare.
type claimed struct {
	delivery        store.Delivery
	endpoint        store.WebhookEndpoint
	event           store.Event
	endpointVersion string
}

// deliveryQueue is the webhook deliveries as a client of the queue engine: an endpoint is a target.
type deliveryQueue struct{ d *Dispatcher }

func (q deliveryQueue) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]claimed, error) {
	ds, err := q.d.db.Deliveries.Claim(ctx, now, lease, limit, exclude)
	out := make([]claimed, len(ds))
	for i, dl := range ds {
		out[i] = claimed{delivery: dl.Delivery, event: dl.Event, endpointVersion: dl.EndpointVersion}
	}
	return out, err
}

// Prepare gives each claimed delivery its endpoint: from the dispatcher's copies when the claim saw the version
// of the endpoint's row the copy was read at, otherwise read (in one query for the claim).
func (q deliveryQueue) Prepare(ctx context.Context, cs []claimed) ([]claimed, error) {
	endpoints, err := q.d.endpoints.get(ctx, q.d.db, cs)
	if err != nil {
		return nil, err
	}
	out := cs[:0:0]
	for _, c := range cs {
		e, ok := endpoints[c.delivery.EndpointID]
		if !ok {
			continue // deleted since the claim, and the delivery with it
		}
		c.endpoint = e
		out = append(out, c)
	}
	return out, nil
}

// endpointCopies are the endpoints a dispatcher read, each at the version of its row it read; a claim tells which
// are still current. Without versions (SQLite) every claim reads its endpoints.
type endpointCopies struct {
	mu sync.Mutex
	m  map[string]store.VersionedEndpoint
}

// maxEndpointCopies bounds the copies: past it they are dropped and read again as claims need them (the copies of
// deleted endpoints go that way).
const maxEndpointCopies = 4096

// get returns the endpoints of claimed deliveries, reading those it has no current copy of.
func (ec *endpointCopies) get(ctx context.Context, db *store.DB, cs []claimed) (map[string]store.WebhookEndpoint, error) {
	out := make(map[string]store.WebhookEndpoint, len(cs))
	var read []string
	ec.mu.Lock()
	for _, c := range cs {
		id := c.delivery.EndpointID
		if _, ok := out[id]; ok || slices.Contains(read, id) {
			continue
		}
		if e, ok := ec.m[id]; ok && c.endpointVersion != "" && e.Version == c.endpointVersion {
			out[id] = e.WebhookEndpoint
			continue
		}
		read = append(read, id)
	}
	ec.mu.Unlock()
	if len(read) == 0 {
		return out, nil
	}
	fresh, err := db.Deliveries.ForSending(ctx, read)
	if err != nil {
		return nil, err
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.m == nil || len(ec.m)+len(fresh) > maxEndpointCopies {
		ec.m = make(map[string]store.VersionedEndpoint, len(fresh))
	}
	for id, e := range fresh {
		out[id] = e.WebhookEndpoint
		if e.Version != "" {
			ec.m[id] = e
		}
	}
	return out, nil
}

func (q deliveryQueue) Release(ctx context.Context, cs []claimed, notBefore time.Time) error {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.delivery.ID
	}
	return q.d.db.Deliveries.Release(ctx, ids, notBefore)
}

func (q deliveryQueue) Target(c claimed) string { return c.delivery.EndpointID }

// Admit applies the endpoint's rate limit (deliveries per second; bursts up to the rate, then evenly spaced).
func (q deliveryQueue) Admit(c claimed, now time.Time) (time.Time, bool) {
	if c.endpoint.RateLimit == nil {
		return time.Time{}, true
	}
	dec := q.d.limiter.Take("webhook:"+c.endpoint.ID, ratelimit.Policy{Name: "webhook", Quota: *c.endpoint.RateLimit, Window: time.Second}, now)
	if dec.Allowed {
		return time.Time{}, true
	}
	return now.Add(dec.RetryAfter), false
}

// Attempt makes one attempt of a claimed delivery.
func (q deliveryQueue) Attempt(ctx context.Context, c claimed) (AttemptResult, bool) {
	d, dl := q.d, c.delivery
	sent, err := d.sender.Send(ctx, c.endpoint, c.event)
	if err != nil {
		d.log.Error("webhook attempt could not be prepared; the lease will expire and it is retried", "delivery_id", dl.ID, "error", err)
		return AttemptResult{}, false
	}
	d.metrics.observeAttempt(sent)
	res := AttemptResult{DeliveryID: dl.ID, LeaseUntil: dl.LeaseUntil, StartedAt: sent.StartedAt,
		Duration: sent.Duration, StatusCode: sent.StatusCode, Excerpt: sent.Excerpt,
		ResponseHeaders: sent.ResponseHeaders, Signature: sent.Signature,
		Succeeded: sent.Outcome.Result == Delivered, Gone: sent.Outcome.Result == Gone, Claimed: &dl}
	if sent.Outcome.Class != "" {
		class := sent.Outcome.Class
		res.ErrorClass = &class
	}
	if next, ok := d.retry.NextAttempt(dl.Attempts-dl.ScheduleStart+1, time.Now(), sent.Outcome, sent.RetryAfter, rand.Float64); ok {
		res.NextAttemptAt = &next
	}
	return res, true
}

// Record records attempts in one transaction. An attempt that is not recorded keeps its lease: when it runs out the
// delivery is attempted again.
func (q deliveryQueue) Record(ctx context.Context, batch []AttemptResult) error {
	d := q.d
	fxs, err := d.recorder.Record(ctx, batch)
	if err != nil {
		if len(batch) == 1 {
			return fmt.Errorf("delivery %s: %w", batch[0].DeliveryID, err)
		}
		return err
	}
	for _, fx := range fxs {
		if fx.Missing || fx.Superseded {
			continue
		}
		d.metrics.observeDelivery(fx.Delivery.Status)
		if fx.EndpointDisabled != "" {
			d.log.Info("webhook endpoint disabled", "webhook_id", fx.Delivery.EndpointID, "workspace_id", fx.Delivery.WorkspaceID, "reason", fx.EndpointDisabled)
		}
	}
	return nil
}

// prune deletes events older than the retention period, and expired subscriptions, at start and then every
// PruneEvery, until ctx ends.
func (d *Dispatcher) prune(ctx context.Context) {
	for {
		cutoff := time.Now().Add(-d.cfg.Retention)
		n, err := d.db.Events.Prune(ctx, cutoff, store.PruneBatch)
		if n > 0 {
			d.metrics.pruned.Add(float64(n))
			d.log.Info("pruned webhook events past retention", "events", n, "created_before", cutoff.UTC().Format(time.RFC3339))
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("could not prune webhook events", "error", err)
		}
		// Expired subscriptions already receive nothing (routing leaves them out); here they go for good.
		expired, err := d.db.Webhooks.DeleteExpired(ctx, store.PruneBatch)
		if expired > 0 {
			d.log.Info("deleted expired webhook subscriptions", "webhooks", expired)
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("could not delete expired webhook subscriptions", "error", err)
		}
		timer := time.NewTimer(d.cfg.PruneEvery)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
