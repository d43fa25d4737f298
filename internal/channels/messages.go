package channels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Message statuses. Outbound messages move up the ranks, never down; failed and canceled are final. Inbound
// messages are received, then read.
const (
	msgQueued    = "queued"
	msgSending   = "sending"
	msgSent      = "sent"
	msgDelivered = "delivered"
	msgRead      = "read"
	msgFailed    = "failed"
	msgCanceled  = "canceled"
	msgReceived  = "received"
)

// rank orders the statuses a message moves through.
var rank = map[string]int{msgQueued: 0, msgReceived: 0, msgSending: 1, msgSent: 2, msgDelivered: 3, msgRead: 4}

// final reports whether a status never changes again.
func final(status string) bool { return status == msgFailed || status == msgCanceled }

// capabilityOf is what sending a message of a type needs.
var capabilityOf = map[string]Capability{
	string(TypeText): CapText, string(TypeMedia): CapMedia, string(TypeLocation): CapLocation,
	string(TypeContact): CapContactCard, string(TypeReaction): CapReaction, string(TypeEdit): CapEdit,
	string(TypeDelete): CapDelete, string(TypeTemplate): CapTemplate, string(TypePoll): CapPoll,
}

// MessageDraft is a message to send as its sender gives it (see Send): the recipient (exactly one of To and
// ChatID), the content its Type needs and the messages it refers to. Send checks what the shape alone cannot.
type MessageDraft struct {
	Type MessageType
	// To is the recipient's address as given (normalized by the provider), ChatID a chat of the instance.
	To, ChatID *string
	// ClientMessageID makes the send idempotent per instance.
	ClientMessageID *string
	// ReplyToMessageID is the message this one answers; TargetMessageID the one a reaction, edit or delete is about.
	ReplyToMessageID, TargetMessageID *string
	Text, Emoji                       *string
	Media                             *MediaInput
	Location                          *store.Location
	Contact                           *store.ContactCard
	// Template: nil parameters are stored as none.
	Template *store.MessageTemplate
	// Poll: its question, options and whether several may be chosen (votes are ignored).
	Poll     *store.MessagePoll
	Metadata map[string]any
}

// MediaInput names the file of a media message: exactly one of an uploaded MediaID and a URL to fetch, with the
// caption and the file name to send it with.
type MediaInput struct {
	MediaID, URL, Caption, Filename *string
}

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Send queues a message of an instance and returns it with created = true; a client_message_id the instance has
// seen returns the message it names with created = false, sending nothing. The capability the message needs is
// checked before anything is stored. Returns a NotFound problem for an instance, chat, media or target message not
// in the workspace; CapabilityNotSupported when the provider cannot send it; ValidationFailed for content that does
// not fit its type or an address the network cannot have; InstanceNotConnected on a server without a send queue.
func (s *Service) Send(ctx context.Context, workspaceID, instanceID string, in MessageDraft) (store.Message, bool, error) {
	inst, err := s.Get(ctx, workspaceID, instanceID)
	if err != nil {
		return store.Message{}, false, err
	}
	p, ok := s.provider(inst.Provider)
	if !ok {
		return store.Message{}, false, problem.Errorf(problem.Conflict, "The provider %q of this instance is not available on this server.", inst.Provider)
	}
	info := p.Info()
	need := []Capability{capabilityOf[string(in.Type)]}
	if in.ReplyToMessageID != nil {
		need = append(need, CapReply)
	}
	for _, c := range need {
		if !info.Has(c) {
			return store.Message{}, false, notSupported(inst.Provider, c)
		}
	}
	if in.ClientMessageID != nil {
		if m, err := s.db.Messages.ByClientID(ctx, s.db.Reader(), instanceID, *in.ClientMessageID); err == nil {
			return m, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return store.Message{}, false, err
		}
	}
	m, to, err := s.outboundOf(ctx, p, inst, in)
	if err != nil {
		return store.Message{}, false, err
	}
	if err := s.checkWindow(ctx, p, inst, in, to); err != nil {
		return store.Message{}, false, err
	}
	err = s.sharedTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		chat, err := s.chatFor(ctx, tx, inst, to, in.ChatID)
		if err != nil {
			return err
		}
		m.ChatID = chat.ID
		m.To = store.Party{Address: chat.Address, DisplayName: deref(chat.Name)}
		if err := s.db.Messages.Create(ctx, tx, &m); err != nil {
			return err
		}
		if err := s.queue.Enqueue(ctx, tx, SendJob{MessageID: m.ID, WorkspaceID: workspaceID, InstanceID: instanceID,
			Chat: chat.Address}); err != nil {
			return err
		}
		return s.touchChat(ctx, tx, &chat, m, false)
	})
	if errors.Is(err, store.ErrConflict) && in.ClientMessageID != nil {
		// A concurrent send with the same client_message_id won: answer its message.
		if prior, err := s.db.Messages.ByClientID(ctx, s.db.Reader(), instanceID, *in.ClientMessageID); err == nil {
			return prior, false, nil
		}
	}
	if err != nil {
		return store.Message{}, false, storeError(err, "instance", instanceID)
	}
	return m, true, nil
}

