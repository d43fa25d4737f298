package providertest

import (
	"context"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// sendOnce sends a message, then sends it again with the same message ID as the runtime does when it cannot know
// whether the first attempt reached the network: the peer must get it once, or the retry must say it may have
// been carried twice.
func (s *suite) sendOnce(t *testing.T) {
	t.Run(string(RuleRetrySameSession), func(t *testing.T) {
		i := s.e.connect(t)
		snd := i.sender(t)
		m := outbound(i, "sent twice by one session")
		first := s.send(t, snd, m)
		if first.PossibleRepeat {
			t.Error("the first send of a message comes back marked a possible repeat")
		}
		m.Resend = true
		s.expectOnce(t, i, snd, m, s.send(t, snd, m))
	})
	t.Run(string(RuleRetryOtherProcess), func(t *testing.T) {
		i := s.e.connect(t)
		m := outbound(i, "sent again by another process")
		s.send(t, i.sender(t), m)
		// The first process's session ends, as when the process dies; another process's provider sends again.
		i.disconnect(t)
		d := s.detach(t, s.e.net.Provider(), i.raw(t))
		d.connected(t)
		snd, ok := d.sess.(channels.Sender)
		if !ok {
			t.Fatal("the provider's session is no channels.Sender")
		}
		m.Resend = true
		s.expectOnce(t, i, snd, m, s.send(t, snd, m))
	})
	t.Run(string(RuleRetryAnswerLost), func(t *testing.T) {
		s.applies(t, RuleRetryAnswerLost)
		i := s.e.connect(t)
		if i.acct.LoseAnswer == nil {
			t.Fatalf("the harness's Account has no LoseAnswer and does not declare %q not applicable",
				RuleRetryAnswerLost)
		}
		snd := i.sender(t)
		m := outbound(i, "sent again after its answer was lost")
		i.acct.LoseAnswer()
		_, err := snd.Send(bounded(t), m)
		s.e.observe("a send whose answer was lost", err, false)
		if err == nil {
			t.Fatal("the network lost the answer, yet Send says the message was sent")
		}
		m.Resend = true
		s.expectOnce(t, i, snd, m, s.send(t, snd, m))
	})
}

// outbound is a text message to the instance's peer with a message ID of its own.
func outbound(i *instance, text string) channels.Outbound {
	return channels.Outbound{MessageID: store.NewID("msg"), Chat: i.acct.Peer.Address(), Type: channels.TypeText,
		Text: unique(text)}
}

// send sends m and fails t unless the network took it.
func (s *suite) send(t *testing.T, snd channels.Sender, m channels.Outbound) channels.Sent {
	t.Helper()
	sent, err := snd.Send(bounded(t), m)
	s.e.observe("a send", err, false)
	if err != nil {
		t.Fatalf("sending %q: %v", m.Text, err)
	}
	return sent
}

// expectOnce checks that the peer received m once, unless the retry's answer says it may have it twice. The peer
// is asked after a later message of the same sender reached it: a network delivers one sender's messages to one
// peer in order, so a second copy would have arrived by then.
func (s *suite) expectOnce(t *testing.T, i *instance, snd channels.Sender, m channels.Outbound, retry channels.Sent) {
	t.Helper()
	later := outbound(i, "after the retry")
	s.send(t, snd, later)
	got := await.Until(t, "the peer to receive the message sent after the retry", func() []Delivery {
		return received(t, i.acct.Peer)
	}, func(ds []Delivery) bool {
		return slices.ContainsFunc(ds, func(d Delivery) bool { return d.Text == later.Text })
	})
	copies := 0
	for _, d := range got {
		if d.Text == m.Text {
			copies++
		}
	}
	switch {
	case copies == 0:
		t.Errorf("the peer never received %q", m.Text)
	case copies > 1 && !retry.PossibleRepeat:
		t.Errorf("the network carried the message %d times, and the retry did not come back marked "+
			"Sent.PossibleRepeat", copies)
	}
}

// received is what the peer received so far.
func received(t *testing.T, p Peer) []Delivery {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	ds, err := p.Received(c)
	if err != nil {
		t.Fatalf("the peer's messages: %v", err)
	}
	return ds
}
