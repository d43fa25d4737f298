package hub

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// Enqueue queues messages inside tx (the transaction that stores them); the queues of every process wake when it
// commits.
func (h *Hub) Enqueue(ctx context.Context, tx store.Querier, jobs ...channels.SendJob) error {
	items := make([]store.SendItem, len(jobs))
	for i, j := range jobs {
		items[i] = store.SendItem{MessageID: j.MessageID, WorkspaceID: j.WorkspaceID, InstanceID: j.InstanceID, Chat: j.Chat}
	}
	if err := h.db.SendQueue.Enqueue(ctx, tx, items); err != nil {
		return err
	}
	h.send.Wake()
	return nil
}

// Cancel takes a waiting message out of the queue inside tx; false when it is being sent or gone.
func (h *Hub) Cancel(ctx context.Context, tx store.Querier, instanceID, messageID string) (bool, error) {
	removed, err := h.db.SendQueue.Remove(ctx, tx, instanceID, []string{messageID}, time.Now())
	return len(removed) > 0, err
}

// Purge takes every waiting message of an instance out of the queue inside tx and returns their IDs.
func (h *Hub) Purge(ctx context.Context, tx store.Querier, instanceID string) ([]string, error) {
	return h.db.SendQueue.Remove(ctx, tx, instanceID, nil, time.Now())
}

// Stats is the state of an instance's queue and its pacing.
func (h *Hub) Stats(ctx context.Context, instanceID string) (channels.QueueStats, error) {
	st, err := h.db.SendQueue.Stats(ctx, instanceID, time.Now())
	if err != nil {
		return channels.QueueStats{}, err
	}
	rate, burst, err := h.ledger.Pacing(ctx, instanceID)
	if err != nil {
		return channels.QueueStats{}, err
	}
	r, b := h.pacing(rate, burst)
	return channels.QueueStats{Depth: st.Depth, InFlight: st.InFlight, Oldest: st.Oldest, Rate: r, Burst: b}, nil
}

// pacing resolves an instance's own pacing against the defaults: rate 0 is no pacing.
func (h *Hub) pacing(rate, burst *int) (int, int) {
	r, b := max(h.opts.Rate, 0), h.opts.Burst
	if rate != nil {
		r = *rate
	}
	if burst != nil && *burst > 0 {
		b = *burst
	}
	return r, b
}

// loadPacing reads an instance's pacing when its session opens (an update applies at its next connect).
func (h *Hub) loadPacing(ctx context.Context, id string) {
	rate, burst, err := h.ledger.Pacing(ctx, id)
	if err != nil {
		return
	}
	r, b := h.pacing(rate, burst)
	h.mu.Lock()
	if p := h.pacers[id]; p != nil {
		p.set(r, b)
	} else {
		h.pacers[id] = newPacer(r, b)
	}
	h.mu.Unlock()
}

// refreshPacing applies the pacing changes of held instances (each upkeep pass, so a change applies within Renew).
func (h *Hub) refreshPacing(ctx context.Context, ids []string) error {
	own, err := h.ledger.PacingOf(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var rate, burst *int
		if p, ok := own[id]; ok {
			rate, burst = &p.Rate, &p.Burst
		}
		r, b := h.pacing(rate, burst)
		h.pacerOf(id).set(r, b)
	}
	return nil
}

func (h *Hub) pacerOf(id string) *pacer {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pacers[id]
	if p == nil {
		r, b := h.pacing(nil, nil)
		p = newPacer(r, b)
		h.pacers[id] = p
	}
	return p
}

// sendable lists the instances whose messages this process may send now: held, open, connected, and not held back
// by their pacing.
func (h *Hub) sendable(now time.Time) []string {
	h.mu.Lock()
	hs := make([]*held, 0, len(h.held))
	for _, x := range h.held {
		hs = append(hs, x)
	}
	h.mu.Unlock()
	var ids []string
	for _, x := range hs {
		if sess, connected := x.session(); connected && sess != nil {
			if _, ok := sess.(channels.Sender); ok && h.pacerOf(x.id).ready(now) {
				ids = append(ids, x.id)
			}
		}
	}
	return ids
}

func (h *Hub) sender(id string) channels.Sender {
	h.mu.Lock()
	x := h.held[id]
	h.mu.Unlock()
	if x == nil {
		return nil
	}
	sess, connected := x.session()
	if !connected || sess == nil {
		return nil
	}
	s, _ := sess.(channels.Sender)
	return s
}

