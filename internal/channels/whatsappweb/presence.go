//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"time"

	"go.mau.fi/whatsmeow/appstate"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
)

// SendChatState shows the chat that the account is typing, recording a voice note, or stopped (chats.typing).
func (s *session) SendChatState(ctx context.Context, chat, state string) error {
	c, to, err := s.target(chat)
	if err != nil {
		return err
	}
	st, media := types.ChatPresenceComposing, types.ChatPresenceMediaText
	switch state {
	case channels.StateRecording:
		media = types.ChatPresenceMediaAudio
	case channels.StatePaused:
		st = types.ChatPresencePaused
	}
	if err := c.SendChatPresence(ctx, to, st, media); err != nil {
		return failureOf(err)
	}
	s.watch(ctx, to)
	return nil
}

// SetAvailability tells the account's contacts whether it is online (presence.send). WhatsApp's phones stop
// notifying the account's own phone while a linked device shows it available, so an instance that never sets
// it stays as WhatsApp shows it by default.
func (s *session) SetAvailability(ctx context.Context, available bool) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	p := types.PresenceUnavailable
	if available {
		p = types.PresenceAvailable
	}
	if err := c.SendPresence(ctx, p); err != nil {
		return failureOf(err)
	}
	return nil
}

// watch asks WhatsApp, once per session, for the presence of a person the account talks to: WhatsApp sends a
// person's availability and last seen only to devices that asked (groups are not people and are not asked).
func (s *session) watch(ctx context.Context, who types.JID) {
	if who.Server != types.DefaultUserServer && who.Server != types.HiddenUserServer {
		return
	}
	key := who.ToNonAD().String()
	s.mu.Lock()
	if s.watched == nil {
		s.watched = map[string]bool{}
	}
	seen := s.watched[key]
	s.watched[key] = true
	s.mu.Unlock()
	if seen {
		return
	}
	if c, err := s.client(); err == nil {
		// Best effort: without it the person's presence just does not arrive.
		_ = c.SubscribePresence(ctx, who.ToNonAD())
	}
}

// presence reports a person's availability (presence.receive): online, or offline with when they were last seen
// (the zero time where they hide it).
func (s *session) presence(e *events.Presence) {
	ctx := s.live()
	if ctx == nil || e.From.Server == types.GroupServer {
		return
	}
	p := channels.Presence{From: s.party(ctx, e.From, types.EmptyJID, ""), State: channels.PresenceAvailable}
	if e.Unavailable {
		p.State, p.LastSeen = channels.PresenceUnavailable, e.LastSeen
	}
	s.report(func(ctx context.Context) error { return s.sink.Presence(ctx, p) })
}

// chatPresence reports a chat state: a person (or a group's member) typing, recording or stopped.
func (s *session) chatPresence(e *events.ChatPresence) {
	ctx := s.live()
	if ctx == nil || e.IsFromMe {
		return
	}
	state := channels.StatePaused
	if e.State == types.ChatPresenceComposing {
		state = channels.StateTyping
		if e.Media == types.ChatPresenceMediaAudio {
			state = channels.StateRecording
		}
	}
	p := channels.Presence{From: s.party(ctx, e.Sender, e.SenderAlt, ""),
		Chat: s.chat(ctx, types.MessageInfo{MessageSource: e.MessageSource}), State: state}
	s.report(func(ctx context.Context) error { return s.sink.Presence(ctx, p) })
}

