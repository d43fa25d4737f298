package xmpp

import (
	"context"
	"encoding/xml"
	"errors"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/switchboard/switchboard/internal/channels"
)

// loadRoster reads the roster and reports every contact.
func (s *session) loadRoster(ctx context.Context, xs *xmpp.Session) error {
	var q rosterQuery
	if err := s.query(ctx, xs, stanza.GetIQ, jid.JID{}, rosterQuery{}, &q); err != nil {
		var se stanza.Error
		if errors.As(err, &se) {
			return nil // a server without a roster: no contacts to report
		}
		return err
	}
	for _, it := range q.Items {
		s.rosterItem(ctx, it)
	}
	return nil
}

// rosterItem records a roster entry (from the roster or a push) and reports the contact.
func (s *session) rosterItem(ctx context.Context, it rosterItem) {
	j, err := jid.Parse(it.JID)
	if err != nil {
		return
	}
	addr := j.Bare().String()
	s.mu.Lock()
	if it.Subscription == "remove" {
		delete(s.roster, addr)
	} else {
		s.roster[addr] = it.Name
	}
	s.mu.Unlock()
	if it.Subscription == "remove" {
		return
	}
	s.contactChanged(ctx, addr)
}

func (s *session) displayName(addr string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roster[addr]
}

// contactChanged reports a contact with its display name and presence.
func (s *session) contactChanged(ctx context.Context, addr string) {
	s.mu.Lock()
	p := channels.Party{Address: addr, DisplayName: s.roster[addr], Presence: presenceOf(s.presence[addr])}
	s.mu.Unlock()
	if err := s.sink.ContactChanged(ctx, p); err != nil {
		s.logf("contact change not stored", "error", err)
	}
}

// presenceOf is the most available show of a contact's online resources: available, chat, away, xa, dnd, or
// unavailable without any.
func presenceOf(resources map[string]string) string {
	if len(resources) == 0 {
		return "unavailable"
	}
	best, rank := "", 99
	order := map[string]int{"chat": 0, "": 1, "away": 2, "xa": 3, "dnd": 4}
	for _, show := range resources {
		if r, ok := order[show]; ok && r < rank {
			best, rank = show, r
		}
	}
	if best == "" {
		return "available"
	}
	return best
}

// onPresence handles presence: rooms' occupants, subscription requests, contacts coming and going.
func (s *session) onPresence(ctx context.Context, t xmlstream.TokenReadEncoder, p inPresence) error {
	from, err := jid.Parse(p.From)
	if err != nil || p.From == "" {
		return nil
	}
	bare := from.Bare()
	s.mu.Lock()
	_, inRoom := s.rooms[bare.String()]
	s.mu.Unlock()
	if inRoom || p.MUCUser != nil {
		s.onRoomPresence(ctx, p, from)
		return nil
	}
	if bare.Equal(s.cfg.JID.Bare()) {
		return nil // the account's other clients
	}
	switch p.Type {
	case "subscribe":
		if !s.cfg.AutoAccept {
			return nil
		}
		// Approve, and ask for theirs: both sides then see each other's presence.
		for _, typ := range []string{"subscribed", "subscribe"} {
			if err := t.Encode(struct {
				XMLName xml.Name `xml:"presence"`
				To      string   `xml:"to,attr"`
				Type    string   `xml:"type,attr"`
			}{To: bare.String(), Type: typ}); err != nil {
				return err
			}
		}
		return nil
	case "", "unavailable":
		s.mu.Lock()
		res := s.presence[bare.String()]
		if res == nil {
			res = map[string]string{}
			s.presence[bare.String()] = res
		}
		before := presenceOf(res)
		if p.Type == "unavailable" {
			delete(res, from.Resourcepart())
		} else {
			res[from.Resourcepart()] = p.Show
		}
		after := presenceOf(res)
		s.mu.Unlock()
		if before != after {
			// The contact with its name, and its availability as presence.updated.
			s.contactChanged(ctx, bare.String())
			p := channels.Presence{From: channels.Party{Address: bare.String(), DisplayName: s.displayName(bare.String())}, State: after}
			if err := s.sink.Presence(ctx, p); err != nil {
				s.logf("presence not stored", "error", err)
			}
		}
	}
	return nil
}

// Lookup implements channels.ContactDirectory: an address is on the network when service discovery reaches the
// account (servers answer for their registered accounts and refuse for unknown ones).
func (s *session) Lookup(ctx context.Context, addresses []string) ([]channels.LookupResult, error) {
	xs, err := s.conn()
	if err != nil {
		return nil, err
	}
	out := make([]channels.LookupResult, 0, len(addresses))
	for _, raw := range addresses {
		r := channels.LookupResult{Address: raw}
		norm, err := s.p.NormalizeAddress(raw)
		if err != nil {
			out = append(out, r)
			continue
		}
		r.Normalized = norm
		j := jid.MustParse(norm)
		info, err := s.discoInfo(ctx, xs, j)
		var se stanza.Error
		switch {
		case err == nil:
			r.OnNetwork = info.hasIdentity("account", "registered") || info.hasIdentity("account", "") || len(info.Identity) > 0
		case errors.As(err, &se):
			// An account that exists but keeps its details from strangers still answers with an error
			// other than "no such item" or "no such service".
			r.OnNetwork = se.Condition != stanza.ItemNotFound && se.Condition != stanza.ServiceUnavailable &&
				se.Condition != stanza.RemoteServerNotFound && se.Condition != stanza.RemoteServerTimeout
		default:
			return nil, err
		}
		if r.OnNetwork {
			r.DisplayName = s.displayName(norm)
		}
		out = append(out, r)
	}
	return out, nil
}

// Block implements channels.ContactDirectory with the server's block list (XEP-0191).
func (s *session) Block(ctx context.Context, address string, blocked bool) error {
	xs, err := s.conn()
	if err != nil {
		return err
	}
	s.mu.Lock()
	supported := s.features.blocking
	s.mu.Unlock()
	if !supported {
		return refusal("capability_not_supported", "the server does not support blocking (XEP-0191)")
	}
	norm, err := s.p.NormalizeAddress(address)
	if err != nil {
		return refusal("invalid_address", "%s", err.Error())
	}
	name := "block"
	if !blocked {
		name = "unblock"
	}
	payload := struct {
		XMLName xml.Name
		Item    struct {
			JID string `xml:"jid,attr"`
		} `xml:"item"`
	}{XMLName: xml.Name{Space: nsBlocking, Local: name}}
	payload.Item.JID = norm
	return stanzaFailure(s.query(ctx, xs, stanza.SetIQ, jid.JID{}, payload, nil), name)
}
