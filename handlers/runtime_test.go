package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// testRuntime is the smallest channel runtime the API's tests need, in one process: it holds each started
// instance's session (opened through the service's Ledger, run in a goroutine), carries commands to it with
// channels.Invoke, and sends queued messages one at a time through the Ledger. The real runtime (leases across
// processes, backoff, the durable queue) has its own tests; these are about the API over it.
type testRuntime struct {
	t      *testing.T
	ledger channels.Ledger

	mu       sync.Mutex
	sessions map[string]*testSession
	jobs     chan channels.SendJob
	canceled map[string]bool
	queued   map[string][]string // instance → message IDs not taken yet
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

type testSession struct {
	sess   channels.Session
	cancel context.CancelFunc
	done   chan struct{}
}

var (
	_ channels.Sessions  = (*testRuntime)(nil)
	_ channels.SendQueue = (*testRuntime)(nil)
)

func newTestRuntime(t *testing.T) *testRuntime {
	ctx, stop := context.WithCancel(context.Background())
	r := &testRuntime{t: t, sessions: map[string]*testSession{}, jobs: make(chan channels.SendJob, 1000),
		canceled: map[string]bool{}, queued: map[string][]string{}, ctx: ctx, stop: stop}
	t.Cleanup(r.close)
	return r
}

// run starts the sender once the ledger exists.
func (r *testRuntime) run(ledger channels.Ledger) {
	r.ledger = ledger
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.ctx.Done():
				return
			case j := <-r.jobs:
				r.send(j)
			}
		}
	}()
}

func (r *testRuntime) close() {
	r.stop()
	r.mu.Lock()
	var waits []chan struct{}
	for _, s := range r.sessions {
		s.cancel()
		waits = append(waits, s.done)
	}
	r.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	r.wg.Wait()
}

func (r *testRuntime) send(j channels.SendJob) {
	r.mu.Lock()
	canceled := r.canceled[j.MessageID]
	q := r.queued[j.InstanceID]
	for i, id := range q {
		if id == j.MessageID {
			r.queued[j.InstanceID] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	s := r.sessions[j.InstanceID]
	r.mu.Unlock()
	if canceled {
		return
	}
	sender, ok := func() (channels.Sender, bool) {
		if s == nil {
			return nil, false
		}
		snd, ok := s.sess.(channels.Sender)
		return snd, ok
	}()
	if !ok {
		_ = r.ledger.Failed(r.ctx, j.MessageID, &channels.Failure{Code: "not_connected", Detail: "no live session"})
		return
	}
	// The job was handed over inside the transaction that stores the message: wait for it to commit.
	out, err := r.ledger.Outbound(r.ctx, j.MessageID)
	for tries := 0; errors.Is(err, store.ErrNotFound) && tries < 500; tries++ {
		time.Sleep(10 * time.Millisecond)
		out, err = r.ledger.Outbound(r.ctx, j.MessageID)
	}
	if err == nil {
		err = r.ledger.Sending(r.ctx, j.MessageID)
	}
	if err != nil {
		r.t.Errorf("runtime: %v", err)
		return
	}
	sent, err := sender.Send(r.ctx, out)
	var f *channels.Failure
	switch {
	case errors.As(err, &f):
		err = r.ledger.Failed(r.ctx, j.MessageID, f)
	case err != nil:
		err = r.ledger.Failed(r.ctx, j.MessageID, &channels.Failure{Code: "network_error", Detail: err.Error()})
	default:
		err = r.ledger.Sent(r.ctx, j.MessageID, sent)
	}
	if err != nil && r.ctx.Err() == nil {
		r.t.Errorf("runtime: record %s: %v", j.MessageID, err)
	}
}

func (r *testRuntime) Start(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[id] != nil {
		return nil
	}
	inst, p, sink, err := r.ledger.Open(r.ctx, id)
	if err != nil {
		return err
	}
	sess, err := p.Open(inst, sink)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.ctx)
	s := &testSession{sess: sess, cancel: cancel, done: make(chan struct{})}
	r.sessions[id] = s
	go func() {
		defer close(s.done)
		if err := sess.Run(ctx); err != nil && ctx.Err() == nil {
			_ = sink.State(context.Background(), channels.StatusFailed, err.Error())
		}
		r.mu.Lock()
		if r.sessions[id] == s {
			delete(r.sessions, id)
		}
		r.mu.Unlock()
	}()
	return nil
}

func (r *testRuntime) Stop(_ context.Context, id string) error {
	r.mu.Lock()
	s := r.sessions[id]
	delete(r.sessions, id)
	r.mu.Unlock()
	if s != nil {
		s.cancel()
		<-s.done
	}
	return nil
}

func (r *testRuntime) Do(ctx context.Context, id string, c channels.Command) (json.RawMessage, error) {
	r.mu.Lock()
	s := r.sessions[id]
	r.mu.Unlock()
	if s == nil {
		return nil, channels.ErrNotConnected
	}
	return channels.Invoke(ctx, s.sess, c)
}

func (r *testRuntime) Enqueue(_ context.Context, _ bun.IDB, jobs ...channels.SendJob) error {
	r.mu.Lock()
	for _, j := range jobs {
		r.queued[j.InstanceID] = append(r.queued[j.InstanceID], j.MessageID)
	}
	r.mu.Unlock()
	for _, j := range jobs {
		r.jobs <- j
	}
	return nil
}

func (r *testRuntime) Cancel(_ context.Context, _ bun.IDB, instanceID, messageID string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, id := range r.queued[instanceID] {
		if id == messageID {
			r.queued[instanceID] = append(r.queued[instanceID][:i:i], r.queued[instanceID][i+1:]...)
			r.canceled[messageID] = true
			return true, nil
		}
	}
	return false, nil
}

func (r *testRuntime) Purge(_ context.Context, _ bun.IDB, instanceID string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.queued[instanceID]
	for _, id := range ids {
		r.canceled[id] = true
	}
	delete(r.queued, instanceID)
	return ids, nil
}

func (r *testRuntime) Stats(_ context.Context, instanceID string) (channels.QueueStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	st := channels.QueueStats{Depth: len(r.queued[instanceID]), Rate: 60, Burst: 5}
	if st.Depth > 0 {
		st.Oldest = &now
	}
	return st, nil
}
