package sandbox

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// Send carries a message to a person (held until their instance connects), a group (to every other participant)
// or the echo service. A send repeated with the same message id returns the first one's acknowledgement and
// carries nothing again.
func (s *session) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	rs, number := s.live()
	if number == "" {
		return channels.Sent{}, notConnected()
	}
	if f := s.takeFailure(); f != nil {
		return channels.Sent{}, f
	}
	chat, err := normalize(m.Chat)
	if err != nil {
		return channels.Sent{}, failure("invalid_address", "%v", err)
	}
	msg, err := s.content(ctx, m)
	if err != nil {
		return channels.Sent{}, err
	}
	if err := s.checkReferences(ctx, number, chat, m); err != nil {
		return channels.Sent{}, err
	}
	at := now()
	msg.ID, msg.At, msg.From, msg.FromName, msg.Schedule = newID(), at, number, s.cfg.DisplayName, &s.schedule
	row := &store.SandboxMessage{ID: msg.ID, Sender: number, Chat: chat, SentAt: at}
	if m.MessageID != "" {
		row.ClientID = &m.MessageID
	}
	letters, err := s.route(ctx, number, chat, msg)
	if err != nil {
		return channels.Sent{}, err
	}
	var repeated bool
	err = s.p.net.Shared(ctx, func(ctx context.Context, tx store.Tx) error {
		created, err := s.p.net.CreateMessage(ctx, tx, row)
		if err != nil || !created {
			repeated = !created
			return err
		}
		for _, l := range letters {
			if echo := l.env.Message; echo != nil && echo.From == EchoNumber {
				if _, err := s.p.net.CreateMessage(ctx, tx, &store.SandboxMessage{ID: echo.ID,
					Sender: EchoNumber, Chat: number, Injected: true, SentAt: at}); err != nil {
					return err
				}
			}
		}
		return s.p.post(ctx, tx, letters)
	})
	if repeated && err == nil { // sent before (an earlier call's outcome was unknown): the first one counts
		sent, _, err := s.sentBefore(ctx, number, m.MessageID)
		return sent, err
	}
	if err != nil {
		return channels.Sent{}, err
	}
	s.wakeAll(rs, letters)
	return channels.Sent{ProviderID: msg.ID, At: at}, nil
}

// sentBefore finds the message the account sent with the client id.
func (s *session) sentBefore(ctx context.Context, number, clientID string) (channels.Sent, bool, error) {
	prev, err := s.p.net.MessageByClientID(ctx, s.p.net.Reader(), number, clientID)
	if errors.Is(err, store.ErrNotFound) {
		return channels.Sent{}, false, nil
	}
	if err != nil {
		return channels.Sent{}, false, err
	}
	return channels.Sent{ProviderID: prev.ID, At: prev.SentAt}, true, nil
}

// route addresses a message: to the recipient (unless they block the sender), to every other participant of a
// group, or back from the echo service with the receipts of the original.
func (s *session) route(ctx context.Context, number, chat string, msg *mailMessage) ([]letter, error) {
	db := s.p.net.Reader()
	switch {
	case chat == EchoNumber:
		echo := *msg
		echo.ID, echo.Chat, echo.From, echo.FromName, echo.Schedule, echo.ReplyTo = newID(), EchoNumber, EchoNumber,
			echoName, nil, msg.ID
		switch msg.Type {
		case channels.TypeText:
			echo.Text = "echo: " + msg.Text
		case channels.TypeMedia:
			media := *msg.Media
			media.Caption = "echo: " + media.Caption
			echo.Media = &media
		case channels.TypeLocation, channels.TypeContact, channels.TypePoll:
		default: // reactions, edits and deletes change a message; they are not one to answer
			return s.p.receipts(s.schedule, number, s.inst.ID, msg.ID, msg.At), nil
		}
		own := letter{to: number, instance: s.inst.ID, due: msg.At, env: envelope{Message: &echo}}
		return append([]letter{own}, s.p.receipts(s.schedule, number, s.inst.ID, msg.ID, msg.At)...), nil
	case isGroup(chat):
		msg.Chat = chat
		return s.toGroup(ctx, db, number, chat, msg.At, envelope{Message: msg})
	default:
		instanceID, blocked, err := s.p.net.Recipient(ctx, db, chat, number)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &channels.Failure{Code: "recipient_not_on_network",
				Detail: chat + " has no account on the sandbox network"}
		}
		// A real network accepts a message to someone who blocked the sender and never delivers it: the sender
		// sees it sent, never delivered.
		if err != nil || blocked {
			return nil, err
		}
		msg.Chat = number
		return []letter{{to: chat, instance: instanceID, due: msg.At, env: envelope{Message: msg}}}, nil
	}
}

