package webhook

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/egress"
	"github.com/switchboard/switchboard/store"
)

// Config tunes the Dispatcher; zero values take the defaults.
type Config struct {
	// Schedule is the retry schedule (default DefaultSchedule; SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE).
	Schedule []time.Duration
	// Timeout bounds one attempt (default 15 s); Lease, how long a claimed delivery is held, must exceed it
	// (default Timeout + 1 min): a dispatcher that dies mid-attempt releases its deliveries when the lease runs out.
	Timeout time.Duration
	Lease   time.Duration
	// Workers is how many attempts run at once (default 32); PerEndpoint caps those of one endpoint (default 4), so a
	// slow receiver holds at most that many workers and never delays the others.
	Workers     int
	PerEndpoint int
	// Poll is how often an idle dispatcher looks for due deliveries (default 250 ms; PostgreSQL also wakes it
	// through LISTEN/NOTIFY as soon as deliveries are queued).
	Poll time.Duration
	// DisableAfter disables an endpoint that has failed without a success for this long (default 5 days).
	DisableAfter time.Duration
	// PostgresURL, when set, makes the dispatcher LISTEN for queued deliveries.
	PostgresURL string
	Logger      *slog.Logger
}

// Dispatcher delivers queued webhooks: it claims due deliveries with a lease, signs and sends them through the
// SSRF-guarded client, and records every attempt with its consequences. Any number of dispatchers may run against
// one PostgreSQL database; on SQLite run one per database.
type Dispatcher struct {
	db     *store.DB
	sender *Sender
	cfg    Config
	log    *slog.Logger
	wake   chan struct{}

	mu       sync.Mutex
	inFlight map[string]int // attempts running per endpoint
	running  int
	idle     *sync.Cond
}

