package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// mailPresence is an availability or a chat state an account shows another: what the recipient's sink is told as
// a Presence.
type mailPresence struct {
	From     string    `json:"from"`
	FromName string    `json:"from_name,omitempty"`
	Chat     string    `json:"chat,omitempty"` // a chat state's chat as the recipient sees it
	State    string    `json:"state"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

func (p *mailPresence) presence() channels.Presence {
	return channels.Presence{From: channels.Party{Address: p.From, DisplayName: p.FromName}, Chat: p.Chat,
		State: p.State, LastSeen: p.LastSeen}
}

// SendChatState shows the chat's other side (every other participant of a group) that the account types, records
// or stopped. A person who blocked the account is shown nothing, as with messages.
func (s *session) SendChatState(ctx context.Context, chat, state string) error {
	rs, number := s.live()
	if number == "" {
		return notConnected()
	}
	chat, err := normalize(chat)
	if err != nil {
		return failure("invalid_address", "%v", err)
	}
	env := envelope{Presence: &mailPresence{From: number, FromName: s.cfg.DisplayName, Chat: number, State: state}}
	db := s.p.net.Reader()
	var letters []letter
	at := now()
	if isGroup(chat) {
		env.Presence.Chat = chat
		if letters, err = s.toGroup(ctx, db, number, chat, at, env); err != nil {
			return err
		}
	} else {
		instanceID, blocked, err := s.p.net.Recipient(ctx, db, chat, number)
		if errors.Is(err, store.ErrNotFound) {
			return &channels.Failure{Code: "recipient_not_on_network", Detail: chat + " has no account on the sandbox network"}
		}
		if err != nil || blocked {
			return err
		}
		letters = append(letters, letter{to: chat, instance: instanceID, due: at, env: env})
	}
	return s.postNow(ctx, rs, letters)
}

// SetAvailability tells every account that knows the number (direct messages, shared groups) whether the account
// is available; going unavailable tells them when it was last seen.
func (s *session) SetAvailability(ctx context.Context, available bool) error {
	rs, number := s.live()
	if number == "" {
		return notConnected()
	}
	known, err := s.p.net.Counterparts(ctx, s.p.net.Reader(), number)
	if err != nil {
		return err
	}
	at := now()
	p := &mailPresence{From: number, FromName: s.cfg.DisplayName, State: channels.PresenceAvailable}
	if !available {
		p.State, p.LastSeen = channels.PresenceUnavailable, at
	}
	letters := make([]letter, 0, len(known))
	for _, a := range known {
		letters = append(letters, letter{to: a.Number, instance: a.InstanceID, due: at, env: envelope{Presence: p}})
	}
	return s.postNow(ctx, rs, letters)
}

// postNow posts letters and wakes their recipients.
func (s *session) postNow(ctx context.Context, rs *runState, letters []letter) error {
	if len(letters) == 0 {
		return nil
	}
	if err := s.p.net.Shared(ctx, func(ctx context.Context, tx store.Tx) error {
		return s.p.post(ctx, tx, letters)
	}); err != nil {
		return err
	}
	s.wakeAll(rs, letters)
	return nil
}

// mailVote is a vote on a poll: what the poll's sender (and, in a group, every other member) is told as a PollVote.
type mailVote struct {
	Poll     string    `json:"poll"` // the poll's message id
	From     string    `json:"from"`
	FromName string    `json:"from_name,omitempty"`
	Options  []int     `json:"options"`
	At       time.Time `json:"at"`
}

func (v *mailVote) vote() channels.PollVote {
	return channels.PollVote{Poll: v.Poll, Voter: channels.Party{Address: v.From, DisplayName: v.FromName},
		Options: v.Options, At: v.At}
}

// vote votes options on the poll with the message id poll, which the account received: its sender is told (every
// other member too when it was sent to a group, as the network shows a group's poll results to all).
func (s *session) vote(ctx context.Context, poll string, options []int) error {
	rs, number := s.live()
	if number == "" {
		return notConnected()
	}
	db := s.p.net.Reader()
	m, err := s.p.net.Message(ctx, db, poll)
	if errors.Is(err, store.ErrNotFound) {
		return failure("invalid_control", "the sandbox network has no message %s", poll)
	}
	if err != nil {
		return err
	}
	to := []string{m.Sender}
	if isGroup(m.Chat) {
		g, err := s.p.net.Group(ctx, db, m.Chat)
		if err != nil {
			return err
		}
		if _, ok := member(g, number); !ok {
			return failure("not_a_participant", "the instance is not a participant of %s", m.Chat)
		}
		to = to[:0]
		for _, x := range g.Members {
			if x.Number != number {
				to = append(to, x.Number)
			}
		}
	} else if m.Chat != number {
		return failure("invalid_control", "message %s was not sent to this account", poll)
	}
	accounts, err := s.p.net.Accounts(ctx, db, to)
	if err != nil {
		return err
	}
	at := now()
	v := &mailVote{Poll: poll, From: number, FromName: s.cfg.DisplayName, Options: options, At: at}
	letters := make([]letter, 0, len(accounts))
	for _, a := range accounts {
		letters = append(letters, letter{to: a.Number, instance: a.InstanceID, due: at, env: envelope{Vote: v}})
	}
	return s.postNow(ctx, rs, letters)
}

// OrganizeChat keeps a chat archived, pinned or muted. The sandbox network has no other devices to show it on, so
// a live session is all it needs; the service records the state.
// SaveLabel keeps nothing on the simulated network: the labels are Switchboard's own.
func (s *session) SaveLabel(_ context.Context, _ channels.NetworkLabel) error {
	if _, number := s.live(); number == "" {
		return notConnected()
	}
	return nil
}

// LabelChat checks the chat's address; the simulated network keeps no labels.
func (s *session) LabelChat(_ context.Context, chat, _ string, _ bool) error {
	if _, number := s.live(); number == "" {
		return notConnected()
	}
	if _, err := normalize(chat); err != nil {
		return failure("invalid_address", "%v", err)
	}
	return nil
}

func (s *session) OrganizeChat(_ context.Context, chat string, _ channels.ChatOrganization) error {
	if _, number := s.live(); number == "" {
		return notConnected()
	}
	if _, err := normalize(chat); err != nil {
		return failure("invalid_address", "%v", err)
	}
	return nil
}
