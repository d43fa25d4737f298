package channels

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// Every event of an instance carries its number in the instance's gap-free sequence (Sequence), counted on the
// instance's row. Counting takes that row's lock until the transaction ends, and costs a statement: the events of a
// transaction are numbered together, one statement for all its instances, and a shared transaction (sharedTxFor:
// accepted sends, the sessions' runs of inbound messages and receipts, their state reports) collects the events of
// all its calls in a journal to number and write them once at its end — a call's events join it only when the call
// succeeded, since a failed call's savepoint is rolled back. Events are numbered in the order they were emitted,
// call after call, so an instance's sequence follows the order of its changes.

// journalKey carries a *journal in the context of a run of changes.
type journalKey struct{}

// journal holds the events of a run of changes until it is flushed.
type journal struct{ pending []events.Pending }

// withJournal returns a context whose emitNumbered calls add their events to a journal, and the journal.
func withJournal(ctx context.Context) (context.Context, *journal) {
	j := &journal{}
	return context.WithValue(ctx, journalKey{}, j), j
}

// flush numbers and records the journal's events inside tx.
func (j *journal) flush(ctx context.Context, tx store.Querier, s *Recorder) error {
	evs := j.pending
	j.pending = nil
	return s.number(ctx, tx, evs)
}

// journalOf is the journal of ctx's run of changes, nil outside one.
func journalOf(ctx context.Context) *journal {
	j, _ := ctx.Value(journalKey{}).(*journal)
	return j
}

// journaled runs fn, a call of a shared transaction, with a journal of its own, and adds what it journaled to the
// transaction's journal (in ctx) once it succeeded.
func journaled(ctx context.Context, tx store.Tx, fn func(ctx context.Context, tx store.Tx) error) error {
	shared := journalOf(ctx)
	callCtx, own := withJournal(ctx)
	if err := fn(callCtx, tx); err != nil {
		return err
	}
	if shared == nil {
		return errors.New("channels: a shared transaction without its journal")
	}
	shared.pending = append(shared.pending, own.pending...)
	return nil
}

// emitNumbered records events of instances inside tx, each numbered in its instance's sequence; inside a run with
// a journal, it adds them to the journal instead. A payload is a generated event type with a Sequence field.
func (s *Recorder) emitNumbered(ctx context.Context, tx store.Querier, evs ...events.Pending) error {
	if j := journalOf(ctx); j != nil {
		j.pending = append(j.pending, evs...)
		return nil
	}
	return s.number(ctx, tx, evs)
}

// number counts the events of all their instances in one statement, sets their Sequence in order, and records
// them (in one multi-row insert).
func (s *Recorder) number(ctx context.Context, tx store.Querier, evs []events.Pending) error {
	if len(evs) == 0 {
		return nil
	}
	count := map[string]int{}
	for _, e := range evs {
		count[e.InstanceID]++
	}
	last, err := s.db.Instances.NextSequencesOf(ctx, tx, count)
	if err != nil {
		return err
	}
	next := make(map[string]int64, len(count))
	for id, n := range count {
		next[id] = last[id] - int64(n) + 1
	}
	for i := range evs {
		p, err := withSequence(evs[i].Payload, next[evs[i].InstanceID])
		if err != nil {
			return err
		}
		evs[i].Payload = p
		next[evs[i].InstanceID]++
	}
	_, err = s.events.EmitMany(ctx, tx, evs)
	return err
}

// withSequence returns a copy of an event payload with its Sequence set.
func withSequence(payload any, seq int64) (any, error) {
	v := reflect.New(reflect.TypeOf(payload)).Elem()
	v.Set(reflect.ValueOf(payload))
	f := v.FieldByName("Sequence")
	if !f.IsValid() || f.Kind() != reflect.Int64 {
		return nil, fmt.Errorf("channels: event payload %T has no Sequence to number", payload)
	}
	f.SetInt(seq)
	return v.Interface(), nil
}
