// Package ratelimit is Switchboard's in-process rate limiter: GCRA (the generic cell rate algorithm) per key,
// which allows a burst of the whole quota and then refills smoothly, with one timestamp of state per key.
package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// Policy is a quota of requests per window, named as in the RateLimit-Policy header ("key", "workspace").
type Policy struct {
	Name   string
	Quota  int
	Window time.Duration
}

// Decision is the outcome of one Take.
type Decision struct {
	Allowed bool
	// Remaining is how many more requests would be allowed right now.
	Remaining int
	// Reset is how long until the quota is fully restored.
	Reset time.Duration
	// RetryAfter is how long until one request is allowed again (zero when Allowed).
	RetryAfter time.Duration
}

const shards = 64

// Limiter tracks any number of keys; it is safe for concurrent use.
type Limiter struct {
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu  sync.Mutex
	tat map[string]time.Time // theoretical arrival time of the next request
	ops int
}

// New returns an empty Limiter.
func New() *Limiter {
	l := &Limiter{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].tat = map[string]time.Time{}
	}
	return l
}

// Take spends one request of key's quota under policy p at time now, if the quota allows it.
func (l *Limiter) Take(key string, p Policy, now time.Time) Decision {
	return l.take(key, p, now, false)
}

// Peek reports whether Take would allow a request and how many requests are left now, without spending anything.
func (l *Limiter) Peek(key string, p Policy, now time.Time) Decision {
	return l.take(key, p, now, true)
}

// Refund gives back one request taken by Take (used when a second policy refuses the request).
func (l *Limiter) Refund(key string, p Policy) {
	s := l.shard(key)
	s.mu.Lock()
	if tat, ok := s.tat[key]; ok {
		s.tat[key] = tat.Add(-interval(p))
	}
	s.mu.Unlock()
}

func interval(p Policy) time.Duration {
	if p.Quota <= 0 {
		return max(p.Window, time.Nanosecond)
	}
	// Never zero: Take divides by it.
	return max(p.Window/time.Duration(p.Quota), time.Nanosecond)
}

func (l *Limiter) shard(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%shards]
}

func (l *Limiter) take(key string, p Policy, now time.Time, peek bool) Decision {
	t := interval(p)
	s := l.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, ok := s.tat[key]
	if !ok || tat.Before(now) {
		tat = now
	}
	next := tat.Add(t)
	// A request is allowed while the backlog after it stays within one window.
	if allowAt := next.Add(-p.Window); now.Before(allowAt) {
		return Decision{Remaining: 0, Reset: tat.Sub(now), RetryAfter: allowAt.Sub(now)}
	}
	if peek {
		// What is left now, without the request Take would add.
		return Decision{Allowed: true, Remaining: int((p.Window - tat.Sub(now)) / t), Reset: tat.Sub(now)}
	}
	{
		s.tat[key] = next
		s.ops++
		if s.ops >= 4096 {
			s.ops = 0
			s.sweep(now)
		}
	}
	return Decision{Allowed: true, Remaining: int((p.Window - next.Sub(now)) / t), Reset: next.Sub(now)}
}

// sweep drops keys whose quota is fully restored: they are the same as unseen keys.
func (s *shard) sweep(now time.Time) {
	for k, tat := range s.tat {
		if !tat.After(now) {
			delete(s.tat, k)
		}
	}
}
