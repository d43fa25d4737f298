package providertest

import "testing"

// addresses normalizes the harness's addresses and the provider's example twice, and checks that every address
// the run's sessions reported (accounts, senders, chats, groups and their participants, contacts) and the
// addresses the harness names are in their normal form already.
func (s *suite) addresses(t *testing.T) {
	p := s.e.provider
	if len(s.h.Addresses) == 0 {
		t.Error("the harness gives no addresses to normalize")
	}
	for _, raw := range append([]string{p.Info().AddressExample}, s.h.Addresses...) {
		norm, err := p.NormalizeAddress(raw)
		if err != nil {
			if raw == p.Info().AddressExample {
				t.Errorf("the provider's address example %q does not normalize: %v", raw, err)
			}
			continue
		}
		if again, err := p.NormalizeAddress(norm); err != nil || again != norm {
			t.Errorf("%q normalizes to %q, which normalizes to %q (%v)", raw, norm, again, err)
		}
	}
	i := s.e.connect(t)
	normal := func(what, addr string) {
		if addr == "" {
			return
		}
		if norm, err := p.NormalizeAddress(addr); err != nil || norm != addr {
			t.Errorf("%s %q is not in its normal form: it normalizes to %q (%v)", what, addr, norm, err)
		}
	}
	normal("the harness's stranger", s.e.net.Stranger)
	normal("the peer's address", i.acct.Peer.Address())
	for _, c := range s.e.calls.all() {
		switch c.Kind {
		case "connected":
			normal("the account reported", c.Party.Address)
		case "contact":
			normal("the contact reported", c.Party.Address)
		case "vote":
			normal("the voter on "+c.Vote.Poll, c.Vote.Voter.Address)
		case "presence":
			normal("the contact whose presence was reported", c.Presence.From.Address)
			normal("the chat of a chat state", c.Presence.Chat)
		case "inbound":
			normal("the sender of "+c.Inbound.ProviderID, c.Inbound.From.Address)
			normal("the chat of "+c.Inbound.ProviderID, c.Inbound.Chat)
		case "group":
			normal("the group reported", c.Group.Address)
			for _, m := range c.Group.Participants {
				normal("a participant of "+c.Group.Address, m.Address)
			}
		}
	}
}
