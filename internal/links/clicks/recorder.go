// Package clicks records the visits of short links without ever slowing a redirect down or losing one.
//
// The redirect handler hands each served redirect to Recorder.Record as a Hit — raw facts only, captured in
// nanoseconds into an in-memory buffer. A writer goroutine takes the buffer every Interval (or as soon as a batch
// is full), classifies and enriches the hits (user agent, referrer host, country, truncated address, daily visitor
// hash) and writes each batch in one transaction (store.Clicks.Record), idempotently: click IDs are made at
// capture time, so writing a batch twice stores it once.
//
// When the database fails, the batch is retried once; then it and everything after it goes to the spool (an
// fsynced, checksummed file in the data directory) until the database answers again, and the spool is replayed.
// While the database is merely slow, the buffer passing its high-water mark (or the writer being stuck on one
// transaction for half a second) spills to the spool too. When Run is stopped it drains the buffer to the database,
// or to the spool. A click is therefore lost only if the process is killed (kill -9, power loss) while it is in
// memory: the clicks of about one Interval plus the batch being written — see the crash window in docs/links.md.
//
// The recorder also keeps the click data tidy: it purges the clicks of deleted links and deletes visitor salts
// older than two days.
package clicks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// Hit is what the redirect handler knows of one served redirect.
type Hit struct {
	// ID becomes the click's ID ("clk_" + ULID): made when the redirect is served, so every later write of the
	// same hit (a retried batch, a replayed spool) is recognised.
	ID     ulid.ULID
	At     time.Time
	LinkID string
	// Class is set when the handler already classified the visit (links with max_clicks must, before admitting
	// it); "" lets the recorder do it.
	Class string
	// Head is a HEAD request.
	Head      bool
	UserAgent string
	Referer   string
	// IP is the client address as the handler saw it.
	IP string
}

// NewHitID returns a click ID for a hit at t: a ULID whose random part comes from the runtime's fast generator
// (80 bits; no cryptographic randomness is needed to keep IDs apart).
func NewHitID(t time.Time) ulid.ULID {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	r1, r2 := rand.Uint64(), rand.Uint32()
	for i := range 8 {
		id[6+i] = byte(r1 >> (8 * i))
	}
	id[14], id[15] = byte(r2), byte(r2>>8)
	return id
}

// Errors of Record.
var (
	// ErrClosed means the recorder is shutting down.
	ErrClosed = errors.New("clicks: recorder closed")
	// ErrOverloaded means neither memory nor the spool can take the click (the database and the disk both fail):
	// the redirect should not be served, rather than be served and forgotten.
	ErrOverloaded = errors.New("clicks: click buffer full and spool failing")
)

// Config tunes the Recorder; zero values take the defaults.
type Config struct {
	// BatchSize is the most clicks written in one transaction (default DefaultBatchSize).
	BatchSize int
	// Interval is how often the buffer is written (default DefaultInterval): the delay until a click shows in
	// statistics, and the order of what a kill -9 can lose.
	Interval time.Duration
	// HighWater is the number of buffered clicks above which the buffer spills to the spool (default
	// DefaultHighWater; SWITCHBOARD_CLICK_BUFFER). Four times as many are kept in memory while the spool itself
	// fails; beyond that Record refuses clicks.
	HighWater int
	// SpoolDir is the directory of the spool (required).
	SpoolDir string
	// GeoIP, when set, gives clicks their country.
	GeoIP *GeoIP
	// Housekeeping is how often the clicks of deleted links are purged and visitor salts older than two days
	// deleted (default 1 min).
	Housekeeping time.Duration
	// Events records link.clicked in each batch's transaction (default: an outbox of the built-in types).
	Events *events.Outbox
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultBatchSize = 1000
	DefaultInterval  = 50 * time.Millisecond
	DefaultHighWater = 50_000
)

// txTimeout bounds one batch transaction, so a database that stopped answering is noticed.
const txTimeout = 5 * time.Second

// stuckAfter is how long the writer may wait on one transaction before the buffer goes to the spool anyway.
const stuckAfter = 500 * time.Millisecond

