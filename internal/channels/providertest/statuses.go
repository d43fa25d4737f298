package providertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
)

// rank orders the statuses of a sent message; failed has none, it ends the history wherever it comes.
var rank = map[string]int{"queued": 0, "sending": 1, "sent": 2, "delivered": 3, "read": 4}

// The receipts of a message in orders a network may deliver them: read before delivered, each twice, a late
// delivered after read.
var shuffled = [][]string{
	{"read", "delivered"},
	{"delivered", "delivered", "read", "read", "delivered"},
	{"read", "read"},
	{"delivered", "read", "delivered"},
	{"delivered"},
}

// With failures: a failure of a message only sent fails it for good; one after it was delivered changes nothing.
var withFailures = [][]string{
	{"failed", "delivered", "read"},
	{"delivered", "failed", "read"},
	{"failed", "failed", "delivered"},
}

// statuses sends messages through the service and the runtime, has the peer's network report their receipts in
// the orders above, and checks each message's history in the service.
func (s *suite) statuses(t *testing.T) {
	s.applies(t, RuleStatusesForward)
	info := s.e.provider.Info()
	var listed []string
	for _, r := range []struct {
		c      channels.Capability
		status string
	}{{channels.CapDelivered, "delivered"}, {channels.CapRead, "read"}} {
		if info.Has(r.c) {
			listed = append(listed, r.status)
		}
	}
	if len(listed) == 0 {
		t.Fatalf("the provider lists no receipts, and the harness does not declare %q not applicable",
			RuleStatusesForward)
	}
	i := s.e.connect(t)
	s.deliver(t, i, only(shuffled, listed), listed)
	t.Run(string(RuleFailedTerminal), func(t *testing.T) {
		s.applies(t, RuleFailedTerminal)
		s.deliver(t, i, only(withFailures, append(slices.Clone(listed), "failed")), listed)
	})
}

// only keeps the statuses of sequences that are among keep, and the sequences left with any.
func only(sequences [][]string, keep []string) [][]string {
	var out [][]string
	for _, seq := range sequences {
		var kept []string
		for _, st := range seq {
			if slices.Contains(keep, st) {
				kept = append(kept, st)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// deliver sends one message per sequence, has the peer report the sequence's receipts for it, and checks the
// histories once a last message's receipt (of the highest status listed) was applied: the network delivers one
// peer's receipts in order, so every receipt before it was applied too.
func (s *suite) deliver(t *testing.T, i *instance, sequences [][]string, listed []string) {
	t.Helper()
	ids := make([]string, len(sequences))
	for k := range sequences {
		ids[k] = i.send(t, unique(fmt.Sprintf("receipts %d", k)))
	}
	last := i.send(t, unique("the last receipt"))
	sent := func(id string) string {
		return i.awaitMessage(t, id, func(m message) bool { return m.ProviderID != "" }).ProviderID
	}
	for k, seq := range sequences {
		pid := sent(ids[k])
		for _, st := range seq {
			if err := i.acct.Peer.Receipt(bounded(t), pid, st); err != nil {
				if errors.Is(err, errors.ErrUnsupported) && st == "failed" {
					t.Fatalf("the network reports no failure of a sent message, and the harness does not "+
						"declare %q not applicable", RuleFailedTerminal)
				}
				t.Fatalf("the peer's %s receipt: %v", st, err)
			}
		}
	}
	top := listed[len(listed)-1]
	if err := i.acct.Peer.Receipt(bounded(t), sent(last), top); err != nil {
		t.Fatalf("the peer's %s receipt: %v", top, err)
	}
	i.awaitMessage(t, last, func(m message) bool { return m.Status == top })
	for k, seq := range sequences {
		m := i.message(t, ids[k])
		if err := forward(m.History); err != nil {
			t.Errorf("receipts %v: history %v: %v", seq, m.History, err)
		}
		if want := expected(seq); m.Status != want {
			t.Errorf("receipts %v: status %s, want %s", seq, m.Status, want)
		}
	}
}

// forward reports how a history goes backwards, if it does.
func forward(history []string) error {
	for k := 1; k < len(history); k++ {
		prev, next := history[k-1], history[k]
		switch {
		case prev == "failed":
			return fmt.Errorf("it moves on to %s after failed", next)
		case next == "failed" && rank[prev] > rank["sent"]:
			return fmt.Errorf("a %s message fails", prev)
		case next != "failed" && rank[next] <= rank[prev]:
			return fmt.Errorf("%s follows %s", next, prev)
		}
	}
	return nil
}

// expected is the status a sent message ends in after its receipts: the highest one, unless a failure came
// before it was delivered, which ends it.
func expected(receipts []string) string {
	status := "sent"
	for _, st := range receipts {
		switch {
		case status == "failed":
		case st == "failed":
			if rank[status] <= rank["sent"] {
				status = st
			}
		case rank[st] > rank[status]:
			status = st
		}
	}
	return status
}
