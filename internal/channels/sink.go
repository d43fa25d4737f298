package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

var _ Ledger = (*Recorder)(nil)

// Wanted lists the instances that should hold a session.
func (s *Recorder) Wanted(ctx context.Context) ([]string, error) { return s.db.Instances.Wanted(ctx) }

// Open loads an instance for a session: its config with secrets unsealed, its saved credentials, its provider, and
// the sink its session reports to.
func (s *Recorder) Open(ctx context.Context, instanceID string) (Instance, Provider, Sink, error) {
	inst, err := s.db.Instances.ByID(ctx, s.db.Reader(), instanceID)
	if err != nil {
		return Instance{}, nil, nil, err
	}
	p, ok := s.provider(inst.Provider)
	if !ok {
		return Instance{}, nil, nil, fmt.Errorf("channels: instance %s: provider %q is not available", instanceID, inst.Provider)
	}
	secrets, err := s.openSecrets(inst)
	if err != nil {
		return Instance{}, nil, nil, err
	}
	config := map[string]any{}
	for k, v := range inst.Config {
		config[k] = v
	}
	for k, v := range secrets {
		config[k] = v
	}
	out := Instance{ID: inst.ID, WorkspaceID: inst.WorkspaceID, Config: config}
	if out.Via, err = s.proxyOf(inst); err != nil {
		return Instance{}, nil, nil, err
	}
	if inst.Credentials != nil {
		if out.Credentials, err = s.sealer.Open(*inst.Credentials, []byte("credentials:"+inst.ID)); err != nil {
			return Instance{}, nil, nil, fmt.Errorf("channels: instance %s: credentials do not open with the server key: %w", inst.ID, err)
		}
	}
	return out, p, s.SinkFor(inst.ID), nil
}

// outbounds makes messages ready for sending, by ID: their chats' addresses (read at once), the network IDs of the
// messages they refer to, and readers of their media. A message whose chat is gone is left out.
func (s *Recorder) outbounds(ctx context.Context, ms []store.Message) (map[string]Outbound, error) {
	out := make(map[string]Outbound, len(ms))
	if len(ms) == 0 {
		return out, nil
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ChatID
	}
	chats, err := s.db.Chats.Several(ctx, s.db.Reader(), ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.Chat, len(chats))
	for _, c := range chats {
		byID[c.ID] = c
	}
	for _, m := range ms {
		c, ok := byID[m.ChatID]
		if !ok || c.WorkspaceID != m.WorkspaceID || c.InstanceID != m.InstanceID {
			continue
		}
		out[m.ID] = s.outbound(ctx, m, c)
	}
	return out, nil
}

// outbound is a message of a chat ready for sending.
func (s *Recorder) outbound(ctx context.Context, m store.Message, c store.Chat) Outbound {
	out := Outbound{MessageID: m.ID, Chat: c.Address, Type: MessageType(m.Type), Text: deref(m.Text), Emoji: deref(m.Emoji)}
	for _, ref := range []struct {
		id  *string
		dst *string
	}{{m.ReplyToMessageID, &out.ReplyTo}, {m.TargetMessageID, &out.Target}} {
		if ref.id == nil {
			continue
		}
		if r, err := s.db.Messages.ByID(ctx, s.db.Reader(), *ref.id); err == nil {
			*ref.dst = deref(r.ProviderMessageID)
		}
	}
	if m.Location != nil {
		out.Location = &Location{Latitude: m.Location.Latitude, Longitude: m.Location.Longitude, Name: m.Location.Name,
			Address: m.Location.Address}
	}
	if m.Contact != nil {
		out.Contact = &ContactCard{Name: m.Contact.Name, Phones: m.Contact.Phones}
	}
	if m.Poll != nil {
		out.Poll = &Poll{Question: m.Poll.Question, Options: m.Poll.Options, MultipleChoice: m.Poll.MultipleChoice}
	}
	if m.Template != nil {
		out.Template = &Template{Name: m.Template.Name, Language: m.Template.Language,
			Parameters: m.Template.Parameters, Components: m.Template.Components}
	}
	if m.Media != nil {
		id := m.Media.MediaID
		out.Media = &Media{Kind: m.Media.Kind, MIMEType: m.Media.MIMEType, Filename: m.Media.Filename, Size: m.Media.Size,
			Caption: m.Media.Caption, Open: func(ctx context.Context) (io.ReadCloser, error) {
				b, err := s.media.Read(ctx, id)
				if err != nil {
					return nil, err
				}
				return io.NopCloser(bytesReader(b)), nil
			}}
	}
	return out
}

