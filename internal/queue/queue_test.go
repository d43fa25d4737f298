package queue_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/queue"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// item is an entry of memQueue.
type item struct {
	id, target string
	due        time.Time
	leased     time.Time
	attempts   int
	done       bool
}

// memQueue is a queue held in memory: the engine's behaviour apart from any table.
type memQueue struct {
	mu    sync.Mutex
	items []*item
	// block, when set, holds attempts until unblock closes it; running counts the attempts in progress per target.
	block   chan struct{}
	once    sync.Once
	running map[string]int
	peak    map[string]int
	// admit, when set, is Admit's answer for a target.
	admit func(target string, now time.Time) (time.Time, bool)
	// onTarget, when set, runs whenever the engine asks an item's target; started lists the attempts in the order
	// they started.
	onTarget func(it *item)
	started  []string
	// failRecord makes Record fail for batches holding this id.
	failRecord string
	recorded   []string
	released   int
	// recordGate, when set, holds every Record call until it is closed; recordDelay slows each down. recording
	// counts the calls in progress per target, recordPeak the most calls in progress at once, and overlap names a
	// target whose outcomes two calls recorded at the same time.
	recordGate  chan struct{}
	recordDelay time.Duration
	recording   map[string]int
	calls       int
	recordPeak  int
	overlap     string
}

func newMemQueue(targets map[string]int) *memQueue {
	q := &memQueue{running: map[string]int{}, peak: map[string]int{}}
	var names []string
	for t := range targets {
		names = append(names, t)
	}
	slices.Sort(names)
	n := 0
	for _, t := range names {
		for range targets[t] {
			n++
			q.items = append(q.items, &item{id: string(rune('a'+n/26)) + string(rune('a'+n%26)), target: t})
		}
	}
	return q
}

func (q *memQueue) Claim(_ context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]*item, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*item
	for _, it := range q.items {
		if len(out) == limit {
			break
		}
		if it.done || it.due.After(now) || it.leased.After(now) || slices.Contains(exclude, it.target) {
			continue
		}
		it.leased = now.Add(lease)
		out = append(out, it)
	}
	return out, nil
}

func (q *memQueue) Prepare(_ context.Context, items []*item) ([]*item, error) { return items, nil }

func (q *memQueue) Release(_ context.Context, items []*item, notBefore time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range items {
		it.leased, it.due = time.Time{}, notBefore
		q.released++
	}
	return nil
}

func (q *memQueue) Target(it *item) string {
	if q.onTarget != nil {
		q.onTarget(it)
	}
	return it.target
}

func (q *memQueue) Admit(it *item, now time.Time) (time.Time, bool) {
	if q.admit == nil {
		return time.Time{}, true
	}
	return q.admit(it.target, now)
}

func (q *memQueue) Attempt(_ context.Context, it *item) (string, bool) {
	q.mu.Lock()
	q.running[it.target]++
	q.peak[it.target] = max(q.peak[it.target], q.running[it.target])
	it.attempts++
	q.started = append(q.started, it.id)
	block := q.block
	q.mu.Unlock()
	if block != nil {
		<-block
	}
	q.mu.Lock()
	q.running[it.target]--
	q.mu.Unlock()
	return it.id, it.target != "unpreparable"
}

func (q *memQueue) Record(_ context.Context, ids []string) error {
	q.mu.Lock()
	targets := map[string]bool{}
	for _, id := range ids {
		for _, it := range q.items {
			if it.id == id {
				targets[it.target] = true
			}
		}
	}
	if q.recording == nil {
		q.recording = map[string]int{}
	}
	for target := range targets {
		if q.recording[target]++; q.recording[target] > 1 {
			q.overlap = target
		}
	}
	q.calls++
	q.recordPeak = max(q.recordPeak, q.calls)
	gate, delay := q.recordGate, q.recordDelay
	q.mu.Unlock()
	if gate != nil {
		<-gate
	}
	time.Sleep(delay)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls--
	for target := range targets {
		q.recording[target]--
	}
	if slices.Contains(ids, q.failRecord) {
		return errors.New("cannot record " + q.failRecord)
	}
	for _, id := range ids {
		for _, it := range q.items {
			if it.id == id {
				it.done, it.leased = true, time.Time{}
			}
		}
		q.recorded = append(q.recorded, id)
	}
	return nil
}