// outboundOf checks a message to send beyond the schema and turns it into the message to store (without its chat)
// and the normalized address it goes to ("" when a chat_id names it).
func (s *Service) outboundOf(ctx context.Context, p Provider, inst store.Instance, in MessageDraft) (store.Message, string, error) {
	var errs problem.Fields
	now := micro(time.Now())
	m := store.Message{ID: store.NewID("msg"), WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Direction: "outbound",
		Type: string(in.Type), Text: in.Text, Emoji: in.Emoji, ClientMessageID: in.ClientMessageID, Status: msgQueued,
		StatusHistory: []store.StatusChange{{Status: msgQueued, At: now}}, Metadata: in.Metadata}
	if inst.Account != nil {
		m.From = store.Party{Address: inst.Account.Address, DisplayName: inst.Account.DisplayName}
	}
	if m.Metadata != nil {
		checkMetadata(&errs, m.Metadata)
	}
	var to string
	switch {
	case (in.To == nil) == (in.ChatID == nil):
		errs.Add("", "name the recipient with exactly one of to and chat_id")
	case in.To != nil:
		n, err := p.NormalizeAddress(*in.To)
		if err != nil {
			errs.Add("/to", err.Error())
		}
		to = n
	}
	has := func(set bool, pointer string) {
		if !set {
			errs.Add(pointer, fmt.Sprintf("a %s message needs it", in.Type))
		}
	}
	switch in.Type {
	case TypeText, TypeEdit:
		has(in.Text != nil, "/text")
	case TypeMedia:
		has(in.Media != nil, "/media")
	case TypeLocation:
		has(in.Location != nil, "/location")
	case TypeContact:
		has(in.Contact != nil, "/contact")
	case TypeReaction:
		has(in.Emoji != nil, "/emoji")
	case TypeTemplate:
		has(in.Template != nil, "/template")
	case TypePoll:
		has(in.Poll != nil, "/poll")
	}
	if in.Poll != nil {
		m.Poll = pollOf(&errs, in)
	}
	if in.Template != nil && in.Type != TypeTemplate {
		errs.Add("/template", "only a template message has a template")
	}
	switch in.Type {
	case TypeReaction, TypeEdit, TypeDelete:
		has(in.TargetMessageID != nil, "/target_message_id")
	}
	if err := errs.Err(); err != nil {
		return m, "", err
	}
	for _, ref := range []struct {
		id  *string
		dst **string
	}{{in.TargetMessageID, &m.TargetMessageID}, {in.ReplyToMessageID, &m.ReplyToMessageID}} {
		if ref.id == nil {
			continue
		}
		if _, err := s.db.Messages.Get(ctx, inst.WorkspaceID, inst.ID, *ref.id); err != nil {
			return m, "", storeError(err, "message", *ref.id)
		}
		*ref.dst = ref.id
	}
	if in.Location != nil {
		loc := *in.Location
		m.Location = &loc
	}
	if in.Contact != nil {
		m.Contact = &store.ContactCard{Name: in.Contact.Name, Phones: in.Contact.Phones}
	}
	if in.Template != nil {
		m.Template = &store.MessageTemplate{Name: in.Template.Name, Language: in.Template.Language,
			Parameters: in.Template.Parameters, Components: in.Template.Components}
		if m.Template.Parameters == nil {
			m.Template.Parameters = []string{}
		}
	}
	if in.Media != nil {
		media, err := s.mediaFor(ctx, inst.WorkspaceID, *in.Media)
		if err != nil {
			return m, "", err
		}
		m.Media = &store.MessageMedia{MediaID: media.ID, Kind: media.Kind, MIMEType: media.MIMEType,
			Filename: deref(media.Filename), Size: media.Size, Caption: deref(in.Media.Caption)}
		if in.Media.Filename != nil {
			m.Media.Filename = *in.Media.Filename
		}
	}
	return m, to, nil
}