// applyEarly applies the receipts parked for a message of an instance whose network ID is now committed. Both
// sides look after they wrote (Sent after its commit, Receipt after parking), and take is atomic: each receipt is
// applied once.
func (s *Recorder) applyEarly(ctx context.Context, instanceID, providerID, messageID string) error {
	rs := s.early.take(instanceID, providerID)
	if len(rs) == 0 {
		return nil
	}
	return s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		for _, r := range rs {
			if _, err := s.advance(ctx, tx, messageID, r.Status, r.At, "", nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// earlyReceipts holds the receipts that arrived before the send they are about was recorded, for a minute: the
// runtime records a send in the process that holds the session, which is the process the receipt reaches.
type earlyReceipts struct {
	mu sync.Mutex
	m  map[string]earlyReceipt
}

type earlyReceipt struct {
	receipts []Receipt
	at       time.Time
}

const earlyReceiptTTL = time.Minute

func (e *earlyReceipts) park(instanceID string, r Receipt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]earlyReceipt{}
	}
	now := time.Now()
	for k, v := range e.m {
		if now.Sub(v.at) > earlyReceiptTTL {
			delete(e.m, k)
		}
	}
	if r.At.IsZero() {
		r.At = now
	}
	key := instanceID + " " + r.ProviderID
	v := e.m[key]
	v.receipts, v.at = append(v.receipts, r), now
	e.m[key] = v
}

func (e *earlyReceipts) take(instanceID, providerID string) []Receipt {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := instanceID + " " + providerID
	v := e.m[key]
	delete(e.m, key)
	return v.receipts
}

// SinkFor is the Sink of an instance's session: every method commits the change and its events before it returns.
// What a session reports comes from its network, and every string of it is made text both databases keep (see
// package text) before anything is stored: a network's message is never refused or lost for a character.
func (s *Recorder) SinkFor(instanceID string) Sink { return &sink{s: s, id: instanceID} }

type sink struct {
	s  *Recorder
	id string
}

// locked runs fn on the instance, locked, inside a transaction.
func (k *sink) locked(ctx context.Context, fn func(ctx context.Context, tx store.Tx, i *store.Instance) error) error {
	// In a shared commit: a restart reconnects thousands of sessions within the stagger, each reporting its state
	// twice, and one commit each would be a storm against the database.
	return k.s.sharedTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		i, err := k.s.db.Instances.Lock(ctx, tx, k.id)
		if err != nil {
			return err
		}
		return fn(ctx, tx, &i)
	})
}