// Recorder buffers, batches, persists and spools clicks. Create it with New; Run writes what it buffers.
type Recorder struct {
	db     *store.DB
	cfg    Config
	log    *slog.Logger
	agents agentCache
	spool  *spool
	m      *metrics

	mu      sync.Mutex
	pending []Hit
	taken   int // hits taken from pending and not yet persisted or spooled
	closed  bool
	hardCap int

	kick, spill chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	// busySince is when the writer started its current transaction (Unix nanoseconds; 0 when idle).
	busySince    atomic.Int64
	spoolFailing atomic.Bool
	// behind is set while redirects come faster than the writer writes.
	behind atomic.Bool

	// Owned by the writer goroutine (and by the drain after it stopped).
	healthy bool
	retryAt time.Time
	backoff time.Duration
	salts   map[string]*visitorHasher
	// day is the hasher of the last day a click was hashed for, with the day's bounds (see hasherAt).
	day struct {
		hasher     *visitorHasher
		start, end time.Time
	}
	replay  *claimedSegment
	replayN int // position in replay.hits
	// replayStart is when the segment being replayed was claimed (its log line gives the replay's duration).
	replayStart time.Time
	// replayRepeats is set once a batch of the segment being replayed held a click stored already: its other
	// batches are then written looking for stored clicks at once (see persist).
	replayRepeats bool
}

// New opens the spool and returns the recorder; it takes clicks at once and writes them once Run runs. Segments
// left in the spool by an earlier run (a crash, or a shutdown while the database was down) are replayed first.
func New(db *store.DB, cfg Config) (*Recorder, error) {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.HighWater <= 0 {
		cfg.HighWater = DefaultHighWater
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Housekeeping <= 0 {
		cfg.Housekeeping = time.Minute
	}
	if cfg.SpoolDir == "" {
		return nil, errors.New("clicks: a spool directory is required")
	}
	if cfg.Events == nil {
		cfg.Events = events.NewOutbox(db, events.Builtin())
	}
	sp, err := openSpool(cfg.SpoolDir)
	if err != nil {
		return nil, err
	}
	r := &Recorder{db: db, cfg: cfg, log: cfg.Logger, spool: sp, hardCap: 4 * cfg.HighWater,
		kick: make(chan struct{}, 1), spill: make(chan struct{}, 1), stop: make(chan struct{}),
		healthy: true, backoff: minBackoff, salts: map[string]*visitorHasher{}}
	r.m = newMetrics(r)
	return r, nil
}

// drainTimeout bounds the attempts at the database while draining; what they cannot write goes to the spool.
const drainTimeout = 30 * time.Second

// Run writes the buffered clicks in batches, spills to the spool and replays it, and purges the clicks of deleted
// links, until ctx ends. Then it stops taking clicks and drains the buffer — to the database when it answers, else
// to the spool — and returns: stop it only after redirects are no longer served. Clicks that can go nowhere (the
// database and the disk both fail) are counted as dropped and reported in the error. Run runs once.
func (r *Recorder) Run(ctx context.Context) error {
	r.wg.Add(3)
	go r.loop(r.cfg.Interval, r.kick, r.cycle)
	go r.loop(r.cfg.Interval, r.spill, r.spillOver)
	go r.loop(r.cfg.Housekeeping, nil, r.housekeep)
	<-ctx.Done()
	r.log.Info("draining buffered clicks")
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	return r.drain(drainCtx)
}

// Collectors are the recorder's Prometheus metrics.
func (r *Recorder) Collectors() []prometheus.Collector { return r.m.collectors() }

// Classify tells what made a request, for handlers that must know before the click is recorded.
func (r *Recorder) Classify(head bool, userAgent string) string {
	if head {
		return store.ClickHead
	}
	return r.agents.parse(userAgent).Class
}

// Longest header text kept in a hit: the stored user agent is shorter still, and a referrer only gives its host.
const (
	maxHitUserAgent = 1024
	maxHitReferer   = 2048
)

// Record buffers a hit; it never waits for I/O. It fails only when the recorder is closed, or when memory is
// full because the database and the spool both fail (ErrOverloaded).
func (r *Recorder) Record(h Hit) error {
	if len(h.UserAgent) > maxHitUserAgent {
		h.UserAgent = h.UserAgent[:maxHitUserAgent]
	}
	if len(h.Referer) > maxHitReferer {
		h.Referer = h.Referer[:maxHitReferer]
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	n := len(r.pending)
	if n+r.taken >= r.hardCap {
		r.mu.Unlock()
		r.m.refused.Inc()
		return ErrOverloaded
	}
	r.pending = append(r.pending, h)
	r.mu.Unlock()
	r.m.received.Inc()
	if n+1 == r.cfg.BatchSize {
		signal(r.kick)
	}
	if n+1 >= r.cfg.HighWater {
		signal(r.spill)
	}
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Backlog is what waits to reach the database: clicks in memory and bytes in the spool. Both are zero when every
// click received so far is stored.
func (r *Recorder) Backlog() (inMemory int, spooledBytes int64) { return r.inFlight(), r.spool.bytes() }

// inFlight is the number of clicks in memory: buffered, or in a batch being written.
func (r *Recorder) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) + r.taken
}

// take removes up to n hits from the buffer and returns them.
func (r *Recorder) take(n int) []Hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(n, len(r.pending))
	if k == 0 {
		return nil
	}
	batch := make([]Hit, k)
	copy(batch, r.pending)
	clear(r.pending[:k])
	r.pending = r.pending[k:]
	r.taken += k
	return batch
}

