package apikey

// An internal test: the Verifier's clock is the unexported now field, so TTL and last-use throttling are tested
// without sleeping.

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
)

// fakeStore is an in-memory Store that counts its calls.
type fakeStore struct {
	mu           sync.Mutex
	keys         map[string]store.APIKey // by hash
	version      uint64
	versionCalls int
	byHashCalls  int
	versionErr   error
	byHashErr    error
	touchErr     error
	touches      []map[string]time.Time
	touched      chan struct{} // receives after every TouchLastUsed
	watchEnded   bool
}

func newFakeStore() *fakeStore {
	return &fakeStore{keys: map[string]store.APIKey{}, version: 1, touched: make(chan struct{}, 100)}
}

func (s *fakeStore) ByHash(_ context.Context, hash string) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byHashCalls++
	if s.byHashErr != nil {
		return store.APIKey{}, s.byHashErr
	}
	k, ok := s.keys[hash]
	if !ok {
		return store.APIKey{}, store.ErrNotFound
	}
	return k, nil
}

func (s *fakeStore) KeysVersion(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versionCalls++
	return s.version, s.versionErr
}

// Watch blocks until ctx ends, as the PostgreSQL watch does, and records that it returned.
func (s *fakeStore) Watch(ctx context.Context) {
	<-ctx.Done()
	s.mu.Lock()
	s.watchEnded = true
	s.mu.Unlock()
}

func (s *fakeStore) TouchLastUsed(_ context.Context, used map[string]time.Time) error {
	s.mu.Lock()
	s.touches = append(s.touches, used)
	err := s.touchErr
	s.mu.Unlock()
	s.touched <- struct{}{}
	return err
}

// add stores a key for a new secret and returns the secret.
func (s *fakeStore) add(t *testing.T, k store.APIKey) string {
	t.Helper()
	secret, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k.SecretHash = secret.Hash
	s.keys[secret.Hash] = k
	return secret.Plain
}

// change edits a stored key; bump also changes KeysVersion, as the real store does on every change it announces.
func (s *fakeStore) change(plain string, bump bool, edit func(*store.APIKey)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[Hash(plain)]
	edit(&k)
	s.keys[Hash(plain)] = k
	if bump {
		s.version++
	}
}

func (s *fakeStore) calls() (version, byHash int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versionCalls, s.byHashCalls
}

// lastUse lists every (key ID, time) written by TouchLastUsed, in order of the calls.
func (s *fakeStore) lastUse() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Time
	for _, batch := range s.touches {
		for _, t := range batch {
			out = append(out, t)
		}
	}
	return out
}

// waitTouch waits for the next TouchLastUsed call of the background writer.
func (s *fakeStore) waitTouch(t *testing.T) {
	t.Helper()
	await.Receive(t, "a TouchLastUsed call", s.touched)
}

// clock is a manual clock for the Verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const ttl = 30 * time.Second

// running is a Verifier whose Run runs until stop (or the end of the test).
type running struct {
	*Verifier
	stop func()
}

func newTestVerifier(t *testing.T, s *fakeStore) (running, *clock) {
	t.Helper()
	c := &clock{t: t0}
	v := NewVerifier(s, ttl, slog.New(slog.DiscardHandler))
	v.now = c.now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return running{v, stop}, c
}

func verify(t *testing.T, v running, plain string) Key {
	t.Helper()
	k, err := v.Verify(context.Background(), plain)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return k
}

func wantLookups(t *testing.T, s *fakeStore, want int) {
	t.Helper()
	if _, got := s.calls(); got != want {
		t.Errorf("ByHash was called %d times, want %d", got, want)
	}
}

func TestVerifyReturnsWhatTheStoreKnows(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	expires := t0.Add(time.Hour)
	plain := s.add(t, store.APIKey{
		ID: "key_1", WorkspaceID: "ws_1", Name: "deploy", Scopes: []string{"links:write"}, ExpiresAt: &expires,
		Workspace: &store.Workspace{ID: "ws_1", EnabledModels: []string{"gpt-4o"}},
	})
	got := verify(t, v, plain)
	if got.ID != "key_1" || got.WorkspaceID != "ws_1" || got.Name != "deploy" ||
		!slices.Equal(got.Scopes, []string{"links:write"}) || got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) ||
		got.RevokedAt != nil || !slices.Equal(got.EnabledModels, []string{"gpt-4o"}) {
		t.Errorf("Verify = %+v", got)
	}
}

