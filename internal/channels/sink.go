package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

var _ Ledger = (*Service)(nil)

// Wanted lists the instances that should hold a session.
func (s *Service) Wanted(ctx context.Context) ([]string, error) { return s.db.Instances.Wanted(ctx) }

// Open loads an instance for a session: its config with secrets unsealed, its saved credentials, its provider, and
// the sink its session reports to.
func (s *Service) Open(ctx context.Context, instanceID string) (Instance, Provider, Sink, error) {
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
	if inst.Credentials != nil {
		if out.Credentials, err = s.sealer.Open(*inst.Credentials, []byte("credentials:"+inst.ID)); err != nil {
			return Instance{}, nil, nil, fmt.Errorf("channels: instance %s: credentials do not open with the server key: %w", inst.ID, err)
		}
	}
	return out, p, s.SinkFor(inst.ID), nil
}

// Outbound loads a queued message for sending: its chat's address, the network IDs of the messages it refers to,
// and a reader of its media.
func (s *Service) Outbound(ctx context.Context, messageID string) (Outbound, error) {
	m, err := s.db.Messages.ByID(ctx, s.db.Reader(), messageID)
	if err != nil {
		return Outbound{}, err
	}
	c, err := s.db.Chats.Get(ctx, m.WorkspaceID, m.InstanceID, m.ChatID)
	if err != nil {
		return Outbound{}, err
	}
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
	return out, nil
}

// applyEarly applies the receipts parked for a message whose network ID is now committed. Both sides look after
// they wrote (Sent after its commit, Receipt after parking), and take is atomic: each receipt is applied once.
func (s *Service) applyEarly(ctx context.Context, providerID, messageID string) error {
	m, err := s.db.Messages.ByID(ctx, s.db.Reader(), messageID)
	if err != nil {
		return err
	}
	rs := s.early.take(m.InstanceID, providerID)
	if len(rs) == 0 {
		return nil
	}
	return s.inTxFor(ctx, []string{m.InstanceID}, func(ctx context.Context, tx bun.Tx) error {
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
func (s *Service) SinkFor(instanceID string) Sink { return &sink{s: s, id: instanceID} }

type sink struct {
	s  *Service
	id string
}

// locked runs fn on the instance, locked, inside a transaction.
func (k *sink) locked(ctx context.Context, fn func(ctx context.Context, tx bun.Tx, i *store.Instance) error) error {
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx bun.Tx) error {
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
	return k.locked(ctx, func(ctx context.Context, tx bun.Tx, i *store.Instance) error {
		from := Status(i.Status)
		if st == StatusConnecting && (from == StatusConnected || from == StatusReconnecting) {
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
	return k.locked(ctx, func(ctx context.Context, tx bun.Tx, i *store.Instance) error {
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
		return k.s.emit(ctx, tx, i, func(_ gen.Instance, seq int64) any {
			return gen.InstanceQrUpdatedEvent{Code: code, ExpiresAt: exp, InstanceId: k.id, Sequence: seq}
		})
	})
}

// Connected records the paired account and its credentials (sealed) and moves the instance to connected.
func (k *sink) Connected(ctx context.Context, account Party, credentials []byte) error {
	account = text.Cleaned(account)
	return k.locked(ctx, func(ctx context.Context, tx bun.Tx, i *store.Instance) error {
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
	in = text.Cleaned(in)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	var media *store.MessageMedia
	if in.Media != nil {
		media, err = k.s.saveInbound(ctx, inst, in.Media)
		if err != nil {
			return err
		}
	}
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx bun.Tx) error {
		if in.ProviderID != "" {
			if _, err := k.s.db.Messages.ByProviderID(ctx, tx, k.id, in.ProviderID); err == nil {
				return nil
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		chatAddress := in.Chat
		if chatAddress == "" {
			chatAddress = in.From.Address
		}
		if !in.FromMe && in.From.Address != "" {
			if _, err := k.s.resolve(ctx, tx, inst, in.From); err != nil {
				return err
			}
		}
		c, err := k.s.upsertChat(ctx, tx, inst, chatAddress, in.From)
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
			StatusHistory: []store.StatusChange{{Status: msgReceived, At: micro(at)}}}
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
		for _, ref := range []struct {
			pid string
			dst **string
		}{{in.ReplyTo, &m.ReplyToMessageID}, {in.Target, &m.TargetMessageID}} {
			if ref.pid == "" {
				continue
			}
			if r, err := k.s.db.Messages.ByProviderID(ctx, tx, k.id, ref.pid); err == nil {
				*ref.dst = &r.ID
			}
		}
		if err := k.s.db.Messages.Create(ctx, tx, &m); err != nil {
			return err
		}
		api, err := k.s.MessageAPI(ctx, tx, m)
		if err != nil {
			return err
		}
		seq, err := k.s.db.Instances.NextSequence(ctx, tx, k.id)
		if err != nil {
			return err
		}
		var payload any = gen.MessageReceivedEvent{Message: api, InstanceId: k.id, Sequence: seq}
		if in.FromMe {
			payload = gen.MessageSentEvent{Message: api, InstanceId: k.id, Sequence: seq}
		}
		if err := k.s.emitPayload(ctx, tx, inst.WorkspaceID, k.id, payload); err != nil {
			return err
		}
		return k.s.touchChat(ctx, tx, &c, m, !in.FromMe)
	})
}

// saveInbound stores the bytes of an inbound message's media.
func (s *Service) saveInbound(ctx context.Context, inst store.Instance, in *Media) (*store.MessageMedia, error) {
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

// errParked ends the transaction of a receipt that was parked for its send.
var errParked = errors.New("channels: receipt parked")

// Receipt moves a sent message to delivered or read, never backwards.
func (k *sink) Receipt(ctx context.Context, r Receipt) error {
	r = text.Cleaned(r)
	err := k.receipt(ctx, r)
	if !errors.Is(err, errParked) {
		return err
	}
	// The send may have committed meanwhile, after its own look for parked receipts.
	m, err := k.s.db.Messages.ByProviderIDRead(ctx, k.id, r.ProviderID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return k.s.applyEarly(ctx, r.ProviderID, m.ID)
}

func (k *sink) receipt(ctx context.Context, r Receipt) error {
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx bun.Tx) error {
		m, err := k.s.db.Messages.ByProviderID(ctx, tx, k.id, r.ProviderID)
		if errors.Is(err, store.ErrNotFound) {
			// A receipt can overtake the record of the send it is about (the network answers before Sent
			// commits): it is applied when Sent records the network's ID.
			k.s.early.park(k.id, r)
			return errParked
		}
		if err != nil {
			return err
		}
		if r.Status != msgDelivered && r.Status != msgRead && (r.Status != msgFailed || r.Failure == nil) {
			return fmt.Errorf("channels: receipt status %q is neither delivered, read nor failed with a failure", r.Status)
		}
		at := r.At
		if at.IsZero() {
			at = time.Now()
		}
		detail := ""
		if r.Failure != nil {
			detail = r.Failure.Detail
		}
		_, err = k.s.advance(ctx, tx, m.ID, r.Status, at, detail, r.Failure)
		return err
	})
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
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx bun.Tx) error {
		_, err := k.s.resolve(ctx, tx, inst, p)
		return err
	})
}
