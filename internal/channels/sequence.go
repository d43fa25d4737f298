package channels

import (
	"context"
	"fmt"
	"reflect"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// Every event of an instance carries its number in the instance's gap-free sequence (Sequence), counted on the
// instance's row. Counting takes that row's lock until the transaction ends, and costs a statement: the events of a
// transaction are numbered together, one count per instance, and a run of changes (a batch of inbound messages and
// receipts) collects its events in a journal to number and write them once at its end.

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

// emitNumbered records events of instances inside tx, each numbered in its instance's sequence; inside a run with
// a journal, it adds them to the journal instead. A payload is a generated event type with a Sequence field.
func (s *Recorder) emitNumbered(ctx context.Context, tx store.Querier, evs ...events.Pending) error {
	if j, ok := ctx.Value(journalKey{}).(*journal); ok {
		j.pending = append(j.pending, evs...)
		return nil
	}
	return s.number(ctx, tx, evs)
}

// number counts the events of each instance in one statement, sets their Sequence in order, and records them.
func (s *Recorder) number(ctx context.Context, tx store.Querier, evs []events.Pending) error {
	if len(evs) == 0 {
		return nil
	}
	count := map[string]int{}
	var order []string
	for _, e := range evs {
		if count[e.InstanceID] == 0 {
			order = append(order, e.InstanceID)
		}
		count[e.InstanceID]++
	}
	next := make(map[string]int64, len(order))
	for _, id := range order {
		last, err := s.db.Instances.NextSequences(ctx, tx, id, count[id])
		if err != nil {
			return err
		}
		next[id] = last - int64(count[id]) + 1
	}
	for i := range evs {
		p, err := withSequence(evs[i].Payload, next[evs[i].InstanceID])
		if err != nil {
			return err
		}
		evs[i].Payload = p
		next[evs[i].InstanceID]++
	}
	_, err := s.events.EmitMany(ctx, tx, evs)
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