// checkWindow refuses a free-form message to a person outside the customer-service window of a network that has
// one (Windowed): the window opens with the person's last inbound message. Templates are always allowed.
func (s *Service) checkWindow(ctx context.Context, p Provider, inst store.Instance, in MessageDraft, to string) error {
	w, ok := p.(Windowed)
	if !ok || w.ConversationWindow() <= 0 || in.Type == TypeTemplate {
		return nil
	}
	var (
		chat store.Chat
		err  error
	)
	if in.ChatID != nil {
		chat, err = s.db.Chats.Get(ctx, inst.WorkspaceID, inst.ID, *in.ChatID)
	} else {
		chat, err = s.db.Chats.ByAddress(ctx, s.db.Reader(), inst.ID, to)
	}
	var last time.Time
	switch {
	case errors.Is(err, store.ErrNotFound):
		if in.ChatID != nil {
			return storeError(err, "chat", *in.ChatID)
		}
	case err != nil:
		return err
	default:
		m, err := s.db.Messages.LastInbound(ctx, s.db.Reader(), chat.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		last = m.CreatedAt
	}
	window := w.ConversationWindow()
	if last.IsZero() {
		return problem.Errorf(problem.ConversationWindowClosed,
			"This person has not written to the instance yet, and %s takes free-form messages only within %s of the person's last message; send a template (type template) to start the conversation.",
			inst.Provider, window)
	}
	if time.Since(last) > window {
		return problem.Errorf(problem.ConversationWindowClosed,
			"The person's last message was at %s, more than %s ago, and %s takes free-form messages only within that window; send a template (type template) to reopen it.",
			last.UTC().Format(time.RFC3339), window, inst.Provider)
	}
	return nil
}

// chatFor returns, inside tx, the chat a message goes to: the one chatID names, or the instance's chat with the
// address (created, with the person's contact, when there is none). Returns ErrNotFound for a chat not the
// instance's.
func (s *Service) chatFor(ctx context.Context, tx store.Querier, inst store.Instance, address string, chatID *string) (store.Chat, error) {
	if chatID != nil {
		c, err := s.db.Chats.Lock(ctx, tx, inst.ID, *chatID)
		if err != nil {
			return c, storeError(err, "chat", *chatID)
		}
		return c, nil
	}
	return s.upsertChat(ctx, tx, inst, address, Party{Address: address})
}

// upsertChat returns, inside tx, the instance's chat with an address, creating it when there is none: a group chat
// when the instance knows a group with the address, else a direct chat with the person's contact.
func (s *Recorder) upsertChat(ctx context.Context, tx store.Querier, inst store.Instance, address string, person Party) (store.Chat, error) {
	c, err := s.db.Chats.ByAddress(ctx, tx, inst.ID, address)
	if !errors.Is(err, store.ErrNotFound) {
		return c, err
	}
	c = store.Chat{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Type: "direct", Address: address}
	if g, err := s.db.Groups.ByAddress(ctx, tx, inst.ID, address); err == nil {
		c.Type, c.GroupID, c.Name = "group", &g.ID, &g.Subject
	} else if !errors.Is(err, store.ErrNotFound) {
		return c, err
	} else {
		contact, err := s.resolve(ctx, tx, inst, Party{Address: address, DisplayName: person.DisplayName, IDs: person.IDs})
		if err != nil {
			return c, err
		}
		c.ContactID, c.Name = &contact.ID, contact.DisplayName
	}
	return c, s.db.Chats.Create(ctx, tx, &c)
}

// touchChat makes m the chat's newest message (counting it unread when it is an inbound one), saves the chat and
// emits chat.updated.
func (s *Service) touchChat(ctx context.Context, tx store.Querier, c *store.Chat, m store.Message, unread bool) error {
	touch(c, m, unread)
	if err := s.db.Chats.Save(ctx, tx, c); err != nil {
		return err
	}
	if deref(c.LastMessageID) != m.ID {
		return s.emitChat(ctx, tx, *c)
	}
	api, err := s.MessageAPI(ctx, tx, m)
	if err != nil {
		return err
	}
	return s.emitChatWith(ctx, tx, *c, map[string]gen.Message{m.ID: api})
}

// touch makes m the chat's newest message, counting it unread when it is an inbound one.
func touch(c *store.Chat, m store.Message, unread bool) {
	if c.LastMessageAt == nil || !m.CreatedAt.Before(*c.LastMessageAt) {
		c.LastMessageID, c.LastMessageAt = &m.ID, &m.CreatedAt
	}
	if unread {
		c.UnreadCount++
	}
}

// emitChat records chat.updated for a chat inside tx.
func (s *Recorder) emitChat(ctx context.Context, tx store.Querier, c store.Chat) error {
	return s.emitChatWith(ctx, tx, c, nil)
}

// emitChatWith is emitChat given the API shapes of messages written in tx (see chatAPI).
func (s *Recorder) emitChatWith(ctx context.Context, tx store.Querier, c store.Chat, newest map[string]gen.Message) error {
	api, err := s.chatAPI(ctx, tx, c, newest)
	if err != nil {
		return err
	}
	return s.emitChatAPI(ctx, tx, c, api)
}

// emitLabelledChat records chat.updated for a change of a chat's labels, which it shows.
func (s *Recorder) emitLabelledChat(ctx context.Context, tx store.Querier, c store.Chat) error {
	api, err := s.LabelledChatAPI(ctx, tx, c)
	if err != nil {
		return err
	}
	return s.emitChatAPI(ctx, tx, c, api)
}

func (s *Recorder) emitChatAPI(ctx context.Context, tx store.Querier, c store.Chat, api gen.Chat) error {
	return s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: c.WorkspaceID, InstanceID: c.InstanceID,
		Payload: gen.ChatUpdatedEvent{Chat: api, InstanceId: c.InstanceID}})
}

