package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// SendJob is an outbound message waiting in the send queue. Jobs of one instance and chat are sent in the order
// they were enqueued, one at a time.
type SendJob struct {
	MessageID   string
	WorkspaceID string
	InstanceID  string
	Chat        string
	// Detail goes on the message's sending step (how long pacing held it, and its jitter).
	Detail string
}

// QueueStats is the state of an instance's send queue (`GET /api/v1/instances/{id}/queue`).
type QueueStats struct {
	Depth    int        // messages waiting, in flight included
	InFlight int        // messages being sent now
	Oldest   *time.Time // enqueue time of the oldest waiting message
	// Rate and Burst are the instance's pacing: at most Rate messages a minute on average, with jitter.
	Rate  int
	Burst int
}

// SendQueue is the durable send queue (implemented by the runtime over the shared queue engine). Enqueue, Cancel
// and Purge run in the caller's transaction, beside the message rows they concern.
type SendQueue interface {
	Enqueue(ctx context.Context, tx store.Querier, jobs ...SendJob) error
	// Cancel removes a waiting message; false when it is already being sent or gone.
	Cancel(ctx context.Context, tx store.Querier, instanceID, messageID string) (bool, error)
	// Purge removes every waiting message of an instance and returns their ids.
	Purge(ctx context.Context, tx store.Querier, instanceID string) ([]string, error)
	Stats(ctx context.Context, instanceID string) (QueueStats, error)
}

// Ledger is what the runtime needs from the messaging capability: how to open instances, and where to record what
// happens to sessions and outbound messages. The Recorder implements it; every method commits before returning.
type Ledger interface {
	// Open loads an instance for a session: what its provider needs, the provider, and the sink to report to.
	Open(ctx context.Context, instanceID string) (Instance, Provider, Sink, error)
	// Pacing is the instance's send pacing — its own, else its provider's (nil: the runtime's default; a rate of 0:
	// none); PacingOf the same of many instances, by ID, leaving out those that take the runtime's default.
	Pacing(ctx context.Context, instanceID string) (rate, burst *int, err error)
	PacingOf(ctx context.Context, ids []string) (map[string]Pacing, error)
	// Backoff records a failed session that is tried again at next; GiveUp one that exhausted its failure budget.
	Backoff(ctx context.Context, instanceID string, attempt int, next time.Time, reason string) error
	// Staggered records many instances whose sessions open later, each at its time, with one reason (a start).
	Staggered(ctx context.Context, next map[string]time.Time, reason string) error
	GiveUp(ctx context.Context, instanceID, reason string) error
	// Restrict records an instance whose account the network restricted until a time (see Restriction).
	Restrict(ctx context.Context, instanceID string, until time.Time, reason string) error
	// Begin claims queued messages and moves them to sending in one transaction (claim runs first, inside it, and
	// returns the jobs it claimed), then loads them; those with nothing left to send are left out.
	Begin(ctx context.Context, claim func(ctx context.Context, tx store.Querier) ([]SendJob, error)) (map[string]Outbound, error)
	// Settle records outcomes in one transaction, only for the messages hold returns (it runs first, inside it).
	Settle(ctx context.Context, results []SendResult, hold func(ctx context.Context, tx store.Querier) ([]string, error)) error
}

// NoRuntime is the Runtime of a process that holds no sessions and runs no send queue: connecting, sending and
// session commands are refused with instance_not_connected, and there is nothing to stop, cancel or purge.
var NoRuntime Runtime = noRuntime{}

type noRuntime struct{}

func (noRuntime) refusal() *problem.Error {
	return problem.New(problem.InstanceNotConnected,
		"This server process runs no channel runtime, so no instance can hold a live session.")
}

func (n noRuntime) Start(context.Context, string) error { return n.refusal() }
func (noRuntime) Stop(context.Context, string) error    { return nil }
func (noRuntime) Do(_ context.Context, id string, _ Command) (json.RawMessage, error) {
	return nil, fmt.Errorf("instance %s: %w (this process runs no channel runtime)", id, ErrNotConnected)
}
func (noRuntime) Enqueue(context.Context, store.Querier, ...SendJob) error {
	return problem.New(problem.InstanceNotConnected, "This server process runs no send queue, so no message can be queued.")
}
func (noRuntime) Cancel(context.Context, store.Querier, string, string) (bool, error) {
	return false, nil
}
func (noRuntime) Purge(context.Context, store.Querier, string) ([]string, error) { return nil, nil }
func (noRuntime) Stats(context.Context, string) (QueueStats, error) {
	return QueueStats{}, problem.New(problem.InstanceNotConnected, "This server runs no send queue.")
}
