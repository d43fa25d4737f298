package channels

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// Call records an incoming call in one transaction: the caller's contact, call.received, and, when the instance
// declines calls with a message, that message queued to the caller (a group call gets none: the message would go
// to the whole group). It answers whether the session declines the call.
func (k *sink) Call(ctx context.Context, c IncomingCall) (CallAnswer, error) {
	c = text.Cleaned(c)
	if c.At.IsZero() {
		c.At = time.Now()
	}
	var answer CallAnswer
	err := k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		inst, err := k.s.db.Instances.ByID(ctx, tx, k.id)
		if err != nil {
			return err
		}
		contact, err := k.s.resolve(ctx, tx, inst, c.From)
		if err != nil {
			return err
		}
		answer.Reject = inst.CallsReject != nil && *inst.CallsReject
		ev := gen.CallReceivedEvent{InstanceId: inst.ID, Rejected: answer.Reject, Contact: ContactAPI(contact),
			Call: gen.Call{Id: c.ID, Video: c.Video, Group: c.Group, At: micro(c.At),
				From: gen.Party{ContactId: &contact.ID, Address: c.From.Address, DisplayName: nonEmpty(c.From.DisplayName)}}}
		if answer.Reject && inst.CallsMessage != nil && !c.Group {
			m, err := k.s.queueText(ctx, tx, inst, c.From, *inst.CallsMessage)
			if err != nil {
				return err
			}
			ev.MessageId = &m.ID
		}
		return k.s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Payload: ev})
	})
	return answer, err
}

// queueText queues, inside tx, a text of the instance to a person, as an accepted send does: the message, its
// send job and the chat's newest message. The runtime sends it under the instance's pacing.
func (s *Recorder) queueText(ctx context.Context, tx store.Querier, inst store.Instance, to Party, body string) (store.Message, error) {
	chat, err := s.upsertChat(ctx, tx, inst, to.Address, to)
	if err != nil {
		return store.Message{}, err
	}
	now := micro(time.Now())
	m := store.Message{ID: store.NewID("msg"), WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, ChatID: chat.ID,
		Direction: "outbound", Type: string(TypeText), Text: &body, Status: msgQueued,
		StatusHistory: []store.StatusChange{{Status: msgQueued, At: now}},
		To:            store.Party{Address: chat.Address, DisplayName: deref(chat.Name)}}
	if inst.Account != nil {
		m.From = store.Party{Address: inst.Account.Address, DisplayName: inst.Account.DisplayName}
	}
	if err := s.db.Messages.Create(ctx, tx, &m); err != nil {
		return store.Message{}, err
	}
	if err := s.db.SendQueue.Enqueue(ctx, tx, []store.SendItem{{MessageID: m.ID, WorkspaceID: inst.WorkspaceID,
		InstanceID: inst.ID, Chat: chat.Address}}); err != nil {
		return store.Message{}, err
	}
	touch(&chat, m, false)
	if err := s.db.Chats.Save(ctx, tx, &chat); err != nil {
		return store.Message{}, err
	}
	return m, s.emitChat(ctx, tx, chat)
}

// ChatOrganized records how the account keeps a chat as another of its devices changed it: only what differs, with
// chat.updated. A chat the instance does not know yet is left alone (it appears with its first message).
func (k *sink) ChatOrganized(ctx context.Context, chat string, o ChatOrganization) error {
	if !o.MutedUntil.IsZero() {
		o.MutedUntil = micro(o.MutedUntil)
	}
	return k.knownChat(ctx, chat, func(ctx context.Context, tx store.Tx, c store.Chat) error {
		change := organized(c, o)
		if change == (ChatOrganization{}) {
			return nil
		}
		applyOrganization(&c, change)
		if err := k.s.db.Chats.Save(ctx, tx, &c); err != nil {
			return err
		}
		return k.s.emitChat(ctx, tx, c)
	})
}
