// Package ratelimit is Switchboard's rate limiting: GCRA (the generic cell rate algorithm) per key, which allows a
// burst of the whole quota and then refills smoothly, with one timestamp of state per key. Local keeps that state in
// the process; package redislimit keeps it in Redis, shared by every replica, behind the same Limiter interface.
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

// Request names one quota: a key under a policy.
type Request struct {
	Key    string
	Policy Policy
}

// Limiter decides requests against quotas. Implementations are safe for concurrent use, and never fail: a limiter
// that cannot reach its shared state decides in process instead.
type Limiter interface {
	// Take spends one request of key's quota under policy p at time now, if the quota allows it.
	Take(key string, p Policy, now time.Time) Decision
	// Peek reports whether Take would allow a request and how many requests are left now, without spending anything.
	Peek(key string, p Policy, now time.Time) Decision
	// Refund gives back one request taken by Take.
	Refund(key string, p Policy)
	// TakeAll spends one request of every quota of reqs when all of them allow it, and nothing otherwise. ds (as
	// long as reqs) receives each quota's decision: what is left after the spend, or — when any quota refused —
	// what is left now, with Allowed false and RetryAfter set on those that refused.
	TakeAll(reqs []Request, now time.Time, ds []Decision)
}

const shards = 64

// Local is the in-process Limiter; it tracks any number of keys.
type Local struct {
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu  sync.Mutex
	tat map[string]time.Time // theoretical arrival time of the next request
	ops int
}

var _ Limiter = (*Local)(nil)

// New returns an empty in-process limiter.
func New() *Local {
	l := &Local{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].tat = map[string]time.Time{}
	}
	return l
}

// Take spends one request of key's quota under policy p at time now, if the quota allows it.
func (l *Local) Take(key string, p Policy, now time.Time) Decision {
	return l.take(key, p, now, false)
}

// Peek reports whether Take would allow a request and how many requests are left now, without spending anything.
func (l *Local) Peek(key string, p Policy, now time.Time) Decision {
	return l.take(key, p, now, true)
}

// Refund gives back one request taken by Take (used when a second policy refuses the request).
func (l *Local) Refund(key string, p Policy) {
	s := l.shard(key)
	s.mu.Lock()
	if tat, ok := s.tat[key]; ok {
		s.tat[key] = tat.Add(-interval(p))
	}
	s.mu.Unlock()
}

// TakeAll takes the quotas in order; when one refuses, those taken before it are refunded and those after it are
// only peeked at.
func (l *Local) TakeAll(reqs []Request, now time.Time, ds []Decision) {
	for i, r := range reqs {
		if ds[i] = l.Take(r.Key, r.Policy, now); ds[i].Allowed {
			continue
		}
		for j := range i {
			l.Refund(reqs[j].Key, reqs[j].Policy)
			ds[j].Remaining++
		}
		for j := i + 1; j < len(reqs); j++ {
			ds[j] = l.Peek(reqs[j].Key, reqs[j].Policy, now)
		}
		return
	}
}

func interval(p Policy) time.Duration {
	if p.Quota <= 0 {
		return max(p.Window, time.Nanosecond)
	}
	// Never zero: Take divides by it.
	return max(p.Window/time.Duration(p.Quota), time.Nanosecond)
}

func (l *Local) shard(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%shards]
}

func (l *Local) take(key string, p Policy, now time.Time, peek bool) Decision {
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

// Nonces remembers single-use tokens, such as the console's key-creation form nonces, for a while: a token can be
// claimed once until it is released or forgotten.
type Nonces interface {
	// Claim records token; false when it was claimed already.
	Claim(token string) bool
	// Release makes a claimed token usable again (its use made nothing).
	Release(token string)
}

// NonceLifetime is how long a claimed token is remembered.
const NonceLifetime = 24 * time.Hour

// LocalNonces is the in-process Nonces.
type LocalNonces struct {
	mu      sync.Mutex
	claimed map[string]time.Time
}

var _ Nonces = (*LocalNonces)(nil)

// NewNonces returns an empty in-process nonce set.
func NewNonces() *LocalNonces { return &LocalNonces{claimed: map[string]time.Time{}} }

// Claim records token; false when it was claimed in the last NonceLifetime.
func (n *LocalNonces) Claim(token string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if len(n.claimed) > 10_000 {
		for t, at := range n.claimed {
			if now.Sub(at) > NonceLifetime {
				delete(n.claimed, t)
			}
		}
	}
	if at, used := n.claimed[token]; used && now.Sub(at) <= NonceLifetime {
		return false
	}
	n.claimed[token] = now
	return true
}

// Release forgets token.
func (n *LocalNonces) Release(token string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.claimed, token)
}