// pollVote reports a vote on one of the account's polls. WhatsApp encrypts votes with the poll's message secret
// and names each choice by the SHA-256 of its text; the service maps them onto the poll's options. A vote that
// cannot be decrypted (a poll this device did not send, its secret unknown) is not reported.
func (s *session) pollVote(ctx context.Context, e *events.Message) {
	c, err := s.client()
	if err != nil {
		return
	}
	vote, err := c.DecryptPollVote(ctx, e)
	if err != nil {
		return
	}
	v := channels.PollVote{Poll: e.Message.GetPollUpdateMessage().GetPollCreationMessageKey().GetID(),
		Voter: s.party(ctx, e.Info.Sender, e.Info.SenderAlt, e.Info.PushName), At: e.Info.Timestamp,
		OptionHashes: vote.GetSelectedOptions()}
	if v.OptionHashes == nil {
		v.OptionHashes = [][]byte{} // the vote was taken back
	}
	s.report(func(ctx context.Context) error { return s.sink.PollVote(ctx, v) })
}

// call reports an incoming call, and declines it on WhatsApp when the instance declines calls.
func (s *session) call(meta types.BasicCallMeta, video, group bool) {
	ctx := s.live()
	if ctx == nil {
		return
	}
	caller := meta.CallCreator
	if caller.IsEmpty() {
		caller = meta.From
	}
	in := channels.IncomingCall{ID: meta.CallID, From: s.party(ctx, caller.ToNonAD(), meta.CallCreatorAlt, ""),
		Video: video, Group: group || !meta.GroupJID.IsEmpty(), At: meta.Timestamp}
	s.report(func(ctx context.Context) error {
		answer, err := s.sink.Call(ctx, in)
		if err != nil || !answer.Reject {
			return err
		}
		c, err := s.client()
		if err != nil {
			return err
		}
		// The call is recorded as declined whether or not WhatsApp takes the decline (the call may have ended).
		_ = c.RejectCall(ctx, meta.From, meta.CallID)
		return nil
	})
}

// maxPollOptions is the most options a poll of the API has (WhatsApp's own limit too).
const maxPollOptions = 12

// pollOf is a message's poll, in whichever of WhatsApp's three versions of the poll message it came.
func pollOf(m *waE2E.Message) *waE2E.PollCreationMessage {
	for _, p := range []*waE2E.PollCreationMessage{m.GetPollCreationMessage(), m.GetPollCreationMessageV2(),
		m.GetPollCreationMessageV3()} {
		if p != nil {
			return p
		}
	}
	return nil
}

// organized reports a chat the account archived, pinned or muted on its phone (an app state change).
func (s *session) organized(chat types.JID, o channels.ChatOrganization) {
	ctx := s.live()
	if ctx == nil {
		return
	}
	address := s.chatAddress(ctx, chat)
	s.report(func(ctx context.Context) error { return s.sink.ChatOrganized(ctx, address, o) })
}

// chatAddress is the address of a chat the app state names: the group, or the person (by number when known).
func (s *session) chatAddress(ctx context.Context, chat types.JID) string {
	if chat.Server == types.GroupServer {
		return chat.ToNonAD().String()
	}
	return s.party(ctx, chat, types.EmptyJID, "").Address
}

// OrganizeChat archives, pins or mutes a chat in the account's app state, which the phone and the other linked
// devices apply: one patch per change, in WhatsApp's own encoding.
func (s *session) OrganizeChat(ctx context.Context, chat string, o channels.ChatOrganization) error {
	c, j, err := s.target(chat)
	if err != nil {
		return err
	}
	var patches []appstate.PatchInfo
	if o.Archived != nil {
		patches = append(patches, appstate.BuildArchive(j, *o.Archived, time.Time{}, nil))
	}
	if o.Pinned != nil && (o.Archived == nil || !*o.Archived) { // archiving unpins by itself
		patches = append(patches, appstate.BuildPin(j, *o.Pinned))
	}
	if o.Muted != nil {
		var end *int64
		if *o.Muted && !o.MutedUntil.IsZero() {
			ms := o.MutedUntil.UnixMilli()
			end = &ms
		}
		patches = append(patches, appstate.BuildMuteAbs(j, *o.Muted, end))
	}
	for _, p := range patches {
		if err := c.SendAppState(ctx, p); err != nil {
			return failureOf(err)
		}
	}
	return nil
}
