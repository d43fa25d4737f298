package ratelimit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/ratelimit"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// perMinute is the shape of the server's policies: 60 requests a minute, one every second.
var perMinute = ratelimit.Policy{Name: "key", Quota: 60, Window: time.Minute}

// drain takes n requests at now and fails unless all are allowed.
func drain(t *testing.T, l ratelimit.Limiter, key string, p ratelimit.Policy, n int, now time.Time) {
	t.Helper()
	for i := range n {
		if d := l.Take(key, p, now); !d.Allowed {
			t.Fatalf("request %d of %d refused: %+v", i+1, n, d)
		}
	}
}

func TestFreshKeyGetsTheWholeQuotaAtOnce(t *testing.T) {
	policies := []ratelimit.Policy{
		{Quota: 1, Window: time.Second},
		{Quota: 3, Window: time.Second}, // the interval does not divide the window exactly
		perMinute,
		{Quota: 600, Window: time.Minute},
		{Quota: 3000, Window: time.Minute},
		{Quota: 7, Window: time.Hour},
	}
	for _, p := range policies {
		t.Run(fmt.Sprintf("%d per %v", p.Quota, p.Window), func(t *testing.T) {
			l := ratelimit.New()
			drain(t, l, "k", p, p.Quota, t0)
			d := l.Take("k", p, t0)
			if d.Allowed {
				t.Fatalf("request %d allowed, want a refusal", p.Quota+1)
			}
			interval := p.Window / time.Duration(p.Quota)
			if d.RetryAfter < interval-time.Millisecond || d.RetryAfter > interval+time.Millisecond {
				t.Errorf("RetryAfter = %v, want ≈ Window/Quota = %v", d.RetryAfter, interval)
			}
			if d.Remaining != 0 {
				t.Errorf("refusal has Remaining = %d, want 0", d.Remaining)
			}
			if d.Reset < p.Window-time.Millisecond || d.Reset > p.Window {
				t.Errorf("refusal has Reset = %v, want ≈ the whole window %v", d.Reset, p.Window)
			}
		})
	}
}

func TestRemainingCountsDown(t *testing.T) {
	p := ratelimit.Policy{Quota: 5, Window: 5 * time.Second}
	l := ratelimit.New()
	for i, want := range []struct {
		remaining int
		reset     time.Duration
	}{{4, 1 * time.Second}, {3, 2 * time.Second}, {2, 3 * time.Second}, {1, 4 * time.Second}, {0, 5 * time.Second}} {
		d := l.Take("k", p, t0)
		if !d.Allowed || d.Remaining != want.remaining || d.Reset != want.reset || d.RetryAfter != 0 {
			t.Errorf("request %d = %+v, want allowed with Remaining %d, Reset %v and no RetryAfter",
				i+1, d, want.remaining, want.reset)
		}
	}
}

func TestTokensRefillOverTime(t *testing.T) {
	p := ratelimit.Policy{Quota: 10, Window: 10 * time.Second} // one token a second
	l := ratelimit.New()
	drain(t, l, "k", p, 10, t0)

	steps := []struct {
		at         time.Duration // since t0
		allowed    bool
		remaining  int
		retryAfter time.Duration
	}{
		{0, false, 0, time.Second},
		{999 * time.Millisecond, false, 0, time.Millisecond},
		{time.Second, true, 0, 0}, // one token back, spent at once
		{time.Second, false, 0, time.Second},
		{3500 * time.Millisecond, true, 1, 0}, // 2.5 tokens back: one spent, one left whole
		{3500 * time.Millisecond, true, 0, 0},
		{3500 * time.Millisecond, false, 0, 500 * time.Millisecond},
		{time.Hour, true, 9, 0}, // long idle: the quota is full again, never more
	}
	for _, s := range steps {
		d := l.Take("k", p, t0.Add(s.at))
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.RetryAfter != s.retryAfter {
			t.Errorf("Take at t0+%v = %+v, want Allowed %v, Remaining %d, RetryAfter %v",
				s.at, d, s.allowed, s.remaining, s.retryAfter)
		}
	}
}

func TestIdleKeyDoesNotBankMoreThanTheQuota(t *testing.T) {
	p := ratelimit.Policy{Quota: 5, Window: time.Second}
	l := ratelimit.New()
	l.Take("k", p, t0)
	later := t0.Add(24 * time.Hour)
	drain(t, l, "k", p, 5, later)
	if d := l.Take("k", p, later); d.Allowed {
		t.Errorf("request 6 after a day of idleness allowed, want the burst capped at the quota")
	}
}