// left accounts for n taken hits that left memory (persisted or spooled).
func (r *Recorder) left(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken -= n
}

// giveBack returns taken hits that could be neither persisted nor spooled to the buffer.
func (r *Recorder) giveBack(hits []Hit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken -= len(hits)
	r.pending = append(r.pending, hits...)
}

// loop calls fn every period and whenever wake fires, until the drain starts.
func (r *Recorder) loop(every time.Duration, wake <-chan struct{}, fn func()) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}

// cycle writes what is buffered, then replays a little of the spool when the database is healthy.
func (r *Recorder) cycle() {
	if !r.healthy && !time.Now().Before(r.retryAt) {
		r.healthy = true // try the database again: the next write tells
	}
	// One batch at a time: while a transaction is in flight, the rest stays in the buffer, where the spill loop
	// can reach it.
	for {
		batch := r.take(r.cfg.BatchSize)
		if len(batch) == 0 {
			r.behind.Store(false)
			break
		}
		start := time.Now()
		if !r.write(batch) {
			r.giveBack(batch)
			return
		}
		r.left(len(batch))
		if len(batch) < r.cfg.BatchSize {
			r.behind.Store(false)
			break
		}
		// A full batch, and more waiting: the writer is behind the redirects. It pauses, leaving the CPU to them,
		// and the spill loop moves what arrives to the spool meanwhile, from where it is replayed.
		r.behind.Store(true)
		if !r.pause(time.Since(start)) {
			return
		}
	}
	if r.healthy {
		r.replaySome(4)
	}
}

// writerShare is the most of its time the writer spends writing while redirects keep coming faster than it writes:
// under such a load, a visitor waiting for a redirect matters more than a click showing in statistics at once.
const writerShare = 0.5

// pause waits after a write that took d, so that writing takes at most writerShare of the time. It reports false
// when the recorder is closing.
func (r *Recorder) pause(d time.Duration) bool {
	t := time.NewTimer(time.Duration(float64(d) * (1/writerShare - 1)))
	defer t.Stop()
	select {
	case <-r.stop:
		return false
	case <-t.C:
		return true
	}
}

// busy reports whether redirects are coming in: clicks wait in the buffer.
func (r *Recorder) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) > 0
}

// write persists a chunk, or spools it when the database fails. It reports false when neither worked.
func (r *Recorder) write(chunk []Hit) bool {
	if r.healthy {
		err := r.persist(context.Background(), chunk, false)
		if err == nil {
			return true
		}
		r.unhealthy(err)
	}
	return r.toSpool(chunk)
}

// toSpool appends hits to the spool and reports whether that worked. Failures are logged when they start, not on
// every attempt.
func (r *Recorder) toSpool(hits []Hit) bool {
	if err := r.spool.append(hits); err != nil {
		if !r.spoolFailing.Swap(true) {
			r.log.Error("clicks: the spool cannot take clicks; keeping them in memory (redirects are refused once "+
				"memory is full)", "error", err, "clicks", len(hits))
		}
		return false
	}
	if r.spoolFailing.Swap(false) {
		r.log.Info("clicks: the spool takes clicks again")
	}
	r.m.spooled.Add(float64(len(hits)))
	return true
}

const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func (r *Recorder) unhealthy(err error) {
	if r.healthy {
		r.log.Warn("clicks: database write failed; spooling clicks until it answers", "error", err)
	}
	r.healthy = false
	r.retryAt = time.Now().Add(r.backoff)
	r.backoff = min(r.backoff*2, maxBackoff)
}