// State moves the instance to a state the session reports. A session reconnecting after it was connected says
// "connecting"; the instance shows it as reconnecting, with the attempt counted. A move the state machine does not
// have is refused.
func (k *sink) State(ctx context.Context, st Status, reason string) error {
	reason = text.Clean(reason)
	if st == StatusConnecting {
		// Every session of a restart reports connecting over an instance its staggered start already shows
		// reconnecting, which changes nothing: a read says so without a call in the shared commit, which the
		// sessions' connected reports need (10,000 of them within the stagger). Whatever moves the instance after
		// this read is ordered after the report.
		if i, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id); err == nil && Status(i.Status) == StatusReconnecting {
			return nil
		}
	}
	return k.locked(ctx, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		from := Status(i.Status)
		if st == StatusConnecting && from == StatusReconnecting {
			return nil // it shows reconnecting already (a backoff or a staggered start recorded why)
		}
		if st == StatusConnecting && from == StatusConnected {
			st = StatusReconnecting
		}
		if st == from && st != StatusReconnecting {
			return nil
		}
		// The runtime's backoff counts the attempts of a session that failed (Backoff); a session that reports
		// reconnecting itself counts one more.
		if st == StatusReconnecting && from != StatusReconnecting {
			i.ReconnectAttempt++
		}
		if st != from && !CanMove(from, st) {
			return fmt.Errorf("channels: instance %s cannot move from %s to %s", k.id, from, st)
		}
		if st == from {
			return k.s.db.Instances.Save(ctx, tx, i)
		}
		return k.s.move(ctx, tx, i, st, reason)
	})
}

// QR shows a pairing code: the instance awaits auth by QR, and instance.qr_updated carries the code.
func (k *sink) QR(ctx context.Context, code string, expires time.Time) error {
	code = text.Clean(code)
	return k.locked(ctx, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		exp := micro(expires)
		qr := string(AuthQR)
		if Status(i.Status) != StatusAwaitingAuth {
			if !CanMove(Status(i.Status), StatusAwaitingAuth) {
				return fmt.Errorf("channels: instance %s is %s and cannot wait for a QR scan", k.id, i.Status)
			}
			if err := k.s.move(ctx, tx, i, StatusAwaitingAuth, "waiting for the QR code to be scanned"); err != nil {
				return err
			}
		}
		i.AuthMethod, i.QRCode, i.QRExpiresAt = &qr, &code, &exp
		if err := k.s.db.Instances.Save(ctx, tx, i); err != nil {
			return err
		}
		return k.s.emit(ctx, tx, i, func(gen.Instance) any {
			return gen.InstanceQrUpdatedEvent{Code: code, ExpiresAt: exp, InstanceId: k.id}
		})
	})
}

// Connected records the paired account and its credentials (sealed) and moves the instance to connected.
func (k *sink) Connected(ctx context.Context, account Party, credentials []byte) error {
	account = text.Cleaned(account)
	return k.locked(ctx, func(ctx context.Context, tx store.Tx, i *store.Instance) error {
		i.Account = &store.Account{Address: account.Address, DisplayName: account.DisplayName, IDs: account.IDs}
		if credentials != nil {
			sealed := k.s.sealer.Seal(credentials, []byte("credentials:"+k.id))
			i.Credentials = &sealed
		}
		reason := "connected"
		if Status(i.Status) == StatusAwaitingAuth {
			reason = "paired"
		}
		if Status(i.Status) == StatusConnected {
			return k.s.db.Instances.Save(ctx, tx, i)
		}
		return k.s.move(ctx, tx, i, StatusConnected, reason)
	})
}

// Inbound records a message the network delivered: its sender's contact, its chat (newest message, one more
// unread), the message itself, and message.received with chat.updated — once, however often the network hands it
// over.
func (k *sink) Inbound(ctx context.Context, in Inbound) error {
	_, err := k.Record(ctx, []Report{{Inbound: &in}})
	return err
}

// Receipt moves a sent message to delivered or read, never backwards.
func (k *sink) Receipt(ctx context.Context, r Receipt) error {
	_, err := k.Record(ctx, []Report{{Receipt: &r}})
	return err
}

var _ BatchSink = (*sink)(nil)

// Record records a run of inbound messages and receipts in one transaction, with chat.updated once per chat the
// run touched (its state after the run). When that transaction fails, the reports are recorded one by one, so
// that those before a report that cannot be recorded are kept.
func (k *sink) Record(ctx context.Context, reports []Report) (int, error) {
	err := k.record(ctx, reports)
	if err == nil || len(reports) == 1 {
		if err != nil {
			return 0, err
		}
		return len(reports), nil
	}
	for i := range reports {
		if err := k.record(ctx, reports[i:i+1]); err != nil {
			return i, err
		}
	}
	return len(reports), nil
}