func TestVerifyEnabledModels(t *testing.T) {
	tests := []struct {
		name      string
		workspace *store.Workspace
		want      []string
	}{
		{"all models", &store.Workspace{ID: "ws_1"}, nil},
		{"none", &store.Workspace{ID: "ws_1", EnabledModels: []string{}}, []string{}},
		{"some", &store.Workspace{ID: "ws_1", EnabledModels: []string{"a", "b"}}, []string{"a", "b"}},
		{"workspace not loaded", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeStore()
			v, _ := newTestVerifier(t, s)
			plain := s.add(t, store.APIKey{ID: "key_1", WorkspaceID: "ws_1", Workspace: tt.workspace})
			got := verify(t, v, plain).EnabledModels
			if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
				t.Errorf("EnabledModels = %#v, want %#v (nil means all, empty means none)", got, tt.want)
			}
		})
	}
}

func TestVerifyMalformedNeverTouchesTheStore(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	good := s.add(t, store.APIKey{ID: "key_1"})
	last := byte('0')
	if good[len(good)-1] == '0' {
		last = '1'
	}
	bad := good[:len(good)-1] + string(last) // wrong checksum
	for _, plain := range []string{"", "Bearer " + good, "sb_sk_", "sk_live_123", bad} {
		if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrMalformed) {
			t.Errorf("Verify(%q) = %v, want ErrMalformed", plain, err)
		}
	}
	if version, byHash := s.calls(); version != 0 || byHash != 0 {
		t.Errorf("malformed keys made %d KeysVersion and %d ByHash calls, want none", version, byHash)
	}
}

func TestVerifyUnknownKeyIsNotCached(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	secret, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := v.Verify(context.Background(), secret.Plain); !errors.Is(err, ErrUnknown) {
			t.Fatalf("Verify(unknown) = %v, want ErrUnknown", err)
		}
	}
	wantLookups(t, s, 2)

	// A key created after a failed attempt works at once.
	s.mu.Lock()
	s.keys[secret.Hash] = store.APIKey{ID: "key_new"}
	s.mu.Unlock()
	if got := verify(t, v, secret.Plain); got.ID != "key_new" {
		t.Errorf("Verify = %+v, want key_new", got)
	}
}

func TestVerifyCachesWhileVersionAndTTLHold(t *testing.T) {
	s := newFakeStore()
	v, c := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})

	verify(t, v, plain)
	wantLookups(t, s, 1)
	for range 5 {
		c.advance(ttl / 5) // reaches the TTL exactly: still fresh
		verify(t, v, plain)
	}
	wantLookups(t, s, 1)
	if version, _ := s.calls(); version != 6 {
		t.Errorf("KeysVersion was called %d times, want once per Verify (6)", version)
	}

	c.advance(time.Nanosecond) // past the TTL
	verify(t, v, plain)
	wantLookups(t, s, 2)
	verify(t, v, plain)
	wantLookups(t, s, 2)
}

func TestVerifyRereadsWhenTheVersionChanges(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1", Scopes: []string{"links:read"}})
	verify(t, v, plain)

	s.change(plain, true, func(k *store.APIKey) { k.Scopes = []string{"links:write"} })
	if got := verify(t, v, plain); !slices.Equal(got.Scopes, []string{"links:write"}) {
		t.Errorf("after a version change Scopes = %q, want the re-read [links:write]", got.Scopes)
	}
	wantLookups(t, s, 2)
}

func TestVerifyRevocation(t *testing.T) {
	s := newFakeStore()
	v, c := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	verify(t, v, plain)

	revoked := t0
	s.change(plain, true, func(k *store.APIKey) { k.RevokedAt = &revoked })
	for range 2 { // the revoked key is cached as revoked
		k, err := v.Verify(context.Background(), plain)
		if !errors.Is(err, ErrRevoked) {
			t.Fatalf("Verify after revocation = %v, want ErrRevoked", err)
		}
		if k.ID != "key_1" || k.RevokedAt == nil {
			t.Errorf("Verify returned %+v with ErrRevoked, want the key and its revocation time", k)
		}
	}
	wantLookups(t, s, 2)

	// Past the TTL it is read again and still revoked.
	c.advance(ttl + time.Second)
	if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify after TTL = %v, want ErrRevoked", err)
	}
	wantLookups(t, s, 3)
}

// Without an announced change a cached key is trusted until its TTL: the TTL bounds how late a missed
// revocation shows up.
func TestVerifyUnannouncedRevocationShowsUpAfterTTL(t *testing.T) {
	s := newFakeStore()
	v, c := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	verify(t, v, plain)

	revoked := t0
	s.change(plain, false, func(k *store.APIKey) { k.RevokedAt = &revoked })
	verify(t, v, plain)
	c.advance(ttl + time.Nanosecond)
	if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify past the TTL = %v, want ErrRevoked", err)
	}
}