// persist writes hits in one transaction, trying twice (a deadlock or a dropped connection is retried at once;
// the first attempt may have committed before its error, so the second one looks for clicks stored already).
//
// A batch is first written as fresh clicks — a plain multi-row insert — even from the spool: what the spool holds
// is mostly clicks spilled while the writer was behind, never written before, and the insert that reports which
// rows it stored costs about a third more CPU per click (SQLite, batches of 1,000: 12–15 µs against 9). A batch
// with a click stored already (a replay that stopped half way, a batch whose commit failed after it was made) is
// rolled back whole (store.ErrClickRepeated) and written again at once looking for stored clicks; the rest of its
// spool segment is written that way too.
func (r *Recorder) persist(ctx context.Context, hits []Hit, replayed bool) error {
	var err error
	for attempt := range 2 {
		if attempt > 0 && !errors.Is(err, store.ErrClickRepeated) {
			time.Sleep(100 * time.Millisecond)
		}
		mayRepeat := attempt > 0 || replayed && r.replayRepeats
		if err = r.persistOnce(ctx, hits, replayed, mayRepeat); err == nil {
			r.backoff = minBackoff
			return nil
		}
		if replayed && errors.Is(err, store.ErrClickRepeated) {
			r.replayRepeats = true
		}
	}
	return err
}

func (r *Recorder) persistOnce(ctx context.Context, hits []Hit, replayed, mayRepeat bool) error {
	start := time.Now()
	r.busySince.Store(start.UnixNano())
	defer r.busySince.Store(0)
	ctx, cancel := context.WithTimeout(ctx, txTimeout)
	defer cancel()
	clicks := make([]store.Click, len(hits))
	for i := range hits {
		c, err := r.click(ctx, &hits[i])
		if err != nil {
			return err
		}
		clicks[i] = c
	}
	res, err := r.record(ctx, clicks, replayed, store.RecordOptions{MayRepeat: mayRepeat, Recorded: r.emitClicked})
	if err != nil {
		return err
	}
	r.m.batch.Observe(time.Since(start).Seconds())
	r.m.persisted.Add(float64(res.Inserted))
	r.m.discarded.WithLabelValues("link_deleted").Add(float64(res.LinkDeleted))
	r.m.discarded.WithLabelValues("already_recorded").Add(float64(res.Duplicates))
	if replayed {
		r.m.replayed.Add(float64(len(hits)))
	}
	if res.LinkDeleted > 0 {
		r.log.Info("clicks: discarded clicks of deleted links", "clicks", res.LinkDeleted)
	}
	return nil
}

// replayLanes is how many transactions a replay runs at once on PostgreSQL, each with the clicks of its own links
// (so that they never wait for each other's row locks). A single transaction leaves PostgreSQL idle while this
// process prepares and encodes the next statement, and the other way round; two keep both busy. SQLite has one
// writer, so it replays in one.
const replayLanes = 2