// record records reports in one transaction, then applies the receipts parked for their sends meanwhile.
func (k *sink) record(ctx context.Context, reports []Report) error {
	cleaned := make([]Report, len(reports))
	var inst store.Instance
	media := map[int]*store.MessageMedia{}
	for i, r := range reports {
		switch {
		case r.Inbound != nil:
			in := text.Cleaned(*r.Inbound)
			cleaned[i].Inbound = &in
			if inst.ID == "" {
				var err error
				if inst, err = k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id); err != nil {
					return err
				}
			}
			// Media bytes are stored first, in their own transaction: a retried report stores them again,
			// unreferenced bytes are what a failed report leaves.
			if in.Media != nil {
				m, err := k.s.saveInbound(ctx, inst, in.Media)
				if err != nil {
					return err
				}
				media[i] = m
			}
		case r.Receipt != nil:
			rc := text.Cleaned(*r.Receipt)
			if rc.Status != msgDelivered && rc.Status != msgRead && (rc.Status != msgFailed || rc.Failure == nil) {
				return fmt.Errorf("channels: receipt status %q is neither delivered, read nor failed with a failure", rc.Status)
			}
			cleaned[i].Receipt = &rc
		default:
			return errors.New("channels: a report with neither an inbound message nor a receipt")
		}
	}
	var parked []Receipt
	err := k.s.sharedTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		parked = parked[:0]
		// One read of the messages the reports name: those handed over before (a repeat), those replied to or
		// reacted to, those the receipts are about.
		var pids []string
		for _, r := range cleaned {
			if r.Receipt != nil {
				pids = append(pids, r.Receipt.ProviderID)
				continue
			}
			for _, pid := range []string{r.Inbound.ProviderID, r.Inbound.ReplyTo, r.Inbound.Target} {
				if pid != "" {
					pids = append(pids, pid)
				}
			}
		}
		known, err := k.s.db.Messages.ByProviderIDs(ctx, tx, k.id, pids)
		if err != nil {
			return err
		}
		run := &inboundRun{chats: map[string]*store.Chat{}, people: map[string]bool{}}
		var receipts []Receipt
		for i, r := range cleaned {
			if r.Inbound != nil {
				if err := k.inbound(ctx, tx, inst, *r.Inbound, media[i], known, run); err != nil {
					return err
				}
				continue
			}
			if _, ok := known[r.Receipt.ProviderID]; !ok {
				// A receipt can overtake the record of the send it is about (the network answers before Sent
				// commits): it is applied when Sent records the network's ID.
				k.s.early.park(k.id, *r.Receipt)
				parked = append(parked, *r.Receipt)
				continue
			}
			receipts = append(receipts, *r.Receipt)
		}
		if err := run.save(ctx, tx, k.s, k.id); err != nil {
			return err
		}
		if err := k.s.applyReceipts(ctx, tx, receipts, known); err != nil {
			return err
		}
		for _, r := range receipts {
			delete(run.api, known[r.ProviderID].ID)
		}
		return run.saveChats(ctx, tx, k.s)
	})
	if err != nil {
		return err
	}
	for _, r := range parked {
		// The send may have committed meanwhile, after its own look for parked receipts.
		m, err := k.s.db.Messages.ByProviderIDRead(ctx, k.id, r.ProviderID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := k.s.applyEarly(ctx, k.id, r.ProviderID, m.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// inboundRun is what a run of inbound messages writes at its end: the messages, in one statement, and the chats it
// changed, each read once and saved (with its chat.updated) once. people are the parties whose contact the run
// resolved already.
type inboundRun struct {
	messages []store.Message
	chats    map[string]*store.Chat
	order    []*store.Chat
	people   map[string]bool
	// api holds the API shapes of the messages as save wrote them, by ID, for the chats' chat.updated (a message a
	// receipt of the run moved afterwards is taken out: its row changed).
	api map[string]gen.Message
}

// chat returns the chat of an address, from the run or from tx (created when there is none).
func (r *inboundRun) chat(ctx context.Context, tx store.Querier, s *Recorder, inst store.Instance, address string, person Party) (*store.Chat, error) {
	if c, ok := r.chats[address]; ok {
		return c, nil
	}
	c, err := s.upsertChat(ctx, tx, inst, address, person)
	if err != nil {
		return nil, err
	}
	r.chats[address] = &c
	r.order = append(r.order, &c)
	return &c, nil
}

// save inserts the run's messages and records message.received (message.sent for those sent from another
// device) of each.
func (r *inboundRun) save(ctx context.Context, tx store.Querier, s *Recorder, instanceID string) error {
	if len(r.messages) == 0 {
		return nil
	}
	if err := s.db.Messages.CreateMany(ctx, tx, r.messages); err != nil {
		return err
	}
	api, err := s.MessagesAPI(ctx, tx, r.messages)
	if err != nil {
		return err
	}
	evs := make([]events.Pending, len(r.messages))
	r.api = make(map[string]gen.Message, len(r.messages))
	for i, m := range r.messages {
		r.api[m.ID] = api[i]
		var payload any = gen.MessageReceivedEvent{Message: api[i], InstanceId: instanceID}
		if m.Direction == "outbound" {
			payload = gen.MessageSentEvent{Message: api[i], InstanceId: instanceID}
		}
		evs[i] = events.Pending{WorkspaceID: m.WorkspaceID, InstanceID: instanceID, Payload: payload}
	}
	return s.emitNumbered(ctx, tx, evs...)
}

// saveChats saves the chats the run changed, with chat.updated of each.
func (r *inboundRun) saveChats(ctx context.Context, tx store.Querier, s *Recorder) error {
	for _, c := range r.order {
		if err := s.db.Chats.Save(ctx, tx, c); err != nil {
			return err
		}
		if err := s.emitChatWith(ctx, tx, *c, r.api); err != nil {
			return err
		}
	}
	return nil
}

// inbound adds one inbound message to the run, unless known (the messages of the instance by network ID) has it
// already; known gains it.
func (k *sink) inbound(ctx context.Context, tx store.Querier, inst store.Instance, in Inbound, media *store.MessageMedia,
	known map[string]store.Message, run *inboundRun) error {
	if _, repeat := known[in.ProviderID]; repeat && in.ProviderID != "" {
		return nil
	}
	chatAddress := in.Chat
	if chatAddress == "" {
		chatAddress = in.From.Address
	}
	if person := partyKey(in.From); !in.FromMe && in.From.Address != "" && !run.people[person] {
		if _, err := k.s.resolve(ctx, tx, inst, in.From); err != nil {
			return err
		}
		run.people[person] = true
	}
	c, err := run.chat(ctx, tx, k.s, inst, chatAddress, in.From)
	if err != nil {
		return err
	}
	at := in.At
	if at.IsZero() {
		at = time.Now()
	}
	m := store.Message{ID: store.NewID("msg"), WorkspaceID: inst.WorkspaceID, InstanceID: k.id, ChatID: c.ID,
		Direction: "inbound", From: store.Party{Address: in.From.Address, DisplayName: in.From.DisplayName},
		To: store.Party{Address: accountAddress(inst)}, Type: string(in.Type), Text: nonEmpty(in.Text),
		Emoji: nonEmpty(in.Emoji), Media: media, ProviderMessageID: nonEmpty(in.ProviderID), Status: msgReceived,
		StatusHistory: []store.StatusChange{{Status: msgReceived, At: micro(at)}}, CreatedAt: micro(time.Now())}
	if in.FromMe {
		m.Direction, m.Status = "outbound", msgSent
		m.From, m.To = m.To, store.Party{Address: c.Address, DisplayName: deref(c.Name)}
		m.StatusHistory = []store.StatusChange{{Status: msgSent, At: micro(at), Detail: "sent from another device"}}
	}
	if m.Type == "" {
		m.Type = string(TypeText)
	}
	if in.Location != nil {
		m.Location = &store.Location{Latitude: in.Location.Latitude, Longitude: in.Location.Longitude,
			Name: in.Location.Name, Address: in.Location.Address}
	}
	if in.Contact != nil {
		m.Contact = &store.ContactCard{Name: in.Contact.Name, Phones: in.Contact.Phones}
	}
	if in.Poll != nil {
		m.Poll = &store.MessagePoll{Question: in.Poll.Question, Options: in.Poll.Options,
			MultipleChoice: in.Poll.MultipleChoice}
	}
	for _, ref := range []struct {
		pid string
		dst **string
	}{{in.ReplyTo, &m.ReplyToMessageID}, {in.Target, &m.TargetMessageID}} {
		if r, ok := known[ref.pid]; ok && ref.pid != "" {
			*ref.dst = &r.ID
		}
	}
	run.messages = append(run.messages, m)
	if in.ProviderID != "" {
		known[in.ProviderID] = m
	}
	touch(c, m, !in.FromMe)
	return nil
}

// partyKey tells the parties of a run apart: the same address, name and IDs resolve to the same contact, once.
func partyKey(p Party) string {
	return strings.Join(append([]string{p.Address, p.DisplayName}, p.IDs...), "\x00")
}

// applyReceipts moves the messages receipts are about (known by network ID) inside tx; receipts of the same
// message are applied one after another, in order.
func (s *Recorder) applyReceipts(ctx context.Context, tx store.Querier, receipts []Receipt, known map[string]store.Message) error {
	for len(receipts) > 0 {
		var round []move
		var later []Receipt
		in := map[string]bool{}
		for _, r := range receipts {
			id := known[r.ProviderID].ID
			if in[id] {
				later = append(later, r)
				continue
			}
			in[id] = true
			at := r.At
			if at.IsZero() {
				at = time.Now()
			}
			mv := move{id: id, to: r.Status, at: at, failure: r.Failure}
			if r.Failure != nil {
				mv.detail = r.Failure.Detail
			}
			round = append(round, mv)
		}
		if _, err := s.advanceMany(ctx, tx, round); err != nil {
			return err
		}
		receipts = later
	}
	return nil
}

// saveInbound stores the bytes of an inbound message's media.
func (s *Recorder) saveInbound(ctx context.Context, inst store.Instance, in *Media) (*store.MessageMedia, error) {
	if in.Open == nil {
		return nil, nil
	}
	r, err := in.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	content, err := io.ReadAll(io.LimitReader(r, s.maxMedia+1))
	if err != nil {
		return nil, err
	}
	if int64(len(content)) > s.maxMedia {
		return nil, fmt.Errorf("channels: inbound media of %d bytes and more exceeds the limit", len(content))
	}
	m, err := s.storeMedia(ctx, inst.WorkspaceID, in.Filename, in.MIMEType, content, nil, "/media")
	if err != nil {
		return nil, err
	}
	return &store.MessageMedia{MediaID: m.ID, Kind: m.Kind, MIMEType: m.MIMEType, Filename: in.Filename, Size: m.Size,
		Caption: in.Caption}, nil
}

// GroupChanged records a group as the network reports it after a change made by others.
func (k *sink) GroupChanged(ctx context.Context, g Group, change string) error {
	g = text.Cleaned(g)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	_, err = k.s.recordGroup(ctx, inst, g, change)
	return err
}

// ContactChanged records what the network says about a person (a name, another address).
func (k *sink) ContactChanged(ctx context.Context, p Party) error {
	p = text.Cleaned(p)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		_, err := k.s.resolve(ctx, tx, inst, p)
		return err
	})
}