// job is a claimed queue item and what sending it needs (nil out: nothing left to send).
type job struct {
	item store.SendItem
	out  *channels.Outbound
}

// outcome is what an attempt leaves to record.
type outcome struct {
	store  store.SendOutcome
	result *channels.SendResult
}

// sendClient is the send queue's client of the queue engine.
type sendClient struct{ h *Hub }

// Claim claims the heads of the chats of the instances that may send now, admits them through their instance's
// pacing, and marks those admitted sending, all in one transaction: a message held back by pacing is given back
// still queued, in that transaction too.
func (c *sendClient) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]*job, error) {
	if due, err := c.h.db.SendQueue.AnyDue(ctx, now); err != nil || !due {
		return nil, err
	}
	instances := c.h.sendable(now)
	if due, err := c.h.db.SendQueue.Due(ctx, now, instances, exclude); err != nil || !due {
		return nil, err
	}
	var jobs []*job
	outs, err := c.h.ledger.Begin(ctx, func(ctx context.Context, tx store.Querier) ([]channels.SendJob, error) {
		jobs = jobs[:0]
		items, err := c.h.db.SendQueue.Claim(ctx, tx, now, lease, limit, c.h.opts.PerInstance, instances, exclude,
			func(ctx context.Context, ids []string) error { return c.h.db.Instances.LockAll(ctx, tx, ids) })
		if err != nil {
			return nil, err
		}
		later := map[time.Time][]store.SendItem{}
		sj := make([]channels.SendJob, 0, len(items))
		for _, it := range items {
			notBefore, detail, ok := c.h.pacerOf(it.InstanceID).admitWait(now)
			if !ok {
				later[notBefore] = append(later[notBefore], it)
				continue
			}
			jobs = append(jobs, &job{item: it})
			sj = append(sj, channels.SendJob{MessageID: it.MessageID, InstanceID: it.InstanceID, Detail: detail})
		}
		for notBefore, its := range later {
			if err := c.h.db.SendQueue.Release(ctx, tx, its, notBefore); err != nil {
				return nil, err
			}
		}
		return sj, nil
	})
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if o, ok := outs[j.item.MessageID]; ok {
			j.out = &o
		}
	}
	return jobs, nil
}

// Prepare has nothing left to do: Claim loaded the messages.
func (c *sendClient) Prepare(_ context.Context, jobs []*job) ([]*job, error) { return jobs, nil }

func (c *sendClient) Release(ctx context.Context, jobs []*job, notBefore time.Time) error {
	items := make([]store.SendItem, len(jobs))
	for i, j := range jobs {
		items[i] = j.item
	}
	return c.h.db.SendQueue.Release(ctx, c.h.db.Bun(), items, notBefore)
}

func (c *sendClient) Target(j *job) string { return j.item.InstanceID }

// Admit admits every claimed item: Claim applied the pacing already.
func (c *sendClient) Admit(*job, time.Time) (time.Time, bool) { return time.Time{}, true }

// Attempt sends one message through the instance's session.
func (c *sendClient) Attempt(ctx context.Context, j *job) (outcome, bool) {
	o := outcome{store: store.SendOutcome{MessageID: j.item.MessageID, Lease: *j.item.LeaseUntil, Attempts: j.item.Attempts}}
	if j.out == nil {
		o.store.Done = true
		return o, true
	}
	retry := func(wait time.Duration, why string) (outcome, bool) {
		if j.item.Attempts >= c.h.opts.MaxAttempts {
			o.store.Done = true
			o.result = &channels.SendResult{MessageID: j.item.MessageID, InstanceID: j.item.InstanceID, Failure: &channels.Failure{Code: "network_error",
				Detail: fmt.Sprintf("gave up after %d attempts: %s", j.item.Attempts, why)}}
			return o, true
		}
		o.store.RetryAt, o.store.LastError = time.Now().Add(wait), text.Clean(why) // a network's words, kept as text
		return o, true
	}
	snd := c.h.sender(j.item.InstanceID)
	if snd == nil {
		// Disconnected since the claim: the message waits for the session, without counting an attempt.
		o.store.RetryAt, o.store.LastError, o.store.Attempts = time.Now(), "the instance is not connected", j.item.Attempts-1
		return o, true
	}
	sctx, cancel := context.WithTimeout(ctx, c.h.opts.SendTimeout)
	defer cancel()
	out := *j.out
	out.Resend = j.item.Attempts > 1
	sent, err := snd.Send(sctx, out)
	var f *channels.Failure
	switch {
	case err == nil:
		o.store.Done = true
		o.result = &channels.SendResult{MessageID: j.item.MessageID, InstanceID: j.item.InstanceID, Sent: &sent}
	case errors.As(err, &f) && !f.Retryable:
		o.store.Done = true
		o.result = &channels.SendResult{MessageID: j.item.MessageID, InstanceID: j.item.InstanceID, Failure: f}
	case errors.As(err, &f):
		wait := f.RetryAfter
		if wait > 0 {
			// The network asked the account to wait: nothing of this instance goes before.
			c.h.pacerOf(j.item.InstanceID).pause(time.Now().Add(wait))
		} else {
			wait = backoff(time.Second, 5*time.Minute, j.item.Attempts)
		}
		return retry(wait, f.Error())
	default:
		return retry(backoff(time.Second, 5*time.Minute, j.item.Attempts), err.Error())
	}
	return o, true
}

