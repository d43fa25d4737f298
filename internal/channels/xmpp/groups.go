package xmpp

import (
	"context"
	"crypto/rand"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"time"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/switchboard/switchboard/internal/channels"
)

// room is a multi-user chat room the account is in.
type room struct {
	addr      jid.JID // bare
	nick      string
	subject   string
	joined    bool
	occupants map[string]occupant // by nick
}

type occupant struct {
	jid         string // bare real address, when the room shows it
	role        string
	affiliation string
}

// joinResult is what a room answers a join with.
type joinResult struct {
	created bool // the room did not exist: it is locked until configured
	err     error
}

// isRoom reports whether addr is a room (one the account is in, or an address on the groups service).
func (s *session) isRoom(addr jid.JID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rooms[addr.String()]; ok {
		return true
	}
	return !s.features.muc.Equal(jid.JID{}) && addr.Domainpart() == s.features.muc.Domainpart()
}

// inRoom reports whether the account is in the room addr.
func (s *session) inRoom(addr jid.JID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.rooms[addr.String()]
	return ok
}

func (s *session) fromSelf(roomAddr jid.JID, nick string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rooms[roomAddr.String()]
	return ok && r.nick == nick
}

// occupant is the party behind a nick: the real account when the room shows it, else the occupant's room address.
func (s *session) occupant(roomAddr jid.JID, nick string) channels.Party {
	s.mu.Lock()
	defer s.mu.Unlock()
	full := roomAddr.String() + "/" + nick
	if r, ok := s.rooms[roomAddr.String()]; ok {
		if o, ok := r.occupants[nick]; ok && o.jid != "" {
			return channels.Party{Address: o.jid, DisplayName: nick, IDs: []string{full}}
		}
	}
	return channels.Party{Address: full, DisplayName: nick}
}

// group is the room as its occupants show it (no queries: used from the stanza handler).
func (s *session) groupLocked(r *room) channels.Group {
	g := channels.Group{Address: r.addr.String(), Subject: r.subject}
	for nick, o := range r.occupants {
		p := channels.Participant{Address: o.jid, DisplayName: nick, Role: roleOf(o.affiliation)}
		if p.Address == "" {
			p.Address = r.addr.String() + "/" + nick
		}
		g.Participants = append(g.Participants, p)
	}
	slices.SortFunc(g.Participants, func(a, b channels.Participant) int { return strings.Compare(a.Address, b.Address) })
	return g
}

func roleOf(affiliation string) string {
	switch affiliation {
	case "owner":
		return "owner"
	case "admin":
		return "admin"
	}
	return "member"
}

func (s *session) mucService() (jid.JID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.features.muc.Equal(jid.JID{}) {
		return jid.JID{}, refusal("capability_not_supported", "the server offers no multi-user chat service")
	}
	return s.features.muc, nil
}

// CreateGroup implements channels.GroupManager: a new persistent room on the groups service, its name and subject
// the group's subject, the participants made members and invited.
func (s *session) CreateGroup(ctx context.Context, subject string, participants []string) (channels.Group, error) {
	xs, err := s.conn()
	if err != nil {
		return channels.Group{}, err
	}
	svc, err := s.mucService()
	if err != nil {
		return channels.Group{}, err
	}
	addr, err := jid.New("sb-"+strings.ToLower(newID()), svc.Domainpart(), "")
	if err != nil {
		return channels.Group{}, err
	}
	res, err := s.join(ctx, xs, addr)
	if err != nil {
		return channels.Group{}, err
	}
	if !res.created {
		return channels.Group{}, refusal("conflict", "a room named %s exists already", addr)
	}
	if err := s.configure(ctx, xs, addr, map[string]string{
		"muc#roomconfig_roomname":       subject,
		"muc#roomconfig_persistentroom": "1",
		"muc#roomconfig_whois":          "anyone", // occupants' real addresses: one person is one contact
		"muc#roomconfig_changesubject":  "0",
	}); err != nil {
		return channels.Group{}, err
	}
	if subject != "" {
		if err := s.setSubject(ctx, xs, addr, subject); err != nil {
			return channels.Group{}, err
		}
	}
	var rejected []channels.ParticipantResult
	if len(participants) > 0 {
		results, err := s.ChangeParticipants(ctx, addr.String(), "add", participants)
		if err != nil {
			return channels.Group{}, err
		}
		for _, r := range results {
			if !r.OK {
				rejected = append(rejected, r)
			}
		}
	}
	s.saveRooms(ctx, xs)
	g, err := s.GetGroup(ctx, addr.String())
	g.Rejected = rejected
	return g, err
}

