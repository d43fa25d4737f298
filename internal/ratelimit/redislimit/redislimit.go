// Package redislimit keeps Switchboard's limits in Redis, so that every replica of a deployment spends from the same
// quotas: the API's per-key and per-workspace limits, the webhook endpoints' rates, the console's sign-in and
// sign-up limits and its single-use form nonces. Each decision is one round trip (a Lua script that runs GCRA on
// every quota of the request at once, on Redis's clock, so the replicas' clocks do not matter).
//
// While Redis does not answer, every process decides with its own in-process state: nothing is refused because
// Redis is down. A metric and a log line say so, and Redis is tried again after a second.
package redislimit

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchboard/switchboard/internal/ratelimit"
)

// Defaults of Config.
const (
	DefaultPrefix     = "switchboard:"
	DefaultTimeout    = 100 * time.Millisecond
	DefaultRetryAfter = time.Second
)

// Config configures the connection.
type Config struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// for TLS.
	URL string
	// Prefix starts every key Switchboard writes (default DefaultPrefix), so a Redis can be shared.
	Prefix string
	// Timeout bounds each round trip, connecting included (default DefaultTimeout): a request waits at most this
	// long for Redis before it is decided in process.
	Timeout time.Duration
	// RetryAfter is how long after a failure decisions stay in process before Redis is tried again (default
	// DefaultRetryAfter), so an outage does not cost every request a timeout.
	RetryAfter time.Duration
	Logger     *slog.Logger
}

// Redis is the shared state of the replicas. It is safe for concurrent use.
type Redis struct {
	client     *redis.Client
	prefix     string
	timeout    time.Duration
	retryAfter time.Duration
	log        *slog.Logger

	// downUntil is when Redis is tried again after a failure (Unix nanoseconds; 0 while it answers).
	downUntil atomic.Int64
	down      atomic.Bool

	fallbacks prometheus.Counter
	up        prometheus.GaugeFunc
}

// Open parses the configuration. It does not connect: a Redis that is down at start is an outage like any other,
// during which the process decides alone. Returns an error when the URL is malformed.
func Open(cfg Config) (*Redis, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// go-redis writes its own plain-text lines to stderr otherwise; the process's log is JSON, and an outage is
	// already told by one line of ours.
	redis.SetLogger(clientLog{cfg.Logger})
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout, cfg.Timeout
	opts.ContextTimeoutEnabled = true
	// A failed round trip is decided in process at once; retrying would only make the request wait longer.
	opts.MaxRetries = -1
	r := &Redis{client: redis.NewClient(opts), prefix: cfg.Prefix, timeout: cfg.Timeout, retryAfter: cfg.RetryAfter,
		log: cfg.Logger}
	r.fallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_ratelimit_fallback_total",
		Help: "Limit decisions (rate limits, form nonces) taken in process because Redis did not answer.",
	})
	r.up = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_ratelimit_redis_up",
		Help: "1 while the limits are shared through Redis, 0 while this process decides alone.",
	}, func() float64 {
		if r.down.Load() {
			return 0
		}
		return 1
	})
	return r, nil
}

// clientLog passes go-redis's own messages to the process's log, at debug level.
type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", "message", fmt.Sprintf(format, v...))
}

// Collectors are the metrics of the shared limits, for the server's registry.
func (r *Redis) Collectors() []prometheus.Collector { return []prometheus.Collector{r.fallbacks, r.up} }

// Close closes the connections.
func (r *Redis) Close() error { return r.client.Close() }

// Ping checks that Redis answers; for a start-up log line, never a reason to refuse anything.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.Ping(ctx).Err()
}

// do runs fn against Redis unless Redis failed less than RetryAfter ago. false means Redis did not answer (or was
// not tried) and the caller decides in process.
func (r *Redis) do(fn func(ctx context.Context) error) bool {
	if until := r.downUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		r.fallbacks.Inc()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		r.fallbacks.Inc()
		r.downUntil.Store(time.Now().Add(r.retryAfter).UnixNano())
		if !r.down.Swap(true) {
			r.log.Warn("redis does not answer: rate limits and form nonces are per process until it does",
				"error", err.Error())
		}
		return false
	}
	if r.down.Load() && r.down.Swap(false) {
		r.downUntil.Store(0)
		r.log.Info("redis answers again: rate limits and form nonces are shared by the replicas again")
	}
	return true
}

//go:embed gcra.lua
var gcraSource string

var gcra = redis.NewScript(gcraSource)

// The script's modes.
const (
	modeTake   = "take"
	modePeek   = "peek"
	modeRefund = "refund"
)