// Record stores outcomes: the queue items and the messages' statuses in one transaction.
func (c *sendClient) Record(ctx context.Context, outs []outcome) error {
	stored := make([]store.SendOutcome, len(outs))
	var results []channels.SendResult
	for i, o := range outs {
		stored[i] = o.store
		if o.result != nil {
			results = append(results, *o.result)
		}
	}
	return c.h.ledger.Settle(ctx, results, func(ctx context.Context, tx store.Querier) ([]string, error) {
		return c.h.db.SendQueue.Settle(ctx, tx, stored)
	})
}

// pacer is an instance's send pacing: a token bucket of burst tokens refilled at rate a minute; once it is empty,
// the next send waits its share of the minute with ±30 % jitter, so that the sends of an account do not tick like a
// machine's. The jittered time is drawn once, when the bucket runs dry, and both ready and admit keep to it: a send
// loop that waits for ready is spaced by it just as one refused by admit is.
type pacer struct {
	mu          sync.Mutex
	rate, burst int
	tokens      float64
	last        time.Time
	paused      time.Time
	// next is when the bucket, once dry, admits again (zero while it has tokens); jitter is how much later (or
	// earlier) than the rate alone that is, and prev when the send before it went.
	next, prev time.Time
	jitter     time.Duration
}

func newPacer(rate, burst int) *pacer {
	return &pacer{rate: rate, burst: burst, tokens: float64(burst)}
}

func (p *pacer) set(rate, burst int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.burst = rate, burst
	p.tokens = min(p.tokens, float64(burst))
	if rate <= 0 {
		p.next = time.Time{}
	}
}

// pause holds every send until t (the network asked to wait).
func (p *pacer) pause(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.After(p.paused) {
		p.paused = t
	}
}

// ready reports whether a send could be admitted at now, taking nothing.
func (p *pacer) ready(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !now.Before(p.paused) && (p.rate <= 0 || !now.Before(p.next))
}

// admit takes a token at now, or says when one will be there.
func (p *pacer) admit(now time.Time) (time.Time, bool) {
	t, _, ok := p.admitWait(now)
	return t, ok
}

// admitWait is admit that, for a send the pacing spaced from the one before it, also describes the wait (for the
// message's sending step); "" for a send that went out of the burst.
func (p *pacer) admitWait(now time.Time) (time.Time, string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.paused) {
		return p.paused, "", false
	}
	if p.rate <= 0 {
		return time.Time{}, "", true
	}
	if now.Before(p.next) {
		return p.next, "", false
	}
	if !p.last.IsZero() {
		p.tokens = min(float64(p.burst), p.tokens+now.Sub(p.last).Minutes()*float64(p.rate))
	}
	p.last = now
	var detail string
	if !p.next.IsZero() && now.Sub(p.next) < time.Minute/time.Duration(p.rate) {
		// Held back by the dry bucket (a send long after next found it refilled: pacing did not hold it).
		detail = fmt.Sprintf("paced: sent %.1f s after the instance's previous send (jitter %+.1f s)",
			now.Sub(p.prev).Seconds(), p.jitter.Seconds())
	}
	// The jittered time may come before a whole token is back: the deficit lengthens the next wait, so the rate
	// holds on average.
	p.tokens--
	p.prev, p.next, p.jitter = now, time.Time{}, 0
	if p.tokens < 1 {
		per := time.Minute / time.Duration(p.rate)
		base := time.Duration((1 - p.tokens) * float64(per))
		wait := max(time.Duration(float64(base)*(0.7+0.6*mrand.Float64())), time.Millisecond)
		p.next, p.jitter = now.Add(wait), wait-base
	}
	return time.Time{}, detail, true
}