// record stores clicks in one transaction, or — replayed on PostgreSQL — in replayLanes concurrent transactions
// split by link. A lane that fails fails the whole call; the spooled clicks are then replayed again, which is
// harmless: a replay may repeat clicks, and the lanes that committed find theirs stored.
func (r *Recorder) record(ctx context.Context, clicks []store.Click, replayed bool, o store.RecordOptions) (store.RecordResult, error) {
	if !replayed || r.db.Dialect() != store.Postgres || len(clicks) < 2*r.cfg.BatchSize {
		return r.db.Clicks.Record(ctx, clicks, o)
	}
	var lanes [replayLanes][]store.Click
	for _, c := range clicks {
		lane := store.LaneOf(c.LinkID, replayLanes)
		lanes[lane] = append(lanes[lane], c)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total store.RecordResult
		first error
	)
	for _, lane := range lanes {
		wg.Go(func() {
			res, err := r.db.Clicks.Record(ctx, lane, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			total.Inserted += res.Inserted
			total.Duplicates += res.Duplicates
			total.LinkDeleted += res.LinkDeleted
		})
	}
	wg.Wait()
	return total, first
}

// click turns a hit into the row stored: classified, with device, OS and browser families, referrer host, country,
// truncated address and — for humans — the visitor hash under the salt of the click's day.
func (r *Recorder) click(ctx context.Context, h *Hit) (store.Click, error) {
	ua := cleanText(h.UserAgent, maxUserAgent)
	agent := r.agents.parse(h.UserAgent)
	c := store.Click{
		ID: clickID(h.ID), LinkID: h.LinkID, ClickedAt: h.At.UTC().Truncate(time.Microsecond),
		Class: h.Class, Device: agent.Device, OS: agent.OS, Browser: agent.Browser, UserAgent: ua,
	}
	switch {
	case h.Head:
		c.Class = store.ClickHead
	case c.Class == "":
		c.Class = agent.Class
	}
	if c.Class != store.ClickHuman {
		c.Device = DeviceBot
	}
	// The optional columns are pointers: each is allocated only when it has a value (a variable whose address is
	// taken escapes where it is declared, whether or not the address is then used).
	if host := referrerHost(h.Referer); host != "" {
		c.ReferrerHost = new(host)
	}
	ip, ok := parseIP(h.IP)
	if !ok {
		return c, nil
	}
	if p := ipPrefix(ip); p != "" {
		c.IPPrefix = new(p)
	}
	if country := r.cfg.GeoIP.Country(ip); country != "" {
		c.Country = new(country)
	}
	if c.Class == store.ClickHuman {
		hasher, err := r.hasherAt(ctx, c.ClickedAt)
		if err != nil {
			return c, err
		}
		if hasher != nil {
			c.VisitorHash = new(hasher.hash(ip, h.UserAgent))
		}
	}
	return c, nil
}

// clickID is the stored ID of a hit's click: "clk_" and its ULID, in one allocation.
func clickID(id ulid.ULID) string {
	var b [len("clk_") + ulid.EncodedSize]byte
	copy(b[:], "clk_")
	_ = id.MarshalTextTo(b[len("clk_"):])
	return string(b[:])
}

// hasherAt is the visitor hasher of the day of t. The day of the last click asked for is kept with its bounds, so
// that a batch's clicks (mostly of one day) are not each formatted into a day to look it up.
func (r *Recorder) hasherAt(ctx context.Context, t time.Time) (*visitorHasher, error) {
	if r.day.hasher != nil && !t.Before(r.day.start) && t.Before(r.day.end) {
		return r.day.hasher, nil
	}
	day := store.ClickDay(t)
	h, err := r.hasher(ctx, day)
	if err != nil || h == nil {
		return h, err
	}
	start, _ := time.Parse(time.DateOnly, day)
	r.day.hasher, r.day.start, r.day.end = h, start, start.AddDate(0, 0, 1)
	return h, nil
}

// hasher returns the visitor hasher of a day, nil for a day whose salt is gone (a click replayed from the spool
// days later is counted, but not as a unique visitor).
func (r *Recorder) hasher(ctx context.Context, day string) (*visitorHasher, error) {
	if h, ok := r.salts[day]; ok {
		return h, nil
	}
	salt, err := r.db.Clicks.Salt(ctx, day, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(r.salts) > store.SaltRetention+1 {
		clear(r.salts)
	}
	h := newVisitorHasher(salt)
	r.salts[day] = h
	return h, nil
}

// replayBatches is how many batches of the spool go into one replay on SQLite, and replayBatchesPostgres on
// PostgreSQL (split over replayLanes transactions). Spooled clicks are durable already, so a replay can afford
// bigger transactions than live batches: one row update per link and hour serves more clicks. SQLite's are kept to
// about a quarter of a second of its single writer, which API writes wait for meanwhile; PostgreSQL locks only the
// rows of the links in the batch.
const (
	replayBatches         = 4
	replayBatchesPostgres = 16
)

// replaySome persists up to chunks batches from the spool: segments of earlier runs and of this run's outages,
// oldest first, each removed once all of it is in the database.
func (r *Recorder) replaySome(chunks int) {
	for chunks > 0 {
		if r.replay == nil && !r.claimNext() {
			return
		}
		seg := r.replay
		for r.replayN < len(seg.hits) && chunks > 0 {
			n := replayBatches
			if r.db.Dialect() == store.Postgres {
				n = replayBatchesPostgres
			}
			end := min(r.replayN+n*r.cfg.BatchSize, len(seg.hits))
			start := time.Now()
			if err := r.persist(context.Background(), seg.hits[r.replayN:end], true); err != nil {
				r.unhealthy(err)
				return
			}
			r.replayN = end
			chunks--
			// Catching up yields to live traffic the way live batches do.
			if r.busy() && !r.pause(time.Since(start)) {
				return
			}
		}
		if r.replayN < len(seg.hits) {
			return
		}
		if err := seg.done(); err != nil {
			r.log.Error("clicks: could not remove a replayed spool segment; it will be replayed again (harmlessly)", "error", err)
		}
		r.log.Info("clicks: replayed a spool segment", "clicks", len(seg.hits),
			"duration_ms", time.Since(r.replayStart).Milliseconds(), "spool_bytes_left", r.spool.bytes())
		r.replay, r.replayN = nil, 0
	}
}

// claimNext claims the oldest spool segment no other process holds. When none is left, the segment this process
// was appending to is sealed so that it is replayed next.
func (r *Recorder) claimNext() bool {
	for range 2 {
		names, err := r.spool.segments()
		if err != nil {
			r.log.Error("clicks: cannot list the spool", "error", err)
			return false
		}
		for _, name := range names {
			seg, ok, err := claim(name)
			if err != nil {
				r.log.Error("clicks: cannot read a spool segment", "segment", name, "error", err)
				continue
			}
			if !ok {
				continue
			}
			if seg.corrupt > 0 {
				r.m.dropped.Add(float64(seg.corrupt))
				r.log.Error("clicks: damaged records in a spool segment were skipped (each is at least one click lost)",
					"segment", name, "damaged", seg.corrupt)
			}
			// Replayed link by link (in time order within each link, as the segment was written): a transaction
			// then updates the rollups, dimensions and counters of a few links instead of every link of the outage,
			// and a visitor's first click of the day still comes first.
			slices.SortStableFunc(seg.hits, func(a, b Hit) int { return strings.Compare(a.LinkID, b.LinkID) })
			r.replay, r.replayN, r.replayStart, r.replayRepeats = seg, 0, time.Now(), false
			r.log.Info("clicks: replaying a spool segment", "clicks", len(seg.hits), "spool_bytes", r.spool.bytes())
			return true
		}
		if !r.spool.seal() {
			return false
		}
	}
	return false
}

// spillOver moves the buffer to the spool when it passed the high-water mark, while the writer is stuck on a
// transaction, or while the writer is behind the redirects, so that memory stays bounded and a crash loses little.
// It runs beside the writer.
func (r *Recorder) spillOver() {
	busy := r.busySince.Load()
	stuck := busy != 0 && time.Since(time.Unix(0, busy)) > stuckAfter
	r.mu.Lock()
	n := len(r.pending)
	r.mu.Unlock()
	if n == 0 || n < r.cfg.HighWater && !stuck && !r.behind.Load() {
		return
	}
	batch := r.take(math.MaxInt)
	if !r.toSpool(batch) {
		r.giveBack(batch)
		return
	}
	r.left(len(batch))
}

// purgeBatch bounds the rows one purge statement deletes; purgeKeep is how long a purge row outlives the deletion
// of its link, so that clicks written after it (a batch in flight, a spool replayed late) are purged too.
const (
	purgeBatch = 1000
	purgeKeep  = 24 * time.Hour
)

// housekeepTimeout bounds one housekeeping pass. It is not the interval: a short interval (tests use 10 ms) must not
// cut a pass short on a busy database, and passes never overlap because one goroutine runs them in turn.
const housekeepTimeout = time.Minute

// housekeep purges the clicks, rollups and visitors of deleted links and prunes old visitor salts (every
// Housekeeping).
func (r *Recorder) housekeep() {
	ctx, cancel := context.WithTimeout(context.Background(), max(r.cfg.Housekeeping, housekeepTimeout))
	defer cancel()
	go func() { // a stop does not wait for a pass: what it left is purged by the next process's first pass
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if _, err := r.db.Clicks.PurgeDeleted(ctx, time.Now(), purgeBatch, purgeKeep); err != nil {
		r.log.Warn("clicks: purging the clicks of deleted links failed; retrying later", "error", err)
	}
	if err := r.db.Clicks.PruneVisitors(ctx, time.Now()); err != nil {
		r.log.Warn("clicks: pruning visitor salts failed; retrying later", "error", err)
	}
}

// drain stops taking clicks and the loops, and writes what is left; ctx bounds the attempts at the database.
func (r *Recorder) drain(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()

	batch := r.take(math.MaxInt)
	if !r.healthy && !time.Now().Before(r.retryAt) {
		r.healthy = true
	}
	var lost int
	for start := 0; start < len(batch); start += r.cfg.BatchSize {
		chunk := batch[start:min(start+r.cfg.BatchSize, len(batch))]
		if r.healthy && ctx.Err() == nil {
			err := r.persist(ctx, chunk, false)
			if err == nil {
				continue
			}
			r.unhealthy(err)
		}
		if !r.toSpool(chunk) {
			lost += len(chunk)
		}
	}
	r.left(len(batch))
	if r.replay != nil {
		r.replay.release()
		r.replay = nil
	}
	r.spool.seal()
	if lost > 0 {
		r.m.dropped.Add(float64(lost))
		return fmt.Errorf("clicks: %d clicks lost at shutdown: the database and the spool both failed", lost)
	}
	return nil
}