func TestVerifyForget(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	revoked := t0

	tests := []struct {
		name string
		arg  string
	}{
		{"by plain key", plain},
		{"by hash", Hash(plain)},
	}
	lookups := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.change(plain, false, func(k *store.APIKey) { k.RevokedAt = nil })
			v.Forget(plain)
			verify(t, v, plain)
			lookups++
			s.change(plain, false, func(k *store.APIKey) { k.RevokedAt = &revoked })
			v.Forget(tt.arg)
			if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrRevoked) {
				t.Errorf("Verify after Forget(%s) = %v, want ErrRevoked", tt.name, err)
			}
			lookups++
			wantLookups(t, s, lookups)
		})
	}
}

func TestVerifyKeyDeletedAfterCaching(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	verify(t, v, plain)

	s.mu.Lock()
	delete(s.keys, Hash(plain))
	s.version++
	s.mu.Unlock()
	for range 2 {
		if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrUnknown) {
			t.Fatalf("Verify of a deleted key = %v, want ErrUnknown", err)
		}
	}
	wantLookups(t, s, 3)
}

func TestVerifyExpiry(t *testing.T) {
	tests := []struct {
		name    string
		expires time.Duration // after t0
		wantErr error
	}{
		{"expires later", time.Second, nil},
		{"expires at this instant", 0, ErrExpired},
		{"expired", -time.Second, ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeStore()
			v, _ := newTestVerifier(t, s)
			expires := t0.Add(tt.expires)
			plain := s.add(t, store.APIKey{ID: "key_1", ExpiresAt: &expires})
			k, err := v.Verify(context.Background(), plain)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify = %v, want %v", err, tt.wantErr)
			}
			if k.ID != "key_1" {
				t.Errorf("Verify returned %+v, want the key", k)
			}
		})
	}
}

// A cached key expires on time: expiry is checked on every Verify, not only when the key is read.
func TestVerifyCachedKeyExpires(t *testing.T) {
	s := newFakeStore()
	v, c := newTestVerifier(t, s)
	expires := t0.Add(ttl / 2)
	plain := s.add(t, store.APIKey{ID: "key_1", ExpiresAt: &expires})
	verify(t, v, plain)
	c.advance(ttl / 2)
	if _, err := v.Verify(context.Background(), plain); !errors.Is(err, ErrExpired) {
		t.Errorf("Verify at the expiry = %v, want ErrExpired", err)
	}
	wantLookups(t, s, 1)
}

func TestVerifyStoreErrors(t *testing.T) {
	boom := errors.New("database is down")
	tests := []struct {
		name string
		fail func(*fakeStore)
	}{
		{"KeysVersion fails", func(s *fakeStore) { s.versionErr = boom }},
		{"ByHash fails", func(s *fakeStore) { s.byHashErr = boom }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeStore()
			v, _ := newTestVerifier(t, s)
			plain := s.add(t, store.APIKey{ID: "key_1"})
			tt.fail(s)
			_, err := v.Verify(context.Background(), plain)
			if !errors.Is(err, boom) {
				t.Fatalf("Verify = %v, want the store's error", err)
			}
			for _, sentinel := range []error{ErrMalformed, ErrUnknown, ErrRevoked, ErrExpired, store.ErrNotFound} {
				if errors.Is(err, sentinel) {
					t.Errorf("a store failure reads as %v", sentinel)
				}
			}
		})
	}
}

func TestVerifyRefusedKeysAreNotMarkedUsed(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	revoked, expired := t0, t0
	for _, k := range []store.APIKey{{ID: "key_revoked", RevokedAt: &revoked}, {ID: "key_expired", ExpiresAt: &expired}} {
		plain := s.add(t, k)
		if _, err := v.Verify(context.Background(), plain); err == nil {
			t.Fatalf("Verify(%s) succeeded", k.ID)
		}
	}
	v.stop()
	if got := s.lastUse(); len(got) != 0 {
		t.Errorf("refused keys were marked used at %v", got)
	}
}