// GetMessage returns a message of a workspace's instance. Returns a NotFound problem if it is not there.
func (s *Service) GetMessage(ctx context.Context, workspaceID, instanceID, id string) (store.Message, error) {
	m, err := s.db.Messages.Get(ctx, workspaceID, instanceID, id)
	return m, storeError(err, "message", id)
}

// ListMessages returns a page of an instance's messages and whether more follow. Returns a NotFound problem if the
// instance is not in the workspace.
func (s *Service) ListMessages(ctx context.Context, workspaceID, instanceID string, f store.MessageFilter, p store.Page) ([]store.Message, bool, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, false, err
	}
	return s.db.Messages.List(ctx, workspaceID, instanceID, f, p)
}

// Cancel takes a queued message out of the send queue (status canceled). Returns a NotFound problem if it is not
// the instance's, and MessageNotCancelable once it is being sent, was sent, or is not an outbound message.
func (s *Service) Cancel(ctx context.Context, workspaceID, instanceID, id string) (store.Message, error) {
	m, err := s.GetMessage(ctx, workspaceID, instanceID, id)
	if err != nil {
		return m, err
	}
	if m.Status != msgQueued {
		return m, notCancelable(m)
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		ok, err := s.queue.Cancel(ctx, tx, instanceID, id)
		if err != nil {
			return err
		}
		if !ok {
			return notCancelable(m)
		}
		m, err = s.advance(ctx, tx, id, msgCanceled, time.Now(), "canceled by request", nil)
		return err
	})
	return m, err
}

func notCancelable(m store.Message) *problem.Error {
	return problem.Errorf(problem.MessageNotCancelable, "Message %s is %s; only a queued message can be canceled.", m.ID, m.Status)
}

// QueueStats returns the state of an instance's send queue. Returns a NotFound problem if the instance is not in
// the workspace and InstanceNotConnected on a server without a send queue.
func (s *Service) QueueStats(ctx context.Context, workspaceID, instanceID string) (QueueStats, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return QueueStats{}, err
	}
	return s.queue.Stats(ctx, instanceID)
}

// Purge cancels every message waiting in an instance's send queue and returns their IDs. Returns a NotFound
// problem if the instance is not in the workspace.
func (s *Service) Purge(ctx context.Context, workspaceID, instanceID string) ([]string, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, err
	}
	var ids []string
	err := s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		var err error
		if ids, err = s.queue.Purge(ctx, tx, instanceID); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := s.advance(ctx, tx, id, msgCanceled, time.Now(), "send queue purged", nil); err != nil {
				return err
			}
		}
		return nil
	})
	if ids == nil {
		ids = []string{}
	}
	return ids, err
}