// NewDispatcher returns a dispatcher; Run starts it.
func NewDispatcher(db *store.DB, box *Box, guard *egress.Guard, cfg Config) *Dispatcher {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.Lease <= cfg.Timeout {
		cfg.Lease = cfg.Timeout + time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 4
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.DisableAfter <= 0 {
		cfg.DisableAfter = 5 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dispatcher{db: db, sender: NewSender(box, guard, cfg.Timeout), cfg: cfg, log: cfg.Logger,
		wake: make(chan struct{}, 1), inFlight: map[string]int{}}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// Wake makes an idle dispatcher look for due deliveries now (after this process queued some).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight to be recorded (they finish or time out),
// so that a graceful shutdown loses nothing and leaves no delivery leased.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.cfg.PostgresURL != "" {
		go d.listen(ctx)
	}
	defer d.drain()
	for ctx.Err() == nil {
		n, err := d.claimAndStart(ctx)
		if err != nil {
			d.log.Warn("webhook dispatcher could not claim deliveries", "error", err)
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-time.After(d.cfg.Poll):
		}
	}
	return nil
}

func (d *Dispatcher) drain() {
	d.mu.Lock()
	for d.running > 0 {
		d.idle.Wait()
	}
	d.mu.Unlock()
}

// claimAndStart claims as many due deliveries as there are free workers and starts an attempt for each.
func (d *Dispatcher) claimAndStart(ctx context.Context) (int, error) {
	d.mu.Lock()
	free := d.cfg.Workers - d.running
	var full []string
	for id, n := range d.inFlight {
		if n >= d.cfg.PerEndpoint {
			full = append(full, id)
		}
	}
	d.mu.Unlock()
	if free <= 0 {
		return 0, nil
	}
	ds, err := d.db.Deliveries.Claim(ctx, time.Now(), d.cfg.Lease, free, full)
	if err != nil {
		return 0, err
	}
	started := 0
	var over []string
	for _, dl := range ds {
		d.mu.Lock()
		if d.inFlight[dl.EndpointID] >= d.cfg.PerEndpoint {
			// More of one endpoint in this batch than its cap allows: give them back for the next round.
			d.mu.Unlock()
			over = append(over, dl.ID)
			continue
		}
		d.inFlight[dl.EndpointID]++
		d.running++
		d.mu.Unlock()
		started++
		go d.attempt(dl)
	}
	return started, d.db.Deliveries.Release(ctx, over)
}

func (d *Dispatcher) done(endpointID string) {
	d.mu.Lock()
	if d.inFlight[endpointID]--; d.inFlight[endpointID] <= 0 {
		delete(d.inFlight, endpointID)
	}
	d.running--
	d.idle.Broadcast()
	d.mu.Unlock()
	d.Wake()
}

// attempt makes one attempt of a claimed delivery and records it. It runs detached from Run's context: an attempt
// that started is finished and recorded even during shutdown.
func (d *Dispatcher) attempt(dl store.Delivery) {
	defer d.done(dl.EndpointID)
	ctx := context.Background()
	sent, err := d.send(ctx, dl)
	if err != nil {
		d.log.Error("webhook attempt could not be prepared; the lease will expire and it is retried", "delivery_id", dl.ID, "error", err)
		return
	}
	res := store.AttemptResult{DeliveryID: dl.ID, StartedAt: sent.StartedAt, Duration: sent.Duration,
		StatusCode: sent.StatusCode, Excerpt: sent.Excerpt, DisableAfter: d.cfg.DisableAfter,
		Succeeded: sent.Outcome.Result == Delivered, Gone: sent.Outcome.Result == Gone}
	if sent.Outcome.Class != "" {
		class := sent.Outcome.Class
		res.ErrorClass = &class
	}
	if next, ok := NextAttempt(d.cfg.Schedule, dl.Attempts-dl.ScheduleStart+1, time.Now(), sent.Outcome, sent.RetryAfter, rand.Float64); ok {
		res.NextAttemptAt = &next
	}
	_, err = d.db.Deliveries.RecordAttempt(ctx, res, func(ctx context.Context, tx bun.Tx, fx store.AttemptEffects) error {
		return d.emitOperational(ctx, tx, dl, fx)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.log.Error("webhook attempt could not be recorded; the lease will expire and it is retried", "delivery_id", dl.ID, "error", err)
	}
}

// send loads the delivery's endpoint and event and posts it. An error means nothing was sent.
func (d *Dispatcher) send(ctx context.Context, dl store.Delivery) (Sent, error) {
	e, err := d.db.Webhooks.ByID(ctx, dl.EndpointID)
	if err != nil {
		return Sent{}, err
	}
	ev, err := d.db.Events.Get(ctx, dl.WorkspaceID, dl.EventID)
	if err != nil {
		return Sent{}, err
	}
	return d.sender.Send(ctx, e, ev)
}

// emitOperational tells the workspace, in the attempt's transaction, that an endpoint was disabled or a delivery
// exhausted its retries.
func (d *Dispatcher) emitOperational(ctx context.Context, tx bun.Tx, dl store.Delivery, fx store.AttemptEffects) error {
	if fx.EndpointDisabled != "" {
		if _, err := d.db.Events.Emit(ctx, tx, store.NewEvent{WorkspaceID: dl.WorkspaceID, Type: "webhook.endpoint.disabled",
			Data: map[string]any{"endpoint_id": dl.EndpointID, "reason": fx.EndpointDisabled}}); err != nil {
			return err
		}
	}
	if fx.Exhausted && dl.EventType != "webhook.delivery.exhausted" {
		if _, err := d.db.Events.Emit(ctx, tx, store.NewEvent{WorkspaceID: dl.WorkspaceID, Type: "webhook.delivery.exhausted",
			Data: map[string]any{"delivery_id": dl.ID, "endpoint_id": dl.EndpointID, "event_id": dl.EventID,
				"event_type": dl.EventType, "attempts": fx.Delivery.Attempts}}); err != nil {
			return err
		}
	}
	return nil
}

// listen wakes the dispatcher whenever a PostgreSQL transaction queued deliveries, reconnecting with backoff.
func (d *Dispatcher) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, d.cfg.PostgresURL)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+store.DeliveriesChannel); err == nil {
				backoff = 100 * time.Millisecond
				for err == nil {
					_, err = conn.WaitForNotification(ctx)
					d.Wake()
				}
			}
			_ = conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