func (q *memQueue) unblock() { q.once.Do(func() { close(q.block) }) }

func (q *memQueue) count(f func(*item) bool) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, it := range q.items {
		if f(it) {
			n++
		}
	}
	return n
}

func (q *memQueue) runningOf(target string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running[target]
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// run starts an engine of q until the test ends; the returned function stops it and waits for Run to return.
func run(t *testing.T, q *memQueue, cfg queue.Config) (*queue.Engine[*item, string], func()) {
	t.Helper()
	cfg.Name, cfg.Logger = "test", quiet
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	e := queue.New(storetest.SQLite(t), queue.Client[*item, string](q), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(func() {
		if q.block != nil {
			q.unblock()
		}
		stop()
	})
	return e, stop
}

func TestEveryItemAttemptedOnceAndRecorded(t *testing.T) {
	q := newMemQueue(map[string]int{"a": 50, "b": 50, "c": 50})
	run(t, q, queue.Config{Workers: 8})
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 150)
	if n := q.count(func(it *item) bool { return it.attempts != 1 }); n != 0 {
		t.Errorf("%d items attempted other than once", n)
	}
}

// A claim that gives an item back because its target is at its in-flight cap gives back every later item of that
// target too, even when an attempt of the target ends meanwhile: otherwise the later item would start first, and a
// backlog would go out of order.
func TestCapKeepsTheOrderWithinAClaim(t *testing.T) {
	q := newMemQueue(map[string]int{"t": 3})
	q.block = make(chan struct{})
	var engine atomic.Pointer[queue.Engine[*item, string]]
	var once sync.Once
	third := q.items[2]
	q.onTarget = func(it *item) {
		if it != third {
			return
		}
		// The first claim held all three: the first started, the second was given back at the cap. The first
		// attempt ends now, before the engine judges the third.
		once.Do(func() {
			q.unblock()
			await.Equal(t, "attempts running", func() int {
				if e := engine.Load(); e != nil {
					return e.Attempting()
				}
				return -1
			}, 0)
		})
	}
	e, _ := run(t, q, queue.Config{Workers: 4, PerTarget: 1})
	engine.Store(e)
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 3)
	q.mu.Lock()
	defer q.mu.Unlock()
	if want := []string{q.items[0].id, q.items[1].id, q.items[2].id}; !slices.Equal(q.started, want) {
		t.Errorf("attempts started in the order %v, want %v", q.started, want)
	}
}

// A target at its in-flight cap holds no more workers; the other targets proceed meanwhile.
func TestPerTargetCap(t *testing.T) {
	q := newMemQueue(map[string]int{"slow": 10})
	q.block = make(chan struct{})
	run(t, q, queue.Config{Workers: 6, PerTarget: 2})
	await.Equal(t, "the slow target's attempts", func() int { return q.runningOf("slow") }, 2)
	q.mu.Lock()
	for i := range 5 {
		q.items = append(q.items, &item{id: "z" + string(rune('a'+i)), target: "fast"})
	}
	q.mu.Unlock()
	await.Equal(t, "the fast target's attempts, beside the blocked ones", func() int { return q.runningOf("fast") }, 2)
	q.unblock()
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 15)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.peak["slow"] != 2 || q.peak["fast"] != 2 {
		t.Errorf("peak attempts per target %v, want 2 each", q.peak)
	}
}

// A target Admit refuses is given back until the time Admit named, and is not claimed before it.
func TestAdmitThrottles(t *testing.T) {
	q := newMemQueue(map[string]int{"limited": 3})
	var mu sync.Mutex
	var admitted []time.Time
	q.admit = func(_ string, now time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(admitted) > 0 && now.Before(admitted[len(admitted)-1].Add(30*time.Millisecond)) {
			return admitted[len(admitted)-1].Add(30 * time.Millisecond), false
		}
		admitted = append(admitted, now)
		return time.Time{}, true
	}
	run(t, q, queue.Config{Poll: time.Hour})
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 3)
	mu.Lock()
	defer mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 1; i < len(admitted); i++ {
		if gap := admitted[i].Sub(admitted[i-1]); gap < 30*time.Millisecond {
			t.Errorf("attempts %d and %d only %v apart", i-1, i, gap)
		}
	}
	if q.released == 0 {
		t.Error("nothing was given back while the target was out of rate")
	}
}

