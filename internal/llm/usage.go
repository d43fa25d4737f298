package llm

import (
	"sync"
	"time"
)

// Limits are the quotas of one workspace's completions: requests and tokens (prompt and completion together, as
// the upstream's `usage` counts them) per minute and per UTC day. Zero is no limit.
type Limits struct {
	RequestsPerMinute, RequestsPerDay int
	TokensPerMinute, TokensPerDay     int
}

// The policy names of Limits, as a refusal reports them (the problem's violated-policies).
const (
	PolicyRequestsMinute = "model_requests_per_minute"
	PolicyRequestsDay    = "model_requests_per_day"
	PolicyTokensMinute   = "model_tokens_per_minute"
	PolicyTokensDay      = "model_tokens_per_day"
)

// LimitError refuses a completion: a quota of the workspace is spent until RetryAfter has passed.
type LimitError struct {
	Policies   []string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return "model quota exhausted: " + e.Policies[0] }

// usage counts each workspace's requests and tokens in fixed windows (the current minute and UTC day). Tokens are
// known only once the upstream answered, so a request is admitted while the window's tokens are under the quota
// and its tokens are added after: a window can end a little over its quota, by at most the requests in flight.
// The counts live in this process: with several replicas each holds its own.
type usage struct {
	limits Limits
	mu     sync.Mutex
	ws     map[string]*counts
}

type counts struct {
	minute, day             time.Time
	minuteReq, dayReq       int
	minuteTokens, dayTokens int
}

func newUsage(l Limits) *usage { return &usage{limits: l, ws: map[string]*counts{}} }

// roll starts new windows when now left the current ones.
func (c *counts) roll(now time.Time) {
	if m := now.Truncate(time.Minute); !m.Equal(c.minute) {
		c.minute, c.minuteReq, c.minuteTokens = m, 0, 0
	}
	if d := now.UTC().Truncate(24 * time.Hour); !d.Equal(c.day) {
		c.day, c.dayReq, c.dayTokens = d, 0, 0
	}
}

// counter returns a workspace's counts in the windows of now; u.mu is held.
func (u *usage) counter(workspaceID string, now time.Time) *counts {
	c := u.ws[workspaceID]
	if c == nil {
		c = &counts{}
		u.ws[workspaceID] = c
	}
	c.roll(now)
	return c
}

// admit counts one request of a workspace when every quota allows it.
func (u *usage) admit(workspaceID string, now time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.counter(workspaceID, now)
	l := u.limits
	var violated []string
	var wait time.Duration
	over := func(limit, used int, policy string, windowEnd time.Time) {
		if limit > 0 && used >= limit {
			violated = append(violated, policy)
			wait = max(wait, windowEnd.Sub(now))
		}
	}
	minuteEnd, dayEnd := c.minute.Add(time.Minute), c.day.Add(24*time.Hour)
	over(l.RequestsPerMinute, c.minuteReq, PolicyRequestsMinute, minuteEnd)
	over(l.RequestsPerDay, c.dayReq, PolicyRequestsDay, dayEnd)
	over(l.TokensPerMinute, c.minuteTokens, PolicyTokensMinute, minuteEnd)
	over(l.TokensPerDay, c.dayTokens, PolicyTokensDay, dayEnd)
	if violated != nil {
		return &LimitError{Policies: violated, RetryAfter: wait}
	}
	c.minuteReq++
	c.dayReq++
	return nil
}

// spend adds the tokens a completion used to the windows it finished in.
func (u *usage) spend(workspaceID string, tokens int, now time.Time) {
	if tokens <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.counter(workspaceID, now)
	c.minuteTokens += tokens
	c.dayTokens += tokens
}

// Used returns a workspace's requests and tokens of the current UTC day.
func (s *Service) Used(workspaceID string) (requests, tokens int) {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	c := s.usage.ws[workspaceID]
	if c == nil {
		return 0, 0
	}
	c.roll(s.cfg.Now())
	return c.dayReq, c.dayTokens
}
