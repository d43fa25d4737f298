package providertest

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// leaseLost has another process take an instance's lease over. Once the runtime let go of the session, nothing
// reported through the sink the session was given may be recorded (the session may not have noticed yet, or may
// have goroutines left), and the session itself must report nothing more.
func (s *suite) leaseLost(t *testing.T) {
	i := s.e.connect(t)
	old := i.loseLease(t)
	before := i.trace(t)
	peer := i.acct.Peer.Address()
	stranger := s.e.net.Stranger
	c := context.Background()
	for _, r := range []struct {
		what string
		call func() error
	}{
		{"a state", func() error { return old.sink.State(c, channels.StatusConnecting, "after the lease was lost") }},
		{"an account", func() error {
			return old.sink.Connected(c, channels.Party{Address: stranger, DisplayName: "stale"}, []byte("stale"))
		}},
		{"a message", func() error {
			return old.sink.Inbound(c, channels.Inbound{ProviderID: store.NewID("lost"), Chat: peer,
				From: channels.Party{Address: peer}, Type: channels.TypeText, Text: "after the lease was lost"})
		}},
		{"a contact", func() error {
			return old.sink.ContactChanged(c, channels.Party{Address: stranger, DisplayName: "after the lease was lost"})
		}},
		{"a group", func() error {
			return old.sink.GroupChanged(c, channels.Group{Address: stranger, Subject: "after the lease was lost"},
				channels.GroupCreated)
		}},
	} {
		if err := r.call(); err == nil {
			t.Errorf("the sink took %s after the runtime let go of the session", r.what)
		}
	}
	if after := i.trace(t); after != before {
		t.Errorf("reports after the lease was lost were recorded: %+v, then %+v", before, after)
	}
	// The peer writes while no process holds the instance; the session the runtime opens when it holds the
	// instance again receives it. The old session, had it still listened, would have reported it first.
	text := unique("while the lease was lost")
	if err := i.acct.Peer.Send(bounded(t), text); err != nil {
		t.Fatalf("the peer's message: %v", err)
	}
	i.returnLease(t)
	s.e.calls.await(t, "the message to reach the instance's next session", i.id, func(c Call) bool {
		return c.Kind == "inbound" && c.Inbound.Text == text && c.Err == nil
	})
	for _, c := range s.e.lateCalls() {
		t.Errorf("a session reported %s after the runtime let go of it", c)
	}
}