// advance moves a message to a status inside tx (see advanceMany) and returns it as it is afterwards.
func (s *Recorder) advance(ctx context.Context, tx store.Querier, id, to string, at time.Time, detail string, f *Failure) (store.Message, error) {
	ms, err := s.advanceMany(ctx, tx, []move{{id: id, to: to, at: at, detail: detail, failure: f}})
	if err != nil {
		return store.Message{}, err
	}
	if len(ms) == 0 {
		return store.Message{}, store.ErrNotFound
	}
	return ms[0], nil
}

// move is a status change of a message: to the status at a time, with a detail, the failure of a failed message
// and the network ID of a sent one.
type move struct {
	id, to     string
	at         time.Time
	detail     string
	failure    *Failure
	providerID string
}

// advanceMany moves messages to statuses inside tx, each only if that is a move forward: a status of lower rank
// than the current one (a delivered receipt after the read one) changes nothing, and a final status stays. Every
// move is recorded in the status history and emitted as message.status_updated, with message.sent and
// message.failed besides, numbered in the instance's sequence. It reads, numbers and emits in a few statements
// whatever the number of messages (the send queue moves them in batches), and returns the messages as they are
// afterwards, in ID order (those that do not exist are left out).
func (s *Recorder) advanceMany(ctx context.Context, tx store.Querier, moves []move) ([]store.Message, error) {
	ids := make([]string, len(moves))
	byID := make(map[string]move, len(moves))
	for i, mv := range moves {
		ids[i] = mv.id
		byID[mv.id] = mv
	}
	ms, err := s.db.Messages.LockMany(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	var changed, saved []int
	from := make([]string, len(ms))
	for i := range ms {
		m, mv := &ms[i], byID[ms[i].ID]
		from[i] = m.Status
		learned := mv.providerID != "" && m.ProviderMessageID == nil
		if learned {
			m.ProviderMessageID = &mv.providerID
		}
		if !forward(m.Status, mv.to) {
			if learned {
				saved = append(saved, i)
			}
			continue
		}
		m.Status = mv.to
		m.StatusHistory = append(m.StatusHistory, store.StatusChange{Status: mv.to, At: micro(mv.at), Detail: mv.detail})
		if mv.failure != nil {
			m.Failure = &store.Failure{Code: mv.failure.Code, Detail: mv.failure.Detail}
		}
		saved = append(saved, i)
		changed = append(changed, i)
	}
	// The changed messages are written in one statement (a batch of the send queue moves many).
	rows := make([]store.Message, len(saved))
	for k, i := range saved {
		rows[k] = ms[i]
	}
	if err := s.db.Messages.SaveMany(ctx, tx, rows); err != nil {
		return nil, err
	}
	for k, i := range saved {
		ms[i].UpdatedAt = rows[k].UpdatedAt
	}
	if len(changed) == 0 {
		return ms, nil
	}
	// The API shapes, one contact lookup per instance.
	byInstance := map[string][]int{}
	var instances []string
	for _, i := range changed {
		if _, ok := byInstance[ms[i].InstanceID]; !ok {
			instances = append(instances, ms[i].InstanceID)
		}
		byInstance[ms[i].InstanceID] = append(byInstance[ms[i].InstanceID], i)
	}
	var pending []events.Pending
	for _, inst := range instances {
		idx := byInstance[inst]
		group := make([]store.Message, len(idx))
		for k, i := range idx {
			group[k] = ms[i]
		}
		api, err := s.MessagesAPI(ctx, tx, group)
		if err != nil {
			return nil, err
		}
		var payloads []any
		for k, i := range idx {
			payloads = append(payloads, gen.MessageStatusUpdatedEvent{Message: api[k], PreviousStatus: gen.MessageStatus(from[i]),
				Status: gen.MessageStatus(ms[i].Status), InstanceId: inst})
			switch ms[i].Status {
			case msgSent:
				payloads = append(payloads, gen.MessageSentEvent{Message: api[k], InstanceId: inst})
			case msgFailed:
				payloads = append(payloads, gen.MessageFailedEvent{Message: api[k], InstanceId: inst})
			}
		}
		for _, p := range payloads {
			pending = append(pending, events.Pending{WorkspaceID: ms[idx[0]].WorkspaceID, InstanceID: inst, Payload: p})
		}
	}
	if err := s.emitNumbered(ctx, tx, pending...); err != nil {
		return nil, err
	}
	for _, i := range changed {
		if ms[i].RouteID != nil {
			if err := s.routeMessageMoved(ctx, tx, ms[i]); err != nil {
				return nil, err
			}
		}
	}
	return ms, nil
}

// forward reports whether a message may move from one status to another: up the ranks, never down; failed and
// canceled are final; only a queued message is canceled; a message delivered or read does not fail (a sent one
// can: a network that takes a message and fails to deliver it later, like WhatsApp Cloud, reports so).
func forward(from, to string) bool {
	switch {
	case final(from) || from == to:
		return false
	case to == msgCanceled && from != msgQueued:
		return false
	case to == msgFailed && rank[from] > rank[msgSent]:
		return false
	case !final(to) && rank[to] <= rank[from]:
		return false
	}
	return true
}

// MessageAPI is the API's Message of a stored message, its parties' contacts resolved on db.
func (s *Recorder) MessageAPI(ctx context.Context, db store.Querier, m store.Message) (gen.Message, error) {
	ms, err := s.MessagesAPI(ctx, db, []store.Message{m})
	if err != nil {
		return gen.Message{}, err
	}
	return ms[0], nil
}

// MessagesAPI is MessageAPI for several messages of one instance, with one read of their contacts.
func (s *Recorder) MessagesAPI(ctx context.Context, db store.Querier, ms []store.Message) ([]gen.Message, error) {
	out := make([]gen.Message, len(ms))
	if len(ms) == 0 {
		return out, nil
	}
	var addresses []string
	for _, m := range ms {
		addresses = append(addresses, m.From.Address, m.To.Address)
		if m.Poll != nil {
			for _, v := range m.Poll.Votes {
				addresses = append(addresses, v.Voter.Address)
			}
		}
	}
	owners, err := s.db.Contacts.Owners(ctx, db, ms[0].InstanceID, addresses)
	if err != nil {
		return nil, err
	}
	party := func(p store.Party) gen.Party {
		out := gen.Party{Address: p.Address, DisplayName: nonEmpty(p.DisplayName)}
		if id, ok := owners[p.Address]; ok {
			out.ContactId = &id
		}
		return out
	}
	for i, m := range ms {
		g := gen.Message{Id: m.ID, Object: gen.MessageObjectMessage, InstanceId: m.InstanceID, ChatId: m.ChatID,
			Direction: gen.MessageDirection(m.Direction), From: party(m.From), To: party(m.To),
			Type: gen.MessageType(m.Type), Text: m.Text, ReplyToMessageId: m.ReplyToMessageID,
			TargetMessageId: m.TargetMessageID, Emoji: m.Emoji, ProviderMessageId: m.ProviderMessageID,
			ClientMessageId: m.ClientMessageID, RouteId: m.RouteID, Status: gen.MessageStatus(m.Status),
			StatusHistory: make([]gen.StatusChange, len(m.StatusHistory)), Metadata: m.Metadata,
			CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
		if g.Metadata == nil {
			g.Metadata = gen.Metadata{}
		}
		for j, h := range m.StatusHistory {
			g.StatusHistory[j] = gen.StatusChange{Status: gen.MessageStatus(h.Status), At: h.At, Detail: nonEmpty(h.Detail)}
		}
		if m.Media != nil {
			g.Media = &gen.MessageMedia{MediaId: m.Media.MediaID, Kind: gen.MessageMediaKind(m.Media.Kind),
				MimeType: m.Media.MIMEType, Filename: nonEmpty(m.Media.Filename), Size: m.Media.Size,
				Caption: nonEmpty(m.Media.Caption)}
		}
		if m.Location != nil {
			g.Location = &gen.MessageLocation{Latitude: m.Location.Latitude, Longitude: m.Location.Longitude,
				Name: nonEmpty(m.Location.Name), Address: nonEmpty(m.Location.Address)}
		}
		if m.Contact != nil {
			g.Contact = &gen.MessageContactCard{Name: m.Contact.Name, Phones: m.Contact.Phones}
		}
		if m.Template != nil {
			g.Template = &gen.MessageTemplate{Name: m.Template.Name, Language: m.Template.Language,
				Parameters: m.Template.Parameters}
		}
		if m.Poll != nil {
			poll := pollAPI(*m.Poll, party)
			g.Poll = &poll
		}
		if m.Failure != nil {
			g.Failure = &gen.MessageFailure{Code: m.Failure.Code, Detail: m.Failure.Detail}
		}
		out[i] = g
	}
	return out, nil
}

// deref is the value v points to, or the zero value when it is nil.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}