// toGroup addresses env from number to every other participant of the group chat that has an account, due at due.
// Fails when the group does not exist or number is not one of its participants.
func (s *session) toGroup(ctx context.Context, db store.Querier, number, chat string, due time.Time, env envelope) ([]letter, error) {
	g, err := s.p.net.Group(ctx, db, chat)
	if errors.Is(err, store.ErrNotFound) {
		return nil, failure("group_not_found", "the sandbox network has no group %s", chat)
	}
	if err != nil {
		return nil, err
	}
	m, ok := member(g, number)
	if !ok {
		return nil, failure("not_a_participant", "the instance is not a participant of %s", chat)
	}
	if g.AdminsOnlySend && m.Role == roleMember {
		return nil, failure("not_group_admin", "only the admins of %s may send to it (an announcement group)", chat)
	}
	others := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		if m.Number != number {
			others = append(others, m.Number)
		}
	}
	accounts, err := s.p.net.Accounts(ctx, db, others)
	if err != nil {
		return nil, err
	}
	letters := make([]letter, 0, len(accounts))
	for _, a := range accounts {
		letters = append(letters, letter{to: a.Number, instance: a.InstanceID, due: due, env: env})
	}
	return letters, nil
}

// content checks that a message has what its type needs and takes its attachment's bytes.
func (s *session) content(ctx context.Context, m channels.Outbound) (*mailMessage, error) {
	msg := &mailMessage{Type: m.Type, Text: m.Text, Location: m.Location, Contact: m.Contact, ReplyTo: m.ReplyTo,
		Target: m.Target, Emoji: m.Emoji, Poll: m.Poll}
	missing := ""
	switch m.Type {
	case channels.TypeText:
		if m.Text == "" {
			missing = "a text"
		}
	case channels.TypeMedia:
		if m.Media == nil {
			missing = "media"
			break
		}
		media, err := s.media(ctx, m.Media)
		if err != nil {
			return nil, err
		}
		msg.Media = media
	case channels.TypeLocation:
		if m.Location == nil {
			missing = "a location"
		}
	case channels.TypeContact:
		if m.Contact == nil {
			missing = "a contact card"
		}
	case channels.TypeReaction, channels.TypeDelete:
		if m.Target == "" {
			missing = "the message it is about"
		}
	case channels.TypeEdit:
		if m.Target == "" || m.Text == "" {
			missing = "the message it edits and the new text"
		}
	case channels.TypePoll:
		if m.Poll == nil || len(m.Poll.Options) < 2 {
			missing = "a question and two options or more"
		}
	default:
		return nil, failure("invalid_message", "the sandbox does not know messages of type %q", m.Type)
	}
	if missing != "" {
		return nil, failure("invalid_message", "a %s message needs %s", m.Type, missing)
	}
	return msg, nil
}

// media reads an attachment (the network carries its bytes; one given by URL only travels as its URL).
func (s *session) media(ctx context.Context, md *channels.Media) (*mailMedia, error) {
	out := &mailMedia{Kind: md.Kind, MIMEType: md.MIMEType, Filename: md.Filename, Size: md.Size,
		Caption: md.Caption, URL: md.URL}
	if md.Open == nil {
		if md.URL == "" {
			return nil, failure("invalid_message", "a media message needs its bytes or a URL")
		}
		return out, nil
	}
	r, err := md.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, s.p.opts.MaxMedia+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > s.p.opts.MaxMedia {
		return nil, failure("media_rejected", "the sandbox network carries attachments of at most %d bytes",
			s.p.opts.MaxMedia)
	}
	out.Data, out.Size = data, int64(len(data))
	return out, nil
}

