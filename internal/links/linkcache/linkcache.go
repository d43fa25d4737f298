// Package linkcache keeps resolved short links in memory, so that a redirect of a known link does no database I/O.
//
// Entries are keyed by short URL (domain and lower-case slug) and dropped when the link changes, for as long as Run
// runs: at once for changes made in this process (store.LinkChanges.Subscribe), within milliseconds for changes made
// by other processes (PostgreSQL LISTEN, store.LinkChanges.Watch). Unknown slugs are cached too (for NegativeTTL, and
// dropped when a link is created there), so that a flood of requests for a missing slug does not reach the
// database. A TTL bounds the life of every entry in case a change notice is ever lost, concurrent misses of one
// key share one database read (singleflight), and the cache holds at most Size entries (random eviction: no
// bookkeeping on the read path).
//
// While the PostgreSQL listener is disconnected, changes can go unheard: entries are then not trusted, and every
// lookup reads the database again. Only when that read fails is the last known entry served (stale-if-error): the
// database being unreachable, nobody can change the link in it either, and a visitor is better served by the
// last known destination than by an error. On reconnection everything cached is dropped.
package linkcache

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/switchboard/switchboard/store"
)

// Loader reads the value of a short URL from the database; found is false when no link answers there.
type Loader[V any] func(ctx context.Context, key store.LinkKey) (v V, found bool, err error)

// Config tunes a Cache; zero values take the defaults.
type Config struct {
	// Size is the most entries kept (default DefaultSize).
	Size int
	// TTL is the longest a link is served from memory without reading it again (default 5 min); NegativeTTL the
	// same for an unknown slug (default 30 s).
	TTL, NegativeTTL time.Duration
	// LoadTimeout bounds a database read (default 2 s).
	LoadTimeout time.Duration
}

// DefaultSize is Config.Size when it is not set.
const DefaultSize = 100_000

const shardCount = 64

// Cache maps short URLs to values of type V.
type Cache[V any] struct {
	load    Loader[V]
	changes *store.LinkChanges
	cfg     Config
	seed    maphash.Seed
	shards  [shardCount]shard[V]
	group   singleflight.Group
	// trusted is false while changes could go unheard (before the PostgreSQL listener connects, and while it
	// reconnects).
	trusted atomic.Bool
	// failingUntil (Unix nanoseconds) is set when a read failed: until then stale entries are served without
	// trying the database again, so an outage does not make every redirect wait for a timeout.
	failingUntil atomic.Int64
}

type shard[V any] struct {
	mu sync.RWMutex
	m  map[store.LinkKey]*entry[V]
	// gen changes with every invalidation in the shard: a read that started before it must not store its result.
	gen uint64
}

type entry[V any] struct {
	v       V
	found   bool
	expires int64 // Unix nanoseconds
}

// failBackoff is how long stale entries are served without a new database read after a read failed.
const failBackoff = time.Second

// New returns an empty cache over load whose entries changes invalidate (once Run runs). It trusts its entries only
// once told (SetTrusted), or after Run connected.
func New[V any](load Loader[V], changes *store.LinkChanges, cfg Config) *Cache[V] {
	if cfg.Size <= 0 {
		cfg.Size = DefaultSize
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 30 * time.Second
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 2 * time.Second
	}
	c := &Cache[V]{load: load, changes: changes, cfg: cfg, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[store.LinkKey]*entry[V]{}
	}
	return c
}

func (c *Cache[V]) shard(key store.LinkKey) *shard[V] {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(key.Domain)
	h.WriteByte(0)
	h.WriteString(key.SlugKey)
	return &c.shards[h.Sum64()%shardCount]
}

// Get returns the value at key as of now: from memory when the entry is fresh and trusted, else from the database
// (and remembered). found is false for an unknown slug. An error means the database failed and nothing usable was
// cached.
func (c *Cache[V]) Get(ctx context.Context, key store.LinkKey, now time.Time) (v V, found bool, err error) {
	sh := c.shard(key)
	sh.mu.RLock()
	e := sh.m[key]
	sh.mu.RUnlock()
	t := now.UnixNano()
	if e != nil {
		if t < e.expires && c.trusted.Load() || t < c.failingUntil.Load() {
			return e.v, e.found, nil
		}
	}
	fresh, err := c.fill(ctx, key, sh, now)
	if err != nil {
		c.failingUntil.Store(now.Add(failBackoff).UnixNano())
		if e != nil {
			return e.v, e.found, nil
		}
		return v, false, err
	}
	return fresh.v, fresh.found, nil
}

// fill reads key from the database, once for all concurrent callers, and stores the result unless the key was
// invalidated while it was being read.
func (c *Cache[V]) fill(ctx context.Context, key store.LinkKey, sh *shard[V], now time.Time) (*entry[V], error) {
	res, err, _ := c.group.Do(key.Domain+"\x00"+key.SlugKey, func() (any, error) {
		sh.mu.RLock()
		gen := sh.gen
		sh.mu.RUnlock()
		// Detached from the first caller: the others wait for the same read.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LoadTimeout)
		defer cancel()
		v, found, err := c.load(lctx, key)
		if err != nil {
			return nil, err
		}
		ttl := c.cfg.TTL
		if !found {
			ttl = c.cfg.NegativeTTL
		}
		e := &entry[V]{v: v, found: found, expires: now.Add(ttl).UnixNano()}
		sh.mu.Lock()
		if sh.gen == gen {
			if _, ok := sh.m[key]; !ok && len(sh.m) >= c.cfg.Size/shardCount+1 {
				for k := range sh.m { // map iteration starts at a random entry: random eviction
					delete(sh.m, k)
					break
				}
			}
			sh.m[key] = e
		}
		sh.mu.Unlock()
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(*entry[V]), nil
}

// Invalidate drops the entry of key (a link created, changed or deleted there).
func (c *Cache[V]) Invalidate(key store.LinkKey) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.gen++
	sh.mu.Unlock()
}

// Reset drops every entry.
func (c *Cache[V]) Reset() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.gen++
		sh.mu.Unlock()
	}
}

// SetTrusted says whether every change is heard (true), or entries must be read again before use (false).
func (c *Cache[V]) SetTrusted(trusted bool) { c.trusted.Store(trusted) }

// Trusted reports whether every change is heard now (Run connected, or SetTrusted(true)).
func (c *Cache[V]) Trusted() bool { return c.trusted.Load() }

// Len is the number of entries.
func (c *Cache[V]) Len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.RLock()
		n += len(c.shards[i].m)
		c.shards[i].mu.RUnlock()
	}
	return n
}

// Run keeps the cache in step with link changes: this process's through Subscribe, other processes' through Watch
// (PostgreSQL), whose reconnections drop everything and whose outages make entries untrusted. On PostgreSQL it
// returns nil when ctx ends; on SQLite at once, the cache trusted (one process serves redirects there, and its
// changes are all heard through Subscribe).
func (c *Cache[V]) Run(ctx context.Context) error {
	c.changes.Subscribe(c.Invalidate)
	c.changes.Watch(ctx, store.LinkWatch{
		Changed: c.Invalidate,
		Connected: func() {
			c.Reset()
			c.SetTrusted(true)
		},
		Disconnected: func() { c.SetTrusted(false) },
	})
	return nil
}
