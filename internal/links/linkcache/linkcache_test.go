package linkcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fakeDB is a loader over a map, counting reads; fail makes reads fail, block holds them until closed.
type fakeDB struct {
	mu    sync.Mutex
	links map[store.LinkKey]string
	reads atomic.Int64
	fail  atomic.Bool
	block chan struct{}
}

func (f *fakeDB) load(_ context.Context, k store.LinkKey) (string, bool, error) {
	f.reads.Add(1)
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if f.fail.Load() {
		return "", false, errors.New("database down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.links[k]
	return v, ok, nil
}

func (f *fakeDB) set(k store.LinkKey, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == "" {
		delete(f.links, k)
	} else {
		f.links[k] = v
	}
}

var key = store.LinkKey{Domain: "sb.test", SlugKey: "promo"}

func newTestCache(cfg Config) (*Cache[string], *fakeDB) {
	f := &fakeDB{links: map[store.LinkKey]string{key: "https://example.com/a"}}
	c := New(f.load, nil, cfg)
	c.SetTrusted(true)
	return c, f
}

func get(t *testing.T, c *Cache[string], k store.LinkKey, now time.Time) (string, bool) {
	t.Helper()
	v, found, err := c.Get(context.Background(), k, now)
	if err != nil {
		t.Fatalf("Get(%v): %v", k, err)
	}
	return v, found
}

func TestHitsNeedNoRead(t *testing.T) {
	c, f := newTestCache(Config{})
	now := time.Now()
	for range 100 {
		if v, found := get(t, c, key, now); !found || v != "https://example.com/a" {
			t.Fatalf("Get = %q, %v", v, found)
		}
	}
	if f.reads.Load() != 1 {
		t.Fatalf("%d reads for 100 lookups of one link, want 1", f.reads.Load())
	}
}

func TestInvalidateMakesTheNextLookupRead(t *testing.T) {
	c, f := newTestCache(Config{})
	now := time.Now()
	get(t, c, key, now)
	f.set(key, "https://example.com/b")
	c.Invalidate(key)
	if v, _ := get(t, c, key, now); v != "https://example.com/b" {
		t.Fatalf("after the change: %q", v)
	}
	f.set(key, "")
	c.Invalidate(key)
	if _, found := get(t, c, key, now); found {
		t.Fatal("a deleted link is still found")
	}
}

// Unknown slugs are remembered for NegativeTTL, and forgotten at once when a link is created there.
func TestNegativeCaching(t *testing.T) {
	c, f := newTestCache(Config{NegativeTTL: 30 * time.Second})
	missing := store.LinkKey{Domain: "sb.test", SlugKey: "nope"}
	now := time.Now()
	for range 10 {
		if _, found := get(t, c, missing, now); found {
			t.Fatal("found a missing link")
		}
	}
	if f.reads.Load() != 1 {
		t.Fatalf("%d reads for a missing slug, want 1", f.reads.Load())
	}
	get(t, c, missing, now.Add(31*time.Second))
	if f.reads.Load() != 2 {
		t.Fatal("the negative entry outlived its TTL")
	}
	f.set(missing, "https://example.com/new")
	c.Invalidate(missing)
	if v, found := get(t, c, missing, now); !found || v != "https://example.com/new" {
		t.Fatalf("after creation: %q, %v", v, found)
	}
}

func TestTTLIsASafetyNet(t *testing.T) {
	c, f := newTestCache(Config{TTL: time.Minute})
	now := time.Now()
	get(t, c, key, now)
	f.set(key, "https://example.com/changed-unannounced")
	if v, _ := get(t, c, key, now.Add(59*time.Second)); v != "https://example.com/a" {
		t.Fatalf("within the TTL: %q", v)
	}
	if v, _ := get(t, c, key, now.Add(61*time.Second)); v != "https://example.com/changed-unannounced" {
		t.Fatalf("after the TTL: %q", v)
	}
}

// A read that was in flight when its key was invalidated must not store what it read: it may predate the change.
func TestAReadRacingAnInvalidationIsNotStored(t *testing.T) {
	c, f := newTestCache(Config{})
	f.block = make(chan struct{})
	done := make(chan string)
	go func() {
		v, _, _ := c.Get(context.Background(), key, time.Now())
		done <- v
	}()
	await.Until(t, "the read to start", f.reads.Load, func(n int64) bool { return n > 0 })
	c.Invalidate(key) // the change commits while the old value is being read
	f.mu.Lock()
	close(f.block)
	f.block = nil
	f.mu.Unlock()
	<-done
	f.set(key, "https://example.com/b")
	if v, _ := get(t, c, key, time.Now()); v != "https://example.com/b" {
		t.Fatalf("served %q: a read older than the invalidation was cached", v)
	}
}

func TestConcurrentMissesShareOneRead(t *testing.T) {
	c, f := newTestCache(Config{})
	f.block = make(chan struct{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { get(t, c, key, time.Now()) })
	}
	await.Until(t, "the read to start", f.reads.Load, func(n int64) bool { return n > 0 })
	f.mu.Lock()
	close(f.block)
	f.block = nil
	f.mu.Unlock()
	wg.Wait()
	// Lookups that arrive while the read is in flight join it; later ones find its result cached. (One that
	// missed the cache just as the read ended may start a second.)
	if n := f.reads.Load(); n > 2 {
		t.Fatalf("%d reads for 50 concurrent misses", n)
	}
}

// Untrusted entries are read again on every lookup; when that read fails, the last known value is served.
func TestUntrustedEntriesAreRevalidatedAndServedStaleOnlyOnError(t *testing.T) {
	c, f := newTestCache(Config{})
	now := time.Now()
	get(t, c, key, now)
	c.SetTrusted(false)
	get(t, c, key, now)
	get(t, c, key, now)
	if f.reads.Load() != 3 {
		t.Fatalf("%d reads; untrusted entries must be read again", f.reads.Load())
	}
	f.fail.Store(true)
	if v, found := get(t, c, key, now); !found || v != "https://example.com/a" {
		t.Fatalf("with the database down: %q, %v; want the last known link", v, found)
	}
	reads := f.reads.Load()
	get(t, c, key, now.Add(100*time.Millisecond))
	if f.reads.Load() != reads {
		t.Fatal("the database was tried again within the failure backoff")
	}
	if _, _, err := c.Get(context.Background(), store.LinkKey{Domain: "sb.test", SlugKey: "never-seen"}, now.Add(2*time.Second)); err == nil {
		t.Fatal("an uncached link without a database answered")
	}
}

func TestSizeIsBounded(t *testing.T) {
	c, f := newTestCache(Config{Size: 128})
	for i := range 1000 {
		k := store.LinkKey{Domain: "sb.test", SlugKey: string(rune('a'+i%26)) + string(rune(i))}
		f.set(k, "https://example.com/")
		get(t, c, k, time.Now())
	}
	if n := c.Len(); n > 128+shardCount {
		t.Fatalf("%d entries, bound 128 (+1 per shard)", n)
	}
}

// Run on PostgreSQL: a change announced by another process drops the entry; the cache is trusted only while the
// listener is connected.
func TestRunHearsOtherProcesses(t *testing.T) {
	db := storetest.Postgres(t)
	other, err := store.Open(context.Background(), storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	f := &fakeDB{links: map[store.LinkKey]string{key: "https://example.com/a"}}
	c := New(f.load, db.LinkChanges, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	await.Equal(t, "the listener", c.trusted.Load, true)

	get(t, c, key, time.Now())
	f.set(key, "https://example.com/b")
	if err := other.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return other.LinkChanges.Announce(ctx, tx, key)
	}); err != nil {
		t.Fatal(err)
	}
	await.Equal(t, "the notification", func() string {
		v, _ := get(t, c, key, time.Now())
		return v
	}, "https://example.com/b")
}

func TestRunOnSQLiteTrustsAtOnceAndHearsThisProcess(t *testing.T) {
	db := storetest.SQLite(t)
	f := &fakeDB{links: map[store.LinkKey]string{key: "https://example.com/a"}}
	c := New(f.load, db.LinkChanges, Config{})
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.trusted.Load() {
		t.Fatal("not trusted on SQLite")
	}
	get(t, c, key, time.Now())
	f.set(key, "https://example.com/b")
	db.LinkChanges.Published(key)
	if v, _ := get(t, c, key, time.Now()); v != "https://example.com/b" {
		t.Fatalf("after Published: %q", v)
	}
}