func TestLastUsedIsWrittenAtMostOnceAMinute(t *testing.T) {
	s := newFakeStore()
	v, c := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})

	steps := []struct {
		after time.Duration // since the previous step
		write bool
	}{
		{0, true}, // first use
		{time.Second, false},
		{58 * time.Second, false}, // 59 s after the written use
		{time.Second, true},       // a full minute
		{30 * time.Second, false},
		{31 * time.Second, true},
		{time.Hour, true},
	}
	var want []time.Time
	for i, step := range steps {
		c.advance(step.after)
		verify(t, v, plain)
		if step.write {
			s.waitTouch(t)
			want = append(want, c.now())
		}
		if got := s.lastUse(); !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("after step %d last-use writes = %v, want %v", i, got, want)
		}
	}
	v.stop()
	if got := s.lastUse(); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("after stop last-use writes = %v, want %v", got, want)
	}
}

func TestLastUsedIsPerKey(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	a := s.add(t, store.APIKey{ID: "key_a"})
	b := s.add(t, store.APIKey{ID: "key_b"})
	verify(t, v, a)
	verify(t, v, b)
	verify(t, v, a)
	v.stop()

	s.mu.Lock()
	defer s.mu.Unlock()
	written := map[string]int{}
	for _, batch := range s.touches {
		for id, at := range batch {
			written[id]++
			if !at.Equal(t0) {
				t.Errorf("%s written with %v, want %v", id, at, t0)
			}
		}
	}
	if written["key_a"] != 1 || written["key_b"] != 1 || len(written) != 2 {
		t.Errorf("last-use writes per key = %v, want one each for key_a and key_b", written)
	}
}

func TestStopFlushesPendingLastUse(t *testing.T) {
	for range 20 { // stopping races the background writer: either one must write the use
		s := newFakeStore()
		v, _ := newTestVerifier(t, s)
		plain := s.add(t, store.APIKey{ID: "key_1"})
		verify(t, v, plain)
		v.stop()
		if got := s.lastUse(); len(got) != 1 || !got[0].Equal(t0) {
			t.Fatalf("after stop last-use writes = %v, want [%v]", got, t0)
		}
	}
}

// Run returns once stopped, and only after the store's watch has returned.
func TestRunStopsTheWatch(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	v.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.watchEnded {
		t.Error("Run returned before the store's watch")
	}
}

// A failed write is not lost: the next use writes again instead of waiting a minute.
func TestLastUsedRetriedAfterAFailedWrite(t *testing.T) {
	s := newFakeStore()
	s.touchErr = errors.New("database is locked")
	v, c := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	verify(t, v, plain)
	s.waitTouch(t)

	s.mu.Lock()
	s.touchErr = nil
	s.mu.Unlock()
	// The writer forgets the key right after the failed call returns; use the key until it writes again.
	await.Until(t, "a second last-use write after a failed one", func() int {
		c.advance(time.Millisecond)
		verify(t, v, plain)
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.touches)
	}, func(writes int) bool { return writes >= 2 })
}

func TestVerifyConcurrently(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	plains := []string{s.add(t, store.APIKey{ID: "key_a"}), s.add(t, store.APIKey{ID: "key_b"})}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 200 {
				if j == 100 && i == 0 {
					s.change(plains[0], true, func(*store.APIKey) {})
				}
				if _, err := v.Verify(context.Background(), plains[(i+j)%2]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestVerifyHashSharesTheCache: a key verified by its plain text is found by its hash without a lookup, and the
// other way round; a hash in any other form than Hash's is no key's, and touches nothing.
func TestVerifyHashSharesTheCache(t *testing.T) {
	s := newFakeStore()
	v, _ := newTestVerifier(t, s)
	plain := s.add(t, store.APIKey{ID: "key_1"})
	other := s.add(t, store.APIKey{ID: "key_2"})

	verify(t, v, plain)
	k, err := v.VerifyHash(context.Background(), Hash(plain))
	if err != nil || k.ID != "key_1" || k.Hash != Hash(plain) {
		t.Fatalf("VerifyHash = %+v, %v", k, err)
	}
	wantLookups(t, s, 1)

	if k, err := v.VerifyHash(context.Background(), Hash(other)); err != nil || k.ID != "key_2" {
		t.Fatalf("VerifyHash = %+v, %v", k, err)
	}
	wantLookups(t, s, 2)
	if k := verify(t, v, other); k.Hash != Hash(other) {
		t.Errorf("Hash = %q", k.Hash)
	}
	wantLookups(t, s, 2)

	for _, h := range []string{strings.ToUpper(Hash(plain)), Hash(plain)[1:], Hash(plain) + "0", "", "zz" + Hash(plain)[2:]} {
		if _, err := v.VerifyHash(context.Background(), h); !errors.Is(err, ErrUnknown) {
			t.Errorf("VerifyHash(%q) = %v, want ErrUnknown", h, err)
		}
	}
	wantLookups(t, s, 2)
}
