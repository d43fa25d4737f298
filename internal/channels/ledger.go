package channels

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// SendResult is the outcome of one send: Sent when the network took the message, Failure when it refused it for
// good (a retryable refusal or a transient error is not a result: the runtime tries again).
type SendResult struct {
	MessageID  string
	InstanceID string
	Sent       *Sent
	Failure    *Failure
}

// Begin claims queued messages and moves them to sending in one transaction: claim runs first inside it and
// returns the jobs it claimed (on PostgreSQL it locks their instances before any queue item, as inTxFor would), then
// the messages move to sending with their events, numbered once per instance for the whole batch. It then makes
// them ready for sending (from the rows the move read, with their chats in one read). Messages with nothing left
// to send (canceled, failed, sent already, deleted) are left out of the map: their queue items only need removing.
func (s *Recorder) Begin(ctx context.Context, claim func(ctx context.Context, tx store.Querier) ([]SendJob, error)) (map[string]Outbound, error) {
	var live []store.Message
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		live = live[:0]
		jobs, err := claim(ctx, tx)
		if err != nil || len(jobs) == 0 {
			return err
		}
		moves := make([]move, len(jobs))
		now := time.Now()
		for i, j := range jobs {
			moves[i] = move{id: j.MessageID, to: msgSending, at: now, detail: j.Detail}
		}
		ms, err := s.advanceMany(ctx, tx, moves)
		for _, m := range ms {
			if m.Status == msgSending {
				live = append(live, m)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.outbounds(ctx, live)
}

// Settle records the outcomes of sends in one transaction. hold runs first inside it and returns the IDs of the
// messages whose outcome may be recorded (their queue item still holds the lease of its claim, and it removes or
// reschedules them); only those are recorded, so a send that lost its lease never overwrites its retry's outcome.
// Receipts that arrived before the send was recorded are applied after the commit.
func (s *Recorder) Settle(ctx context.Context, results []SendResult, hold func(ctx context.Context, tx store.Querier) ([]string, error)) error {
	type early struct{ instanceID, providerID, messageID string }
	var sent []early
	results = text.Cleaned(results) // a network's message IDs and refusals, stored as text
	instances := make([]string, 0, len(results))
	for _, r := range results {
		instances = append(instances, r.InstanceID)
	}
	err := s.inTxFor(ctx, instances, func(ctx context.Context, tx store.Tx) error {
		sent = sent[:0]
		held, err := hold(ctx, tx)
		if err != nil {
			return err
		}
		ok := make(map[string]bool, len(held))
		for _, id := range held {
			ok[id] = true
		}
		var moves []move
		for _, r := range results {
			if !ok[r.MessageID] {
				continue
			}
			switch {
			case r.Sent != nil:
				at := r.Sent.At
				if at.IsZero() {
					at = time.Now()
				}
				mv := move{id: r.MessageID, to: msgSent, at: at, providerID: r.Sent.ProviderID}
				if r.Sent.PossibleRepeat {
					mv.detail = possibleRepeat
				}
				moves = append(moves, mv)
				if r.Sent.ProviderID != "" {
					sent = append(sent, early{r.InstanceID, r.Sent.ProviderID, r.MessageID})
				}
			case r.Failure != nil:
				moves = append(moves, move{id: r.MessageID, to: msgFailed, at: time.Now(), detail: r.Failure.Code, failure: r.Failure})
			}
		}
		if _, err = s.advanceMany(ctx, tx, moves); err != nil {
			return err
		}
		for _, r := range results {
			// Polls only, and on few networks: one statement each.
			if ok[r.MessageID] && r.Sent != nil && r.Sent.PollID != "" {
				if err := s.db.Messages.SetProviderPollID(ctx, tx, r.MessageID, r.Sent.PollID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range sent {
		if err := s.applyEarly(ctx, e.instanceID, e.providerID, e.messageID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// possibleRepeat is the detail of the sent step of a message the network may hold twice (Sent.PossibleRepeat).
const possibleRepeat = "sent again after an attempt whose outcome was unknown; the network cannot recognise a repeat, " +
	"so the recipient may have it twice"

// Backoff records that an instance's session failed and is tried again at next: the instance shows reconnecting
// with the attempt and its time, and the reason. An instance that is offline meanwhile (disconnected, deleted)
// stays as it is.
func (s *Recorder) Backoff(ctx context.Context, instanceID string, attempt int, next time.Time, reason string) error {
	reason = text.Clean(reason) // a session's error, which may quote its network
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return s.backoff(ctx, tx, instanceID, attempt, next, reason)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Staggered records the instances a start (or a takeover) connects later, each at its time in next: they show
// reconnecting with the reason meanwhile. One transaction for all of them, set-based: one read that locks their rows
// in ID order, one statement that writes every changed state and their instance.status_changed events numbered and
// written together — a restart of ten thousand instances is a few short commits rather than five statements each
// before the first connect. An instance deleted or offline meanwhile stays as it is, and so does one restricted
// beyond its turn (the runtime waits for the restriction's end).
func (s *Recorder) Staggered(ctx context.Context, next map[string]time.Time, reason string) error {
	ids := slices.Sorted(maps.Keys(next))
	return s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		rows, err := s.db.Instances.LockMany(ctx, tx, ids)
		if err != nil {
			return err
		}
		changed := make([]store.Instance, 0, len(rows))
		var from []Status
		for _, i := range rows {
			if st, ok := markReconnecting(&i, 0, next[i.ID], reason); ok {
				changed, from = append(changed, i), append(from, st)
			}
		}
		if err := s.db.Instances.SaveStates(ctx, tx, changed); err != nil {
			return err
		}
		evs := make([]events.Pending, 0, len(changed))
		for k, i := range changed {
			if from[k] != StatusReconnecting {
				evs = append(evs, s.statusChanged(i, from[k]))
			}
		}
		return s.emitNumbered(ctx, tx, evs...)
	})
}

// staggerable says whether an instance shows reconnecting until its turn at next: not when it is offline (nothing
// is to connect), restricted beyond next (it waits for the restriction's end) or in a state that cannot move there.
func staggerable(i store.Instance, next time.Time) bool {
	st := Status(i.Status)
	switch {
	case offline(st):
		return false
	case st == StatusRestricted && i.ReconnectNextAt != nil && i.ReconnectNextAt.After(next):
		return false
	}
	return st == StatusReconnecting || CanMove(st, StatusReconnecting)
}

func (s *Recorder) backoff(ctx context.Context, tx store.Tx, instanceID string, attempt int, next time.Time, reason string) error {
	i, err := s.db.Instances.Lock(ctx, tx, instanceID)
	if err != nil {
		return err
	}
	from, ok := markReconnecting(&i, attempt, next, reason)
	if !ok {
		return nil // a start before a restriction ends shows restricted, and the runtime waits for its end
	}
	if err := s.db.Instances.Save(ctx, tx, &i); err != nil || from == StatusReconnecting {
		return err
	}
	return s.emitNumbered(ctx, tx, s.statusChanged(i, from))
}

// markReconnecting sets an instance (not saved) to show reconnecting with the reason until its next attempt at
// next, counted as attempt, when it may (staggerable); it returns the state the instance had, and false when it
// stays as it is. An instance already reconnecting keeps its since and needs no status event.
func markReconnecting(i *store.Instance, attempt int, next time.Time, reason string) (Status, bool) {
	from := Status(i.Status)
	if !staggerable(*i, next) {
		return from, false
	}
	if from != StatusReconnecting {
		moveTo(i, StatusReconnecting, reason)
	}
	nextAt := micro(next)
	i.StatusReason, i.ReconnectAttempt, i.ReconnectNextAt = reason, attempt, &nextAt
	return from, true
}

// Restrict records that the network restricted an instance's account until a time (a temporary ban): it shows
// restricted with the network's reason and the end as its next attempt. An instance offline or deleted meanwhile
// stays as it is.
func (s *Recorder) Restrict(ctx context.Context, instanceID string, until time.Time, reason string) error {
	reason = text.Clean(reason)
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		i, err := s.db.Instances.Lock(ctx, tx, instanceID)
		if err != nil {
			return err
		}
		from := Status(i.Status)
		if offline(from) || !CanMove(from, StatusRestricted) {
			return nil
		}
		end := micro(until)
		i.ReconnectAttempt, i.ReconnectNextAt = 0, &end
		if from == StatusRestricted {
			i.StatusReason = reason
			return s.db.Instances.Save(ctx, tx, &i)
		}
		return s.move(ctx, tx, &i, StatusRestricted, reason)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// GiveUp moves an instance whose session failed more often than its failure budget allows to failed, with the
// reason; it stays there until a client connects it again.
func (s *Recorder) GiveUp(ctx context.Context, instanceID, reason string) error {
	reason = text.Clean(reason)
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		i, err := s.db.Instances.Lock(ctx, tx, instanceID)
		if err != nil {
			return err
		}
		if offline(Status(i.Status)) || !CanMove(Status(i.Status), StatusFailed) {
			return nil
		}
		return s.move(ctx, tx, &i, StatusFailed, reason)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Pacing is an instance's send pacing: its own, else its provider's default (see Paced); nil where it takes the
// server's default.
func (s *Recorder) Pacing(ctx context.Context, instanceID string) (rate, burst *int, err error) {
	all, err := s.PacingOf(ctx, []string{instanceID})
	if err != nil {
		return nil, nil, err
	}
	if p, ok := all[instanceID]; ok {
		return &p.Rate, &p.Burst, nil
	}
	return nil, nil, nil
}

// PacingOf is Pacing of many instances in one read: the pacing of those among ids that do not take the server's
// default, by ID.
func (s *Recorder) PacingOf(ctx context.Context, ids []string) (map[string]Pacing, error) {
	rows, err := s.db.Instances.PacingOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Pacing, len(rows))
	for id, r := range rows {
		switch {
		case r.Rate != nil && r.Burst != nil:
			out[id] = Pacing{Rate: *r.Rate, Burst: *r.Burst}
		default:
			if p, ok := s.provider(r.Provider); ok {
				if paced, ok := p.(Paced); ok {
					out[id] = paced.DefaultPacing()
				}
			}
		}
	}
	return out, nil
}