// join enters a room and waits for its answer.
func (s *session) join(ctx context.Context, xs *xmpp.Session, addr jid.JID) (joinResult, error) {
	nick := s.cfg.JID.Localpart()
	for attempt := 0; ; attempt++ {
		wait := make(chan joinResult, 1)
		s.mu.Lock()
		r, ok := s.rooms[addr.String()]
		if !ok {
			r = &room{addr: addr, occupants: map[string]occupant{}}
			s.rooms[addr.String()] = r
		}
		r.nick, r.joined = nick, false
		s.joinWaiters[addr.String()] = wait
		s.mu.Unlock()
		full, err := addr.WithResource(nick)
		if err != nil {
			return joinResult{}, refusal("invalid_address", "the account's name is not a valid room nickname")
		}
		presence := struct {
			XMLName xml.Name `xml:"presence"`
			To      string   `xml:"to,attr"`
			X       struct {
				XMLNS   string `xml:"xmlns,attr"`
				History struct {
					MaxStanzas string `xml:"maxstanzas,attr,omitempty"`
					Since      string `xml:"since,attr,omitempty"`
				} `xml:"history"`
			} `xml:"x"`
		}{To: full.String()}
		presence.X.XMLNS = nsMUC
		// The room's history since the last message this process saw there (what was said while the instance was
		// away; those it had have the same ids), or none for a room it has not seen: a new room, or one joined
		// before this process held the instance, whose old messages are not news.
		s.mu.Lock()
		seen, ok := s.lastSeen[addr.String()]
		s.mu.Unlock()
		if ok {
			presence.X.History.Since = seen.UTC().Format(time.RFC3339Nano)
		} else {
			presence.X.History.MaxStanzas = "0"
		}
		if err := xs.Send(ctx, tokens(presence)); err != nil {
			return joinResult{}, &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
		}
		var res joinResult
		select {
		case res = <-wait:
		case <-ctx.Done():
			s.mu.Lock()
			delete(s.joinWaiters, addr.String())
			s.mu.Unlock()
			return joinResult{}, ctx.Err()
		}
		var se stanza.Error
		if res.err != nil && errors.As(res.err, &se) && se.Condition == stanza.Conflict && attempt == 0 {
			nick = nick + "-" + strings.ToLower(newID()[:4])
			continue
		}
		if res.err != nil {
			s.mu.Lock()
			delete(s.rooms, addr.String())
			s.mu.Unlock()
			return res, stanzaFailure(res.err, "joining the room")
		}
		return res, nil
	}
}

// configure submits the room's configuration form with values changed.
func (s *session) configure(ctx context.Context, xs *xmpp.Session, addr jid.JID, values map[string]string) error {
	var q struct {
		Form dataForm `xml:"jabber:x:data x"`
	}
	if err := s.query(ctx, xs, stanza.GetIQ, addr, struct {
		XMLName xml.Name `xml:"http://jabber.org/protocol/muc#owner query"`
	}{}, &q); err != nil {
		return stanzaFailure(err, "reading the room's configuration")
	}
	submit := dataForm{Type: "submit"}
	for _, f := range q.Form.Fields {
		if f.Var == "" || f.Type == "fixed" {
			continue
		}
		if v, ok := values[f.Var]; ok {
			f.Values = []string{v}
		}
		submit.Fields = append(submit.Fields, formField{Var: f.Var, Values: f.Values})
	}
	err := s.query(ctx, xs, stanza.SetIQ, addr, struct {
		XMLName xml.Name `xml:"http://jabber.org/protocol/muc#owner query"`
		Form    dataForm
	}{Form: submit}, nil)
	return stanzaFailure(err, "configuring the room")
}