// An outcome that cannot be recorded does not hold back the others of its batch; its item keeps its lease.
func TestRecordFailureIsolated(t *testing.T) {
	q := newMemQueue(map[string]int{"a": 20})
	q.failRecord = q.items[3].id
	q.block = make(chan struct{})
	run(t, q, queue.Config{Workers: 20, PerTarget: 20, Lease: time.Hour})
	await.Equal(t, "attempts started", func() int { return q.runningOf("a") }, 20)
	q.unblock()
	await.Equal(t, "others recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 19)
	q.mu.Lock()
	defer q.mu.Unlock()
	if it := q.items[3]; it.done || it.leased.IsZero() || it.attempts != 1 {
		t.Errorf("unrecorded item: done %v, leased %v, attempts %d", it.done, it.leased, it.attempts)
	}
}

// Run returns only once the attempts in flight are recorded; an attempt with nothing to record just ends.
func TestStopWaitsForAttemptsInFlight(t *testing.T) {
	q := newMemQueue(map[string]int{"a": 2, "unpreparable": 1})
	q.block = make(chan struct{})
	e, stop := run(t, q, queue.Config{})
	await.Equal(t, "attempts in flight", e.InFlight, 3)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// Run has been told to stop before the attempts end (stop cancels first, then waits).
	await.Until(t, "the stop to begin", func() bool { return e.Stopping() }, func(b bool) bool { return b })
	q.unblock()
	await.Receive(t, "Run to return", stopped)
	if n := q.count(func(it *item) bool { return it.done }); n != 2 || e.InFlight() != 0 {
		t.Errorf("after the stop: %d recorded, %d in flight", n, e.InFlight())
	}
}

// A worker is free again when its attempt ends: attempts go on while earlier outcomes wait for a slow Record, up to
// MaxBatch outcomes beside the Workers attempts, and nothing is lost when the Record comes through.
func TestAttemptsGoOnWhileRecording(t *testing.T) {
	q := newMemQueue(map[string]int{"a": 10, "b": 10, "c": 10})
	q.recordGate = make(chan struct{})
	e, _ := run(t, q, queue.Config{Workers: 2, MaxBatch: 4})
	attempted := func() int { return q.count(func(it *item) bool { return it.attempts > 0 }) }
	await.Equal(t, "attempts while the first Record waits", attempted, 6)
	// The loop keeps looking (Poll is 10 ms): once it has found the engine full a few times more, it has had every
	// chance to start a seventh attempt.
	seen := e.Saturations()
	await.Until(t, "the loop to find the engine full again", e.Saturations, func(n int64) bool { return n >= seen+3 })
	if n, in := attempted(), e.InFlight(); n != 6 || in != 6 {
		t.Errorf("while Record waits: %d attempted, %d in flight; want 6 (2 workers + 4 outcomes waiting)", n, in)
	}
	close(q.recordGate)
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 30)
	if n := q.count(func(it *item) bool { return it.attempts != 1 }); n != 0 {
		t.Errorf("%d items attempted other than once", n)
	}
}

// With two record lanes, two Record calls run at once, and never with outcomes of the same target.
func TestRecordLanesKeepATargetInOneLane(t *testing.T) {
	q := newMemQueue(map[string]int{"a": 20, "b": 20, "c": 20, "d": 20, "e": 20, "f": 20, "g": 20, "h": 20})
	q.recordDelay = 3 * time.Millisecond
	run(t, q, queue.Config{Workers: 16, PerTarget: 2, RecordLanes: 2})
	await.Equal(t, "items recorded", func() int { return q.count(func(it *item) bool { return it.done }) }, 160)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.overlap != "" {
		t.Errorf("two Record calls at once held outcomes of target %q", q.overlap)
	}
	if q.recordPeak != 2 {
		t.Errorf("at most %d Record calls ran at once, want 2", q.recordPeak)
	}
}
