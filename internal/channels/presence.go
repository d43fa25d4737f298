package channels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// SendChatPresence shows a chat of an instance that the account is typing, recording or stopped (paused). Nothing
// is stored: a chat state lasts seconds on every network. Returns NotFound, CapabilityNotSupported (chats.typing),
// Validation for another state, and InstanceNotConnected.
func (s *Service) SendChatPresence(ctx context.Context, workspaceID, instanceID, chatID, state string) error {
	switch state {
	case StateTyping, StateRecording, StatePaused:
	default:
		return problem.Errorf(problem.ValidationFailed, "The state %q is not one of typing, recording, paused.", state)
	}
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapTyping)
	if err != nil {
		return err
	}
	c, err := s.GetChat(ctx, workspaceID, instanceID, chatID)
	if err != nil {
		return err
	}
	_, err = call(ctx, s, inst, cmdChatState, chatStateArgs{Chat: c.Address, State: state})
	return err
}

// SetPresence tells the contacts of an instance that share presence whether the account is available. Returns
// NotFound, CapabilityNotSupported (presence.send) and InstanceNotConnected.
func (s *Service) SetPresence(ctx context.Context, workspaceID, instanceID string, available bool) error {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapPresenceSend)
	if err != nil {
		return err
	}
	_, err = call(ctx, s, inst, cmdSetAvailability, availabilityArgs{Available: available})
	return err
}

// availability maps a network's shades of availability onto the API's four (XMPP's chat is available, xa away,
// dnd busy); "" for a state that is none of them.
func availability(state string) string {
	switch state {
	case PresenceAvailable, "chat":
		return PresenceAvailable
	case PresenceAway, "xa":
		return PresenceAway
	case PresenceBusy, "dnd":
		return PresenceBusy
	case PresenceUnavailable:
		return PresenceUnavailable
	}
	return ""
}

// Presence records a contact's availability on the contact (with when they were last seen: the network's word, or
// now when they go offline) or passes a chat state on, and emits presence.updated either way. A repeated
// availability changes nothing and emits nothing.
func (k *sink) Presence(ctx context.Context, p Presence) error {
	p = text.Cleaned(p)
	chatState := p.IsChatState()
	state := p.State
	if !chatState {
		if state = availability(p.State); state == "" {
			return fmt.Errorf("channels: presence %q is neither an availability nor a chat state", p.State)
		}
	}
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		c, err := k.s.resolve(ctx, tx, inst, p.From)
		if err != nil {
			return err
		}
		ev := gen.PresenceUpdatedEvent{InstanceId: inst.ID, State: gen.PresenceUpdatedEventState(state)}
		if chatState {
			chat := p.Chat
			if chat == "" {
				chat = p.From.Address
			}
			ch, err := k.s.db.Chats.ByAddress(ctx, tx, inst.ID, chat)
			switch {
			case err == nil:
				ev.ChatId = &ch.ID
			case !errors.Is(err, store.ErrNotFound): // typing in a chat with no message yet: no chat to name
				return err
			}
		} else {
			seen := c.LastSeenAt
			switch {
			case !p.LastSeen.IsZero():
				t := micro(p.LastSeen)
				seen = &t
			case state == PresenceUnavailable && deref(c.Presence) != PresenceUnavailable:
				t := micro(time.Now())
				seen = &t
			}
			if deref(c.Presence) == state && equalTimes(c.LastSeenAt, seen) {
				return nil
			}
			c.Presence, c.LastSeenAt = &state, seen
			if err := k.s.db.Contacts.Save(ctx, tx, &c); err != nil {
				return err
			}
		}
		ev.Contact, ev.LastSeenAt = ContactAPI(c), c.LastSeenAt
		return k.s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Payload: ev})
	})
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