func (s *session) setSubject(ctx context.Context, xs *xmpp.Session, addr jid.JID, subject string) error {
	if err := xs.Send(ctx, tokens(outMessage{ID: newID(), To: addr.String(), Type: "groupchat", Subject: &subject})); err != nil {
		return &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	s.mu.Lock()
	if r, ok := s.rooms[addr.String()]; ok {
		r.subject = subject
	}
	s.mu.Unlock()
	return nil
}

// GetGroup implements channels.GroupManager: the room's name, description and subject from its service discovery,
// its participants from its affiliation lists (what the account may see of them) and its occupants.
func (s *session) GetGroup(ctx context.Context, group string) (channels.Group, error) {
	xs, addr, err := s.roomCall(group)
	if err != nil {
		return channels.Group{}, err
	}
	info, err := s.discoInfo(ctx, xs, addr)
	if err != nil {
		return channels.Group{}, stanzaFailure(err, "reading the room")
	}
	g := channels.Group{Address: addr.String(), Description: info.formValue("muc#roominfo_description"),
		Subject: info.formValue("muc#roominfo_subject")}
	if g.Subject == "" {
		for _, id := range info.Identity {
			if id.Category == "conference" {
				g.Subject = id.Name
			}
		}
	}
	byAddr := map[string]channels.Participant{}
	for _, aff := range []string{"owner", "admin", "member"} {
		var list struct {
			Items []mucItem `xml:"item"`
		}
		if err := s.query(ctx, xs, stanza.GetIQ, addr, adminQuery{Items: []mucItem{{Affiliation: aff}}}, &list); err != nil {
			continue // the account may not see the lists: the occupants below still show who is there
		}
		for _, it := range list.Items {
			if j, err := jid.Parse(it.JID); err == nil {
				byAddr[j.Bare().String()] = channels.Participant{Address: j.Bare().String(), Role: roleOf(aff)}
			}
		}
	}
	s.mu.Lock()
	if r, ok := s.rooms[addr.String()]; ok {
		if r.subject != "" {
			g.Subject = r.subject
		}
		for _, p := range s.groupLocked(r).Participants {
			if old, ok := byAddr[p.Address]; ok {
				old.DisplayName = p.DisplayName
				byAddr[p.Address] = old
			} else {
				byAddr[p.Address] = p
			}
		}
	}
	s.mu.Unlock()
	for _, p := range byAddr {
		g.Participants = append(g.Participants, p)
	}
	slices.SortFunc(g.Participants, func(a, b channels.Participant) int { return strings.Compare(a.Address, b.Address) })
	return g, nil
}

// adminQuery is a muc#admin query: affiliation and role lists and changes.
type adminQuery struct {
	XMLName xml.Name  `xml:"http://jabber.org/protocol/muc#admin query"`
	Items   []mucItem `xml:"item"`
}

// UpdateGroup implements channels.GroupManager: the subject by a subject message, the description in the room's
// configuration.
func (s *session) UpdateGroup(ctx context.Context, group string, subject, description *string) (channels.Group, error) {
	xs, addr, err := s.roomCall(group)
	if err != nil {
		return channels.Group{}, err
	}
	if subject != nil {
		if err := s.setSubject(ctx, xs, addr, *subject); err != nil {
			return channels.Group{}, err
		}
	}
	if description != nil {
		if err := s.configure(ctx, xs, addr, map[string]string{"muc#roomconfig_roomdesc": *description}); err != nil {
			return channels.Group{}, err
		}
	}
	return s.GetGroup(ctx, group)
}

// ChangeParticipants implements channels.GroupManager. add makes each participant a member and invites them;
// remove takes the membership away and removes them from the room if present; promote and demote make them admins
// or members again.
func (s *session) ChangeParticipants(ctx context.Context, group, action string, participants []string) ([]channels.ParticipantResult, error) {
	xs, addr, err := s.roomCall(group)
	if err != nil {
		return nil, err
	}
	affiliation := map[string]string{"add": "member", "remove": "none", "promote": "admin", "demote": "member"}[action]
	if affiliation == "" {
		return nil, refusal("invalid_action", "unknown participant action %q", action)
	}
	out := make([]channels.ParticipantResult, 0, len(participants))
	for _, raw := range participants {
		res := channels.ParticipantResult{Address: raw}
		who, err := jid.Parse(strings.TrimPrefix(raw, "xmpp:"))
		if err != nil || who.Localpart() == "" {
			res.Failure = refusal("invalid_address", "not an XMPP address")
			out = append(out, res)
			continue
		}
		who = who.Bare()
		res.Address = who.String()
		err = s.query(ctx, xs, stanza.SetIQ, addr, adminQuery{Items: []mucItem{{JID: who.String(), Affiliation: affiliation}}}, nil)
		if err == nil && action == "remove" {
			if nick := s.nickOf(addr, who.String()); nick != "" {
				err = s.query(ctx, xs, stanza.SetIQ, addr, adminQuery{Items: []mucItem{{Nick: nick, Role: "none"}}}, nil)
			}
		}
		if err == nil && action == "add" {
			err = s.invite(ctx, xs, addr, who)
		}
		if err != nil {
			var f *channels.Failure
			if !errors.As(stanzaFailure(err, "changing "+who.String()), &f) {
				return nil, err
			}
			res.Failure = f
		} else {
			res.OK = true
		}
		out = append(out, res)
	}
	return out, nil
}

func (s *session) nickOf(addr jid.JID, who string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rooms[addr.String()]; ok {
		for nick, o := range r.occupants {
			if o.jid == who {
				return nick
			}
		}
	}
	return ""
}

// invite sends a mediated invitation (the room forwards it, so it works whoever's server the invitee is on).
func (s *session) invite(ctx context.Context, xs *xmpp.Session, addr, who jid.JID) error {
	msg := struct {
		XMLName xml.Name `xml:"message"`
		ID      string   `xml:"id,attr"`
		To      string   `xml:"to,attr"`
		X       struct {
			XMLNS  string `xml:"xmlns,attr"`
			Invite struct {
				To string `xml:"to,attr"`
			} `xml:"invite"`
		} `xml:"x"`
	}{ID: newID(), To: addr.String()}
	msg.X.XMLNS = nsMUCUser
	msg.X.Invite.To = who.String()
	return xs.Send(ctx, tokens(msg))
}

// InviteLink implements channels.GroupManager: an XMPP room's address is its invitation (an xmpp: URI, RFC 5122).
// It cannot be revoked; a room that must keep people out is made members-only instead.
func (s *session) InviteLink(ctx context.Context, group string, revoke bool) (string, error) {
	addr, err := roomAddress(group)
	if err != nil {
		return "", err
	}
	if revoke {
		return "", refusal("capability_not_supported", "an XMPP room's address is its invitation and cannot be revoked")
	}
	return "xmpp:" + addr.String() + "?join", nil
}

// JoinGroup implements channels.GroupManager: invite is a room's address or its xmpp: URI.
func (s *session) JoinGroup(ctx context.Context, invite string) (channels.Group, error) {
	xs, addr, err := s.roomCall(invite)
	if err != nil {
		return channels.Group{}, err
	}
	// Servers create a room on a join to an unknown address; joining is for rooms that exist.
	if _, err := s.discoInfo(ctx, xs, addr); err != nil {
		return channels.Group{}, stanzaFailure(err, "looking the room up")
	}
	if _, err := s.join(ctx, xs, addr); err != nil {
		return channels.Group{}, err
	}
	s.saveRooms(ctx, xs)
	return s.GetGroup(ctx, addr.String())
}

// LeaveGroup implements channels.GroupManager.
func (s *session) LeaveGroup(ctx context.Context, group string) error {
	xs, addr, err := s.roomCall(group)
	if err != nil {
		return err
	}
	s.mu.Lock()
	r, ok := s.rooms[addr.String()]
	delete(s.rooms, addr.String())
	s.mu.Unlock()
	if !ok {
		return refusal("not_found", "the account is not in %s", addr)
	}
	full, _ := addr.WithResource(r.nick)
	if err := xs.Send(ctx, stanza.Presence{To: full, Type: stanza.UnavailablePresence}.Wrap(nil)); err != nil {
		return &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	s.saveRooms(ctx, xs)
	return nil
}

// roomCall is the start of every call about a room: the live connection and the room's address.
func (s *session) roomCall(group string) (*xmpp.Session, jid.JID, error) {
	xs, err := s.conn()
	if err != nil {
		return nil, jid.JID{}, err
	}
	addr, err := roomAddress(group)
	return xs, addr, err
}

func roomAddress(raw string) (jid.JID, error) {
	s := strings.TrimPrefix(strings.TrimSpace(raw), "xmpp:")
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" {
		return jid.JID{}, refusal("invalid_address", "not a room address (room@conference.example.org)")
	}
	return j.Bare(), nil
}

// stanzaFailure turns an error answer into the call's failure; other errors (the connection) pass unchanged.
func stanzaFailure(err error, doing string) error {
	if err == nil {
		return nil
	}
	var se stanza.Error
	if !errors.As(err, &se) {
		return err
	}
	code := "network_error"
	switch se.Condition {
	case stanza.Forbidden, stanza.NotAllowed, stanza.NotAuthorized, stanza.RegistrationRequired:
		code = "not_permitted"
	case stanza.ItemNotFound, stanza.RemoteServerNotFound, stanza.ServiceUnavailable:
		code = "not_found"
	case stanza.FeatureNotImplemented:
		code = "capability_not_supported"
	case stanza.BadRequest, stanza.JIDMalformed, stanza.NotAcceptable:
		code = "invalid_argument"
	}
	return &channels.Failure{Code: code, Detail: doing + ": " + string(se.Condition)}
}

// onSubject records a room's new subject and reports the group changed.
func (s *session) onSubject(ctx context.Context, addr jid.JID, subject string) {
	s.mu.Lock()
	r, ok := s.rooms[addr.String()]
	if !ok || r.subject == subject {
		s.mu.Unlock()
		return
	}
	r.subject = subject
	g := s.groupLocked(r)
	s.mu.Unlock()
	if err := s.sink.GroupChanged(ctx, g, channels.GroupUpdated); err != nil {
		s.logf("group change not stored", "error", err)
	}
}

// onInvite reports an invitation: the inviter made the account a member of the room (as ChangeParticipants does),
// so the group is new to the instance; JoinGroup with its address enters it.
func (s *session) onInvite(ctx context.Context, addr jid.JID, from string) {
	g := channels.Group{Address: addr.String()}
	if j, err := jid.Parse(from); err == nil {
		g.Participants = []channels.Participant{{Address: j.Bare().String(), Role: "member"}}
	}
	if err := s.sink.GroupChanged(ctx, g, channels.GroupCreated); err != nil {
		s.logf("invitation not stored", "error", err)
	}
}

// onRoomPresence follows a room's occupants and answers the join waiting for it.
func (s *session) onRoomPresence(ctx context.Context, p inPresence, from jid.JID) {
	addr, nick := from.Bare(), from.Resourcepart()
	s.mu.Lock()
	r, ok := s.rooms[addr.String()]
	if !ok {
		s.mu.Unlock()
		return
	}
	wait := s.joinWaiters[addr.String()]
	if p.Type == "error" {
		delete(s.joinWaiters, addr.String())
		s.mu.Unlock()
		if wait != nil {
			wait <- joinResult{err: presenceError(p)}
		}
		return
	}
	self := p.MUCUser.has(110) || nick == r.nick
	var item mucItem
	if p.MUCUser != nil && len(p.MUCUser.Items) > 0 {
		item = p.MUCUser.Items[0]
	}
	realJID := ""
	if j, err := jid.Parse(item.JID); err == nil && item.JID != "" {
		realJID = j.Bare().String()
	}
	var change string
	if self {
		if p.Type == "unavailable" {
			delete(s.rooms, addr.String())
			if p.MUCUser.has(307) || p.MUCUser.has(301) || p.MUCUser.has(321) {
				change = channels.GroupLeft
			}
		} else if !r.joined {
			r.joined = true
			delete(s.joinWaiters, addr.String())
			if wait != nil {
				wait <- joinResult{created: p.MUCUser.has(201)}
			}
		}
		r.occupants[nick] = occupant{jid: s.cfg.JID.Bare().String(), role: item.Role, affiliation: item.Affiliation}
	} else {
		_, was := r.occupants[nick]
		if p.Type == "unavailable" {
			delete(r.occupants, nick)
			if was && r.joined {
				change = channels.GroupParticipantsChanged
			}
		} else {
			r.occupants[nick] = occupant{jid: realJID, role: item.Role, affiliation: item.Affiliation}
			if !was && r.joined {
				change = channels.GroupParticipantsChanged
			}
		}
	}
	g := s.groupLocked(r)
	s.mu.Unlock()
	if change == "" {
		return
	}
	if err := s.sink.GroupChanged(ctx, g, change); err != nil {
		s.logf("group change not stored", "error", err)
	}
	if change == channels.GroupLeft {
		go s.saveRoomsAsync()
	}
}

func presenceError(p inPresence) error {
	se := stanza.Error{Type: stanza.Cancel, Condition: stanza.UndefinedCondition}
	if p.Error != nil {
		for _, c := range p.Error.Cond {
			if c.XMLName.Local != "text" {
				se.Condition = stanza.Condition(c.XMLName.Local)
			}
		}
	}
	return se
}

// Rooms outlive connections and processes in the account's private XML storage (XEP-0049), so a session that
// reconnects, or starts in another process, rejoins the rooms it was in.
type savedRooms struct {
	XMLName xml.Name `xml:"urn:switchboard:xmpp:rooms:0 rooms"`
	Rooms   []struct {
		JID string `xml:"jid,attr"`
	} `xml:"room"`
}

type privateQuery struct {
	XMLName xml.Name `xml:"jabber:iq:private query"`
	Rooms   savedRooms
}

func (s *session) saveRooms(ctx context.Context, xs *xmpp.Session) {
	var q privateQuery
	s.mu.Lock()
	for addr := range s.rooms {
		q.Rooms.Rooms = append(q.Rooms.Rooms, struct {
			JID string `xml:"jid,attr"`
		}{addr})
	}
	s.mu.Unlock()
	slices.SortFunc(q.Rooms.Rooms, func(a, b struct {
		JID string `xml:"jid,attr"`
	}) int {
		return strings.Compare(a.JID, b.JID)
	})
	if err := s.query(ctx, xs, stanza.SetIQ, jid.JID{}, q, nil); err != nil {
		s.logf("rooms not saved in private storage", "error", err)
	}
}

func (s *session) saveRoomsAsync() {
	xs, err := s.conn()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.p.opts.PingTimeout)
	defer cancel()
	s.saveRooms(ctx, xs)
}

// rejoinRooms enters again the rooms of the private storage and of the session before a reconnect.
func (s *session) rejoinRooms(ctx context.Context, xs *xmpp.Session) {
	var q privateQuery
	want := map[string]bool{}
	if err := s.query(ctx, xs, stanza.GetIQ, jid.JID{}, privateQuery{}, &q); err == nil {
		for _, r := range q.Rooms.Rooms {
			want[r.JID] = true
		}
	}
	s.mu.Lock()
	for addr := range s.rooms {
		want[addr] = true
	}
	s.mu.Unlock()
	for addr := range want {
		j, err := jid.Parse(addr)
		if err != nil {
			continue
		}
		jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := s.join(jctx, xs, j.Bare()); err != nil {
			s.logf("room not rejoined", "room", addr, "error", err)
		}
		cancel()
	}
}

// newID is a random stanza id (26 characters of Crockford base32, like the rest of the product's ids).
func newID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [26]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return string(b[:])
}