func TestPeekDoesNotSpend(t *testing.T) {
	p := ratelimit.Policy{Quota: 3, Window: 3 * time.Second}
	l := ratelimit.New()

	for range 10 {
		if d := l.Peek("k", p, t0); !d.Allowed {
			t.Fatalf("Peek on a fresh key = %+v, want allowed", d)
		}
	}
	drain(t, l, "k", p, 2, t0)
	peek := l.Peek("k", p, t0)
	take := l.Take("k", p, t0)
	// Peek reports what is left now; Take what is left after the request it spends.
	if !peek.Allowed || !take.Allowed || peek.Remaining != 1 || take.Remaining != 0 {
		t.Errorf("Peek = %+v, then Take = %+v: want both allowed, 1 left before and 0 after", peek, take)
	}
	peek = l.Peek("k", p, t0)
	take = l.Take("k", p, t0)
	if peek != take || peek.Allowed {
		t.Errorf("over quota: Peek = %+v, Take = %+v, want the same refusal", peek, take)
	}
}

func TestRefundGivesOneBack(t *testing.T) {
	p := ratelimit.Policy{Quota: 3, Window: 3 * time.Second}
	l := ratelimit.New()
	drain(t, l, "k", p, 3, t0)
	l.Refund("k", p)
	if d := l.Take("k", p, t0); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Take after Refund = %+v, want allowed with nothing left", d)
	}
	if d := l.Take("k", p, t0); d.Allowed {
		t.Errorf("a single Refund gave back more than one request: %+v", d)
	}
}

func TestRefundUndoesATake(t *testing.T) {
	p := ratelimit.Policy{Quota: 5, Window: 5 * time.Second}
	l := ratelimit.New()
	l.Take("k", p, t0)
	second := l.Take("k", p, t0)
	l.Refund("k", p)
	if again := l.Take("k", p, t0); again != second {
		t.Errorf("Take after Refund = %+v, want the refunded Take's decision %+v again", again, second)
	}
}

func TestRefundOfAnUnseenKeyChangesNothing(t *testing.T) {
	p := ratelimit.Policy{Quota: 2, Window: 2 * time.Second}
	l := ratelimit.New()
	l.Refund("k", p)
	drain(t, l, "k", p, 2, t0)
	if d := l.Take("k", p, t0); d.Allowed {
		t.Errorf("a Refund before any Take raised the quota: %+v", d)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	p := ratelimit.Policy{Quota: 2, Window: time.Minute}
	l := ratelimit.New()
	drain(t, l, "k:key_a", p, 2, t0)
	if d := l.Take("k:key_a", p, t0); d.Allowed {
		t.Fatalf("key_a allowed past its quota")
	}
	for i := range 1000 { // enough keys to land in every shard
		key := fmt.Sprintf("k:key_%d", i)
		if d := l.Take(key, p, t0); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s after key_a was exhausted: %+v, want a fresh quota", key, d)
		}
	}
	if d := l.Take("w:key_a", p, t0); !d.Allowed {
		t.Errorf("another key that shares a suffix was limited: %+v", d)
	}
}

// Keys whose quota is fully restored are forgotten every few thousand operations; forgetting must never hand out
// a fresh quota to a key that is still limited.
func TestSweepKeepsLimitedKeys(t *testing.T) {
	p := ratelimit.Policy{Quota: 2, Window: time.Hour}
	l := ratelimit.New()
	drain(t, l, "limited", p, 2, t0)
	now := t0.Add(time.Minute)
	others := make([]string, 1000)
	for i := range others {
		others[i] = fmt.Sprintf("other_%d", i)
	}
	burst := ratelimit.Policy{Quota: 1000, Window: time.Millisecond}
	for i := range 64 * 4096 * 2 { // every shard sweeps at least once
		l.Take(others[i%len(others)], burst, now)
	}
	if d := l.Take("limited", p, now); d.Allowed {
		t.Errorf("a limited key was allowed after sweeps: %+v", d)
	}
}

// A policy whose interval rounds to zero (a zero window, or a quota above the window in nanoseconds: a
// misconfiguration) must not take the server down: Take runs on every request.
func TestDegeneratePolicyDoesNotPanic(t *testing.T) {
	for _, p := range []ratelimit.Policy{
		{Name: "zero window", Quota: 10, Window: 0},
		{Name: "quota above window", Quota: 2_000_000, Window: time.Millisecond},
	} {
		t.Run(p.Name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Take panicked: %v", r)
				}
			}()
			l := ratelimit.New()
			l.Take("k", p, t0)
			l.Peek("k", p, t0)
		})
	}
}

func TestConcurrentTakeNeverExceedsTheQuota(t *testing.T) {
	p := ratelimit.Policy{Quota: 100, Window: time.Minute}
	l := ratelimit.New()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 32 {
		own := fmt.Sprintf("own_%d", g) // traffic on other keys, in other shards, meanwhile
		wg.Go(func() {
			<-start
			for range 50 {
				if l.Take("shared", p, t0).Allowed {
					allowed.Add(1)
				}
				l.Take(own, p, t0)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := allowed.Load(); got != int64(p.Quota) {
		t.Errorf("%d goroutines × 50 Takes at one instant allowed %d, want exactly the quota %d", 32, got, p.Quota)
	}
}