// Limiter is the shared ratelimit.Limiter; while Redis does not answer it is its in-process fallback.
type Limiter struct {
	r     *Redis
	local ratelimit.Limiter
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// Limiter returns the shared limiter, deciding with local while Redis does not answer.
func (r *Redis) Limiter(local ratelimit.Limiter) *Limiter { return &Limiter{r: r, local: local} }

// eval runs the script in mode over reqs and fills ds (nil for a refund); false when Redis did not answer.
func (l *Limiter) eval(mode string, reqs []ratelimit.Request, ds []ratelimit.Decision) bool {
	keys := make([]string, len(reqs))
	args := make([]any, 1, 1+2*len(reqs))
	args[0] = mode
	for i, q := range reqs {
		keys[i] = l.r.prefix + "rl:" + q.Key
		args = append(args, interval(q.Policy).Microseconds(), max(q.Policy.Window.Microseconds(), 1))
	}
	return l.r.do(func(ctx context.Context) error {
		res, err := gcra.Run(ctx, l.r.client, keys, args...).Slice()
		if err != nil {
			return err
		}
		if ds == nil {
			return nil
		}
		if len(res) != len(reqs) {
			return fmt.Errorf("gcra script answered %d decisions for %d quotas", len(res), len(reqs))
		}
		for i, v := range res {
			if ds[i], err = decision(v); err != nil {
				return err
			}
		}
		return nil
	})
}

// interval is the time one request adds to the theoretical arrival time: the window divided by the quota.
func interval(p ratelimit.Policy) time.Duration {
	if p.Quota <= 0 {
		return max(p.Window, time.Microsecond)
	}
	return max(p.Window/time.Duration(p.Quota), time.Microsecond)
}

// decision reads one {allowed, remaining, reset µs, retry after µs} answer of the script.
func decision(v any) (ratelimit.Decision, error) {
	f, ok := v.([]any)
	if !ok || len(f) != 4 {
		return ratelimit.Decision{}, fmt.Errorf("gcra script answered %v", v)
	}
	var n [4]int64
	for i, x := range f {
		if n[i], ok = x.(int64); !ok {
			return ratelimit.Decision{}, fmt.Errorf("gcra script answered %v", v)
		}
	}
	return ratelimit.Decision{Allowed: n[0] == 1, Remaining: int(n[1]), Reset: time.Duration(n[2]) * time.Microsecond,
		RetryAfter: time.Duration(n[3]) * time.Microsecond}, nil
}

// TakeAll spends from every quota of reqs in one round trip, all or none.
func (l *Limiter) TakeAll(reqs []ratelimit.Request, now time.Time, ds []ratelimit.Decision) {
	if !l.eval(modeTake, reqs, ds) {
		l.local.TakeAll(reqs, now, ds)
	}
}

// Take spends one request of key's quota.
func (l *Limiter) Take(key string, p ratelimit.Policy, now time.Time) ratelimit.Decision {
	var ds [1]ratelimit.Decision
	l.TakeAll([]ratelimit.Request{{Key: key, Policy: p}}, now, ds[:])
	return ds[0]
}

// Peek reports what Take would decide, without spending.
func (l *Limiter) Peek(key string, p ratelimit.Policy, now time.Time) ratelimit.Decision {
	var ds [1]ratelimit.Decision
	if !l.eval(modePeek, []ratelimit.Request{{Key: key, Policy: p}}, ds[:]) {
		return l.local.Peek(key, p, now)
	}
	return ds[0]
}

// Refund gives back one request.
func (l *Limiter) Refund(key string, p ratelimit.Policy) {
	if !l.eval(modeRefund, []ratelimit.Request{{Key: key, Policy: p}}, nil) {
		l.local.Refund(key, p)
	}
}

// Nonces is the shared ratelimit.Nonces; while Redis does not answer it is its in-process fallback.
type Nonces struct {
	r     *Redis
	local ratelimit.Nonces
}

var _ ratelimit.Nonces = (*Nonces)(nil)

// Nonces returns the shared nonce set, deciding with local while Redis does not answer.
func (r *Redis) Nonces(local ratelimit.Nonces) *Nonces { return &Nonces{r: r, local: local} }

var nonceLifetime = strconv.FormatInt(ratelimit.NonceLifetime.Milliseconds(), 10)

// Claim records token for ratelimit.NonceLifetime; false when any replica claimed it already.
func (n *Nonces) Claim(token string) bool {
	var claimed bool
	if n.r.do(func(ctx context.Context) error {
		err := n.r.client.Do(ctx, "SET", n.r.prefix+"nonce:"+token, "1", "NX", "PX", nonceLifetime).Err()
		if err == redis.Nil { // NX and the key exists
			return nil
		}
		claimed = err == nil
		return err
	}) {
		return claimed
	}
	return n.local.Claim(token)
}

// Release makes token usable again.
func (n *Nonces) Release(token string) {
	if !n.r.do(func(ctx context.Context) error { return n.r.client.Del(ctx, n.r.prefix+"nonce:"+token).Err() }) {
		n.local.Release(token)
	}
}