// checkReferences checks that the message a reply, reaction, edit or delete is about is one of the chat's, and
// that only its sender edits or deletes it.
func (s *session) checkReferences(ctx context.Context, number, chat string, m channels.Outbound) error {
	for _, id := range []string{m.ReplyTo, m.Target} {
		if id == "" {
			continue
		}
		ref, err := s.p.net.Message(ctx, s.p.net.Reader(), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		inChat := err == nil && ((isGroup(chat) && ref.Chat == chat) ||
			(ref.Sender == number && ref.Chat == chat) || (ref.Sender == chat && ref.Chat == number))
		if !inChat {
			return failure("message_not_found", "message %s is not one of the chat with %s", id, chat)
		}
		if id == m.Target && (m.Type == channels.TypeEdit || m.Type == channels.TypeDelete) && ref.Sender != number {
			return failure("not_permitted", "only the sender of a message may %s it", m.Type)
		}
	}
	return nil
}

// injectInbound is the inbound control: a message from any address, to this instance, through the network like
// any other (it waits for the instance if it is offline).
func (s *session) injectInbound(ctx context.Context, from, text string) error {
	sender, err := normalizeNumber(from)
	if err != nil {
		return failure("invalid_control", "%v", err)
	}
	if text == "" {
		return failure("invalid_control", "an inbound control needs a text")
	}
	acc, err := s.p.net.AccountOf(ctx, s.p.net.Reader(), s.inst.ID)
	if errors.Is(err, store.ErrNotFound) {
		return failure("invalid_state", "the instance has no number yet: pair it first")
	}
	if err != nil {
		return err
	}
	if blocked, err := s.p.net.Blocks(ctx, s.p.net.Reader(), acc.Number, sender); err != nil || blocked {
		if blocked {
			return failure("blocked", "the instance blocks %s: the network delivers nothing from it", sender)
		}
		return err
	}
	fromName := ""
	if a, err := s.p.net.Account(ctx, s.p.net.Reader(), sender); err == nil {
		fromName = a.DisplayName
	}
	at := now()
	msg := &mailMessage{ID: newID(), Chat: sender, From: sender, FromName: fromName, At: at,
		Type: channels.TypeText, Text: text}
	letters := []letter{{to: acc.Number, instance: s.inst.ID, due: at, env: envelope{Message: msg}}}
	err = s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if _, err := s.p.net.CreateMessage(ctx, tx, &store.SandboxMessage{ID: msg.ID, Sender: sender,
			Chat: acc.Number, Injected: true, SentAt: at}); err != nil {
			return err
		}
		return s.p.post(ctx, tx, letters)
	})
	if err == nil {
		s.wakeUp()
	}
	return err
}

// MarkRead tells the senders of the chat's unread messages, up to upTo ("" for all), that they were read.
func (s *session) MarkRead(ctx context.Context, chat string, upTo string) error {
	rs, number := s.live()
	if number == "" {
		return notConnected()
	}
	chat, err := normalize(chat)
	if err != nil {
		return failure("invalid_address", "%v", err)
	}
	unread, err := s.p.net.Unread(ctx, s.p.net.Reader(), number, chat, isGroup(chat), upTo)
	if err != nil || len(unread) == 0 {
		return err
	}
	senders := map[string]bool{}
	var numbers []string
	for _, m := range unread {
		if !senders[m.Sender] {
			senders[m.Sender] = true
			numbers = append(numbers, m.Sender)
		}
	}
	accounts, err := s.p.net.Accounts(ctx, s.p.net.Reader(), numbers)
	if err != nil {
		return err
	}
	instances := map[string]string{}
	for _, a := range accounts {
		instances[a.Number] = a.InstanceID
	}
	at := now()
	var letters []letter
	for _, m := range unread {
		if id, ok := instances[m.Sender]; ok {
			letters = append(letters, receipt(m.Sender, id, m.ID, statusRead, at))
		}
	}
	if err := s.p.post(ctx, s.p.net.Writer(), letters); err != nil {
		return err
	}
	s.wakeAll(rs, letters)
	return nil
}

// Lookup says which addresses have an account on the network.
func (s *session) Lookup(ctx context.Context, addresses []string) ([]channels.LookupResult, error) {
	if _, number := s.live(); number == "" {
		return nil, notConnected()
	}
	results := make([]channels.LookupResult, len(addresses))
	numbers := make([]string, 0, len(addresses))
	for i, raw := range addresses {
		results[i].Address = raw
		if n, err := normalizeNumber(raw); err == nil {
			results[i].Normalized = n
			numbers = append(numbers, n)
		}
	}
	accounts, err := s.p.net.Accounts(ctx, s.p.net.Reader(), numbers)
	if err != nil {
		return nil, err
	}
	names := map[string]string{EchoNumber: echoName}
	for _, a := range accounts {
		names[a.Number] = a.DisplayName
	}
	for i := range results {
		if name, ok := names[results[i].Normalized]; ok {
			results[i].OnNetwork, results[i].DisplayName = true, name
		}
	}
	return results, nil
}

// Block stops (or resumes) the delivery of direct messages from an address to this instance.
func (s *session) Block(ctx context.Context, address string, blocked bool) error {
	_, number := s.live()
	if number == "" {
		return notConnected()
	}
	n, err := normalizeNumber(address)
	if err != nil {
		return failure("invalid_address", "%v", err)
	}
	if n == number {
		return failure("invalid_address", "an instance cannot block its own number")
	}
	return s.p.net.SetBlock(ctx, s.p.net.Writer(), number, n, blocked, now())
}

// member finds a participant of a group.
func member(g store.SandboxGroup, number string) (store.SandboxGroupMember, bool) {
	for _, m := range g.Members {
		if m.Number == number {
			return m, true
		}
	}
	return store.SandboxGroupMember{}, false
}
