// Package channels is the messaging capability: instances (connected channel accounts), messages, chats, groups and
// contacts over any network a Provider connects to. Handlers, the console and the CLI call its Service; providers
// live in sub-packages (internal/channels/<provider>) and never see the API's types, and the API never sees theirs.
//
// The seams, from the outside in:
//
//   - Provider describes a network (its capabilities, auth methods, config schema) and opens Sessions.
//   - Session is one live connection of one instance. Optional interfaces (Sender, ReadMarker, GroupManager,
//     ContactDirectory, Pairer, Controller) add what a network can do; the capabilities a Provider lists must match
//     the interfaces its sessions implement, and a call that needs a missing capability is refused with
//     capability_not_supported before anything is queued.
//   - Sink is how a session reports what happened (state, QR codes, inbound messages, receipts, group and contact
//     changes). The Service implements it; every Sink method returns only after the change and its event committed,
//     so a provider acknowledges upstream only what is durable.
//   - Sessions (the runtime) holds each instance's session in exactly one process and carries Commands to it.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
)

// Capability is something a provider can do, named as in the API (`GET /api/v1/providers`).
type Capability string

// The capabilities. A provider lists those its sessions implement.
const (
	CapText         Capability = "messages.text"
	CapMedia        Capability = "messages.media"
	CapLocation     Capability = "messages.location"
	CapContactCard  Capability = "messages.contact"
	CapReaction     Capability = "messages.reaction"
	CapReply        Capability = "messages.reply"
	CapEdit         Capability = "messages.edit"
	CapDelete       Capability = "messages.delete"
	CapTemplate     Capability = "messages.template"
	CapPoll         Capability = "messages.poll"
	CapDelivered    Capability = "receipts.delivered"
	CapRead         Capability = "receipts.read"
	CapMarkRead     Capability = "chats.mark_read"
	CapTyping       Capability = "chats.typing"
	CapArchive      Capability = "chats.archive"
	CapPin          Capability = "chats.pin"
	CapMute         Capability = "chats.mute"
	CapPresenceSend Capability = "presence.send"
	CapPresenceRecv Capability = "presence.receive"
	CapCallsReceive Capability = "calls.receive"
	CapCallsReject  Capability = "calls.reject"
	// CapProxy: the provider's connections can go through an instance's forward proxy (Instance.Via).
	CapProxy          Capability = "connection.proxy"
	CapGroupsCreate   Capability = "groups.create"
	CapGroupsManage   Capability = "groups.participants"
	CapGroupsInvite   Capability = "groups.invite"
	CapContactsLookup Capability = "contacts.lookup"
	// CapLabels: the account's chat labels (Labeler).
	CapLabels Capability = "chats.labels"
	// CapContactsPicture: a person's profile picture (PictureReader).
	CapContactsPicture Capability = "contacts.picture"
	// CapGroupsSettings: who may send and who may edit a group's info (GroupConfigurer).
	CapGroupsSettings Capability = "groups.settings"
	// CapGroupsPicture and CapProfilePicture: setting a group's picture and the account's own (PictureWriter).
	CapGroupsPicture  Capability = "groups.picture"
	CapProfilePicture Capability = "profile.picture"
	// CapProfileName and CapProfileAbout: the account's own name and about text (ProfileEditor).
	CapProfileName   Capability = "profile.name"
	CapProfileAbout  Capability = "profile.about"
	CapContactsBlock Capability = "contacts.block"
	CapAuthQR        Capability = "auth.qr"
	CapAuthPairing   Capability = "auth.pairing_code"
	CapAuthToken     Capability = "auth.token"
)

// AuthMethod is how an instance proves it owns its account.
type AuthMethod string

const (
	AuthQR          AuthMethod = "qr"           // a code shown to the user, scanned with the account's app
	AuthPairingCode AuthMethod = "pairing_code" // a short code typed into the account's app
	AuthToken       AuthMethod = "token"        // a credential in the instance's config (bot token, password)
)

// Info describes a provider as `GET /api/v1/providers/{provider}` shows it.
type Info struct {
	Name         string // stable identifier: "sandbox", "xmpp", "telegram", "whatsapp_cloud"
	Title        string
	Description  string
	Capabilities []Capability
	AuthMethods  []AuthMethod
	// ConfigSchema is the JSON Schema (2020-12) of an instance's config. Properties marked "writeOnly": true are
	// secrets: stored sealed, never returned.
	ConfigSchema map[string]any
	// AddressFormat explains the addresses of the network ("E.164 phone number", "XMPP JID", …) and AddressExample
	// is one.
	AddressFormat  string
	AddressExample string
}

// Has reports whether the provider lists capability c.
func (i Info) Has(c Capability) bool {
	for _, x := range i.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Provider is a network instances connect to. Implementations are safe for concurrent use.
type Provider interface {
	Info() Info
	// NormalizeAddress returns the canonical form of an address of the network (E.164 for phones, a bare lower-case
	// JID, …) or an error saying what is wrong with it. Two addresses of the same account normalize equal.
	NormalizeAddress(raw string) (string, error)
	// ValidateConfig checks an instance's config against the provider's rules beyond its JSON Schema; the error's
	// message is shown to the client.
	ValidateConfig(config map[string]any) error
	// Open starts a session for an instance. It returns at once; the session connects in Run and reports its state
	// through the sink.
	Open(inst Instance, sink Sink) (Session, error)
}

// Instance is what a provider knows of an instance.
type Instance struct {
	ID          string
	WorkspaceID string
	Config      map[string]any // with secrets unsealed
	// Credentials is what the session saved through Sink.Connected the last time it paired (nil before the first
	// pairing and after a logout): a session restores from it without asking the user again.
	Credentials []byte
	// Runtime is the runtime that opened the session, set by it: a session that must reach the session of another
	// instance, wherever it lives, carries a command through it (the sandbox wakes a recipient so). The runtime
	// hands itself to the sessions it opens, so that providers are built before it and never need it.
	Runtime Sessions
	// Via is the way out through the instance's forward proxy (nil: none): a provider with connection.proxy opens
	// every connection of the session to its network with Via.DialContext or a Via.Client.
	Via *egress.Proxied
}

// Session is one live connection of one instance, held by one process at a time.
type Session interface {
	// Run connects and keeps the connection until ctx is canceled (disconnect: credentials kept) or the connection
	// ends for good (logged out, banned, bad credentials: report it through the sink, then return). A returned error
	// is a failure the runtime retries with backoff; a nil return after ctx is done is a clean stop.
	Run(ctx context.Context) error
	// Logout ends the session and invalidates its credentials on the network (best effort when offline).
	Logout(ctx context.Context) error
}

var cmdLogout = defineCommand("session.logout", func(ctx context.Context, s Session, _ none) (none, error) {
	return none{}, s.Logout(ctx)
})

// Sender is a session that sends messages (every provider with messages.text).
type Sender interface {
	// Send delivers one message to the network. It is called again with the same Outbound.MessageID when an earlier
	// call's outcome is unknown (a crash mid-send), with Outbound.Resend set: providers whose network can drop the
	// repeat by that ID do, and the others mark the result Sent.PossibleRepeat. A *Failure error is the network's
	// refusal; any other error is treated as transient.
	Send(ctx context.Context, m Outbound) (Sent, error)
}

// ReadMarker is a session that can mark a chat read (chats.mark_read).
type ReadMarker interface {
	MarkRead(ctx context.Context, chat string, upTo string) error
}

type markReadArgs struct {
	Chat string `json:"chat"`
	UpTo string `json:"up_to"`
}

var cmdMarkRead = defineCommand("chats.mark_read", func(ctx context.Context, r ReadMarker, a markReadArgs) (none, error) {
	return none{}, r.MarkRead(ctx, a.Chat, a.UpTo)
})

// The chat states a ChatStater shows (chats.typing).
const (
	StateTyping    = "typing"
	StateRecording = "recording" // a voice message
	StatePaused    = "paused"
)

// ChatStater is a session that shows a chat that the account is typing or recording, or stopped (chats.typing).
type ChatStater interface {
	SendChatState(ctx context.Context, chat, state string) error
}

type chatStateArgs struct {
	Chat  string `json:"chat"`
	State string `json:"state"`
}

var cmdChatState = defineCommand("chats.typing", func(ctx context.Context, c ChatStater, a chatStateArgs) (none, error) {
	return none{}, c.SendChatState(ctx, a.Chat, a.State)
})

// ChatOrganizer is a session that keeps chats archived, pinned or muted on the network, so that the account's
// phone and other devices show it (chats.archive, chats.pin, chats.mute). Only the fields set change.
type ChatOrganizer interface {
	OrganizeChat(ctx context.Context, chat string, o ChatOrganization) error
}

// ChatOrganization is a change of how a chat is kept: nil fields stay; MutedUntil is the end of a mute (zero:
// until unmuted).
type ChatOrganization struct {
	Archived   *bool     `json:"archived,omitempty"`
	Pinned     *bool     `json:"pinned,omitempty"`
	Muted      *bool     `json:"muted,omitempty"`
	MutedUntil time.Time `json:"muted_until,omitzero"`
}

type organizeArgs struct {
	Chat string           `json:"chat"`
	Org  ChatOrganization `json:"org"`
}

var cmdOrganize = defineCommand("chats.organize", func(ctx context.Context, o ChatOrganizer, a organizeArgs) (none, error) {
	return none{}, o.OrganizeChat(ctx, a.Chat, a.Org)
})

// PresenceSetter is a session that tells the account's contacts whether it is available (presence.send).
type PresenceSetter interface {
	SetAvailability(ctx context.Context, available bool) error
}

type availabilityArgs struct {
	Available bool `json:"available"`
}

var cmdSetAvailability = defineCommand("presence.send", func(ctx context.Context, p PresenceSetter, a availabilityArgs) (none, error) {
	return none{}, p.SetAvailability(ctx, a.Available)
})

// GroupManager is a session that manages groups (groups.*).
type GroupManager interface {
	CreateGroup(ctx context.Context, subject string, participants []string) (Group, error)
	GetGroup(ctx context.Context, group string) (Group, error)
	UpdateGroup(ctx context.Context, group string, subject, description *string) (Group, error)
	// ChangeParticipants applies action (add, remove, promote, demote) to each participant and returns one result
	// per participant, in order.
	ChangeParticipants(ctx context.Context, group, action string, participants []string) ([]ParticipantResult, error)
	InviteLink(ctx context.Context, group string, revoke bool) (string, error)
	JoinGroup(ctx context.Context, invite string) (Group, error)
	LeaveGroup(ctx context.Context, group string) error
}

type (
	groupArgs struct {
		Group string `json:"group"`
	}
	groupCreateArgs struct {
		Subject      string   `json:"subject"`
		Participants []string `json:"participants"`
	}
	groupUpdateArgs struct {
		Group       string  `json:"group"`
		Subject     *string `json:"subject,omitempty"`
		Description *string `json:"description,omitempty"`
	}
	participantsArgs struct {
		Group        string   `json:"group"`
		Action       string   `json:"action"`
		Participants []string `json:"participants"`
	}
	inviteArgs struct {
		Group  string `json:"group"`
		Revoke bool   `json:"revoke"`
	}
	inviteResult struct {
		Invite string `json:"invite"`
	}
	joinArgs struct {
		Invite string `json:"invite"`
	}
)

var (
	cmdGroupCreate = defineCommand("groups.create", func(ctx context.Context, g GroupManager, a groupCreateArgs) (Group, error) {
		return g.CreateGroup(ctx, a.Subject, a.Participants)
	})
	cmdGroupGet = defineCommand("groups.get", func(ctx context.Context, g GroupManager, a groupArgs) (Group, error) {
		return g.GetGroup(ctx, a.Group)
	})
	cmdGroupUpdate = defineCommand("groups.update", func(ctx context.Context, g GroupManager, a groupUpdateArgs) (Group, error) {
		return g.UpdateGroup(ctx, a.Group, a.Subject, a.Description)
	})
	cmdGroupParticipants = defineCommand("groups.participants", func(ctx context.Context, g GroupManager, a participantsArgs) ([]ParticipantResult, error) {
		return g.ChangeParticipants(ctx, a.Group, a.Action, a.Participants)
	})
	cmdGroupInvite = defineCommand("groups.invite", func(ctx context.Context, g GroupManager, a inviteArgs) (inviteResult, error) {
		invite, err := g.InviteLink(ctx, a.Group, a.Revoke)
		return inviteResult{Invite: invite}, err
	})
	cmdGroupJoin = defineCommand("groups.join", func(ctx context.Context, g GroupManager, a joinArgs) (Group, error) {
		return g.JoinGroup(ctx, a.Invite)
	})
	cmdGroupLeave = defineCommand("groups.leave", func(ctx context.Context, g GroupManager, a groupArgs) (none, error) {
		return none{}, g.LeaveGroup(ctx, a.Group)
	})
)

// Labeler is a session that keeps the account's chat labels on the network (chats.labels).
type Labeler interface {
	// SaveLabel creates, renames, recolors or (Deleted) deletes a label.
	SaveLabel(ctx context.Context, l NetworkLabel) error
	// LabelChat puts a label on a chat (on) or takes it off.
	LabelChat(ctx context.Context, chat, label string, on bool) error
}

// NetworkLabel is a label as the network keeps it: ID is the network's (Switchboard's own ID for a label made here).
type NetworkLabel struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Color   int    `json:"color"`
	Deleted bool   `json:"deleted,omitempty"`
}

type labelChatArgs struct {
	Chat  string `json:"chat"`
	Label string `json:"label"`
	On    bool   `json:"on"`
}

var (
	cmdSaveLabel = defineCommand("labels.save", func(ctx context.Context, l Labeler, a NetworkLabel) (none, error) {
		return none{}, l.SaveLabel(ctx, a)
	})
	cmdLabelChat = defineCommand("labels.chat", func(ctx context.Context, l Labeler, a labelChatArgs) (none, error) {
		return none{}, l.LabelChat(ctx, a.Chat, a.Label, a.On)
	})
)

// GroupConfigurer is a session that changes who may do what in a group (groups.settings).
type GroupConfigurer interface {
	// SetGroupSettings applies the settings s gives ("" fields stay) and returns the group as it then is.
	SetGroupSettings(ctx context.Context, group string, s GroupSettings) (Group, error)
}

type groupSettingsArgs struct {
	Group    string        `json:"group"`
	Settings GroupSettings `json:"settings"`
}

var cmdGroupSettings = defineCommand("groups.settings", func(ctx context.Context, g GroupConfigurer, a groupSettingsArgs) (Group, error) {
	return g.SetGroupSettings(ctx, a.Group, a.Settings)
})

// PictureWriter is a session that sets pictures on the network: a group's (groups.picture) or the account's own
// (profile.picture); a provider lists those its network allows.
type PictureWriter interface {
	// SetPicture shows an image (JPEG or PNG, as mimeType says) as the picture of target, a group's address or ""
	// for the account's own profile; empty data removes it. It returns the network's ID of the new picture ("" where
	// the network names none).
	SetPicture(ctx context.Context, target string, data []byte, mimeType string) (string, error)
}

type setPictureArgs struct {
	Target   string `json:"target,omitempty"`
	Data     []byte `json:"data,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
}

type setPictureResult struct {
	ID string `json:"id,omitempty"`
}

var cmdSetPicture = defineCommand("pictures.set", func(ctx context.Context, w PictureWriter, a setPictureArgs) (setPictureResult, error) {
	id, err := w.SetPicture(ctx, a.Target, a.Data, a.MIMEType)
	return setPictureResult{ID: id}, err
})

// ProfileEditor is a session that reads and changes the account's own name (profile.name) and about text
// (profile.about); a provider lists those its network keeps.
type ProfileEditor interface {
	// Profile reads the account's profile as its contacts see it.
	Profile(ctx context.Context) (Profile, error)
	// SetProfile changes the fields change sets (nil: left as they are).
	SetProfile(ctx context.Context, change Profile) error
}

// Profile is the account's own name and about text (nil: the network does not keep it, or leave it in a change).
type Profile struct {
	Name  *string `json:"name,omitempty"`
	About *string `json:"about,omitempty"`
}

var (
	cmdProfileGet = defineCommand("profile.get", func(ctx context.Context, e ProfileEditor, _ none) (Profile, error) {
		return e.Profile(ctx)
	})
	cmdProfileSet = defineCommand("profile.set", func(ctx context.Context, e ProfileEditor, a Profile) (none, error) {
		return none{}, e.SetProfile(ctx, a)
	})
)

// PictureReader is a session that can fetch a person's profile picture (contacts.picture).
type PictureReader interface {
	// Picture returns the profile picture of an address, fetched through the session's own connections; a Picture
	// without Data means the person has none or does not share it.
	Picture(ctx context.Context, address string) (Picture, error)
}

// Picture is a profile picture: ID names it on the network (the same ID, the same picture; "" where the network
// names none), with its media type and bytes.
type Picture struct {
	ID       string `json:"id,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Data     []byte `json:"data,omitempty"`
}

type pictureArgs struct {
	Address string `json:"address"`
}

var cmdPicture = defineCommand("contacts.picture", func(ctx context.Context, r PictureReader, a pictureArgs) (Picture, error) {
	return r.Picture(ctx, a.Address)
})

// ContactDirectory is a session that can look addresses up (contacts.lookup) and block them (contacts.block).
type ContactDirectory interface {
	Lookup(ctx context.Context, addresses []string) ([]LookupResult, error)
	Block(ctx context.Context, address string, blocked bool) error
}

type (
	lookupArgs struct {
		Addresses []string `json:"addresses"`
	}
	blockArgs struct {
		Address string `json:"address"`
		Blocked bool   `json:"blocked"`
	}
)

var (
	cmdContactsLookup = defineCommand("contacts.lookup", func(ctx context.Context, d ContactDirectory, a lookupArgs) ([]LookupResult, error) {
		return d.Lookup(ctx, a.Addresses)
	})
	cmdContactsBlock = defineCommand("contacts.block", func(ctx context.Context, d ContactDirectory, a blockArgs) (none, error) {
		return none{}, d.Block(ctx, a.Address, a.Blocked)
	})
)

// Discoverer is a connected session whose capabilities depend on the account's server (XMPP discovers them from
// the server's service discovery: no HTTP File Upload service, no messages.media). The service consults it, when a
// session implements it, instead of Info().Capabilities, which then lists what the provider can do at best. Before a
// session has connected it answers the provider's list.
type Discoverer interface {
	Capabilities() []Capability
}

// Pairer is a session that pairs by a code typed into the account's app (auth.pairing_code).
type Pairer interface {
	PairingCode(ctx context.Context, phone string) (string, error)
}

type (
	pairingArgs struct {
		Phone string `json:"phone"`
	}
	pairingResult struct {
		Code string `json:"code"`
	}
)

var cmdPairingCode = defineCommand("auth.pairing_code", func(ctx context.Context, p Pairer, a pairingArgs) (pairingResult, error) {
	code, err := p.PairingCode(ctx, a.Phone)
	return pairingResult{Code: code}, err
})

// Controller is a session of a simulated network that takes test controls (the sandbox).
type Controller interface {
	Control(ctx context.Context, c Control) error
}

var cmdControl = defineCommand("session.control", func(ctx context.Context, c Controller, a Control) (none, error) {
	return none{}, c.Control(ctx, a)
})

// Handler is a session that runs commands of its provider's own: ops the runtime does not map to a method of the
// interfaces above (the sandbox's "sandbox.deliver", by which one sandbox session wakes another across processes).
// The runtime hands such a Command to Handle and returns its result from Sessions.Do.
type Handler interface {
	Handle(ctx context.Context, c Command) (json.RawMessage, error)
}

// Control is a test control of a simulated network.
type Control struct {
	Kind string // "scan", "inbound", "receipt", "disconnect", "logout", "fail_sends", "poll_vote", "restrict"
	// inbound: a message from From (an address) to this instance; receipt: a receipt of MessageID (a provider
	// message id) with Status; fail_sends: the next Count sends fail with Failure.
	From      string
	Text      string
	MessageID string
	Status    string
	Count     int
	Failure   *Failure
	// poll_vote: the instance votes Options on the poll MessageID (a provider message id) it received.
	Options []int
	// restrict: the network restricts the account for Duration, with Text as its reason.
	Duration time.Duration
	// call: From calls the instance, by video when Video.
	Video bool
}

// MessageType is the kind of a message's content.
type MessageType string

const (
	TypeText     MessageType = "text"
	TypeMedia    MessageType = "media"
	TypeLocation MessageType = "location"
	TypeContact  MessageType = "contact"
	TypeReaction MessageType = "reaction"
	TypeEdit     MessageType = "edit"
	TypeDelete   MessageType = "delete"
	TypeTemplate MessageType = "template"
	TypePoll     MessageType = "poll"
)

// Outbound is a message to send, in the network-neutral shape the API takes.
type Outbound struct {
	MessageID string // msg_…, stable across retries of the same message
	Chat      string // normalized address of a person or a group
	Type      MessageType
	Text      string
	Media     *Media
	Location  *Location
	Contact   *ContactCard
	// ReplyTo, Target (the message a reaction, edit or delete is about) are provider message ids.
	ReplyTo  string
	Target   string
	Emoji    string
	Template *Template
	Poll     *Poll
	// Resend is set on every attempt after the first: an earlier one may have reached the network (it ended without
	// an answer, or its process died). The queue does not keep how an attempt ended, so a retry after the network
	// refused with a wait is a Resend too.
	Resend bool
}

// MayRepeat reports whether sending m may leave the recipient with a second copy: it is a Resend of a message that
// adds to the chat (a reaction, an edit or a delete applied twice changes nothing more). A provider whose network
// cannot recognise a repeat returns it as Sent.PossibleRepeat.
func (m Outbound) MayRepeat() bool {
	switch m.Type {
	case TypeReaction, TypeEdit, TypeDelete:
		return false
	}
	return m.Resend
}

// Template is a template message to send: a pre-approved message of the account, named with its language, with the
// values of its placeholders (messages.template).
type Template struct {
	Name       string           `json:"name"`
	Language   string           `json:"language"`
	Parameters []string         `json:"parameters"`
	Components []map[string]any `json:"components,omitempty"` // the network's own components, passed through
}

// TemplateInfo is a template of the account as the network lists it.
type TemplateInfo struct {
	Name       string           `json:"name"`
	Language   string           `json:"language"`
	Status     string           `json:"status"`
	Category   string           `json:"category"`
	Components []map[string]any `json:"components"`
}

// Templater is a session that lists its account's message templates (messages.template).
type Templater interface {
	Templates(ctx context.Context) ([]TemplateInfo, error)
}

var cmdTemplates = defineCommand("templates.list", func(ctx context.Context, t Templater, _ none) ([]TemplateInfo, error) {
	return t.Templates(ctx)
})

// Windowed is a provider whose network takes free-form messages to a person only within a window after that
// person's last message (WhatsApp's 24-hour customer-service window); templates go out at any time. The service
// refuses a free-form send outside the window before it is queued (conversation_window_closed).
type Windowed interface {
	ConversationWindow() time.Duration
}

// Paced is a provider whose network punishes sending like a machine (WhatsApp restricts and bans new linked devices
// that send in bursts): its instances without pacing of their own take DefaultPacing instead of the server's
// default, even when the server's default is no pacing. An instance's own pacing still wins.
type Paced interface {
	DefaultPacing() Pacing
}

// Push is one HTTP request a network sent to an instance's hook URL (/hooks/channels/{instance_id}).
type Push struct {
	Method string
	Header map[string][]string
	Query  map[string][]string
	Body   []byte // the raw body, as signed
}

// PushAnswer is what the hook URL answers a verified push.
type PushAnswer struct {
	// Challenge, when set, is echoed as text/plain (a URL check); otherwise the answer is the count of Applied
	// messages, statuses and changes.
	Challenge string
	Applied   int
}

// ErrPushUnverified is the error of a push whose signature or secret does not verify: it is refused, and nothing
// of it is applied.
var ErrPushUnverified = errors.New("channels: the push does not verify with the instance's secret")

// PushReceiver is a provider whose network pushes updates over HTTP (Telegram's setWebhook, Meta's webhooks). Any
// process can take a push: it needs no live session, only the instance (config with secrets) and its sink. Receive
// verifies the push (returning an error wrapping ErrPushUnverified when it does not) and applies what it carries
// through sink before it returns, so the network is answered 200 only for what is durable.
type PushReceiver interface {
	Receive(ctx context.Context, inst Instance, sink Sink, p Push) (PushAnswer, error)
}

// Poll is a poll message's question and options (messages.poll); votes come back through Sink.PollVote.
type Poll struct {
	Question       string   `json:"question"`
	Options        []string `json:"options"`
	MultipleChoice bool     `json:"multiple_choice,omitempty"`
}

// PollVote is a vote on a poll the account sent: the voter's whole current choice (indexes into the poll's
// options; none when they took their vote back), replacing any earlier vote of theirs.
type PollVote struct {
	// Poll is the provider message id of the poll; PollID, on a network whose votes name the poll instead of its
	// message, the network's ID of the poll (Sent.PollID).
	Poll    string
	PollID  string
	Voter   Party
	Options []int
	// OptionHashes name the choice instead of Options on a network that names each option by the SHA-256 of its
	// text (WhatsApp); the service maps them onto the poll's options. Non-nil and empty: the vote was taken back.
	OptionHashes [][]byte
	At           time.Time
}

// IncomingCall is a call to the account.
type IncomingCall struct {
	ID           string // the network's
	From         Party
	Video, Group bool
	At           time.Time
}

// CallAnswer is what the instance does with an incoming call.
type CallAnswer struct {
	Reject bool
}

// Media is a message's attachment. Open reads its bytes (from the media store; providers that take a URL use URL).
type Media struct {
	Kind     string // image, video, audio, document, sticker
	MIMEType string
	Filename string
	Size     int64
	Caption  string
	URL      string
	Open     func(ctx context.Context) (io.ReadCloser, error) `json:"-"`
}

// Location is a point on the map.
type Location struct {
	Latitude, Longitude float64
	Name, Address       string
}

// ContactCard is a shared contact.
type ContactCard struct {
	Name   string
	Phones []string
}

// Sent is a network's acknowledgement of a sent message.
type Sent struct {
	ProviderID string
	At         time.Time
	// PossibleRepeat says the network may hold the message twice: the send was a Resend, and the network has no way
	// to recognise the repeat (no idempotency key). The message's sent step says so.
	PossibleRepeat bool
	// PollID is the network's own ID of a poll sent, where its votes name the poll by it (PollVote.PollID) rather
	// than by the message (Telegram).
	PollID string
}

// Failure is a network's refusal of a call, with a stable code the API shows (`recipient_not_on_network`,
// `rate_limited`, `media_rejected`, `not_connected`, `network_error`, …).
type Failure struct {
	Code      string
	Detail    string
	Retryable bool
	// RetryAfter is how long the network asked to wait (0: the runtime's backoff decides).
	RetryAfter time.Duration
}

func (f *Failure) Error() string { return fmt.Sprintf("%s: %s", f.Code, f.Detail) }

// Group is a group as the network reports it.
type Group struct {
	Address      string
	Subject      string
	Description  string
	Participants []Participant
	CreatedAt    time.Time
	// Rejected lists the participants CreateGroup could not add, each with its Failure (not on the network, blocked,
	// …); the group is created with the others.
	Rejected []ParticipantResult
	// Community marks a community (the parent of groups), which the API lists read-only; CommunityAddress is the
	// community a group belongs to, where the network has communities.
	Community        bool
	CommunityAddress string
	// Settings says who may send and who may edit the group's info; nil where the network did not say.
	Settings *GroupSettings
}

// Who may do something in a group (GroupSettings).
const (
	GroupAll    = "all"
	GroupAdmins = "admins"
)

// GroupSettings says who may send messages and who may edit a group's subject, description and picture: GroupAll
// or GroupAdmins ("" in a change: left as it is).
type GroupSettings struct {
	Send     string `json:"send,omitempty"`
	EditInfo string `json:"edit_info,omitempty"`
}

// AdminsOnly is the GroupSettings of a network's two flags: only admins send, only admins edit the group's info.
func AdminsOnly(send, editInfo bool) *GroupSettings {
	who := func(adminsOnly bool) string {
		if adminsOnly {
			return GroupAdmins
		}
		return GroupAll
	}
	return &GroupSettings{Send: who(send), EditInfo: who(editInfo)}
}

// The changes Sink.GroupChanged reports. An instance is told of changes made by others; the result of its own call
// (CreateGroup, UpdateGroup, ChangeParticipants, JoinGroup, LeaveGroup) is that call's return value.
const (
	GroupCreated             = "created"              // the group is new to the instance: it was made a participant
	GroupUpdated             = "updated"              // subject or description
	GroupParticipantsChanged = "participants_changed" // participants joined, left, were added, removed, promoted or demoted
	GroupLeft                = "left"                 // the instance is no longer a participant (removed by an admin)
	// GroupSynced is a group as the network lists it when the session connects: recorded, with an event only when
	// it is new to the instance (created) or differs from what the instance has (updated).
	GroupSynced = "synced"
)

// Participant is a member of a group.
type Participant struct {
	Address     string
	DisplayName string
	Role        string // member, admin, owner
}

// ParticipantResult is the outcome of a participant change for one participant.
type ParticipantResult struct {
	Address string
	OK      bool
	Failure *Failure
}

// LookupResult says whether an address is on the network.
type LookupResult struct {
	Address     string // as asked
	Normalized  string
	OnNetwork   bool
	DisplayName string
	// IDs are the other identifiers the network knows for the same account (a provider id, a username), so that one
	// person is one contact whatever address they write from.
	IDs []string
}

// Status is an instance's connection state.
type Status string

const (
	StatusCreated      Status = "created"
	StatusConnecting   Status = "connecting"
	StatusAwaitingAuth Status = "awaiting_auth"
	StatusConnected    Status = "connected"
	StatusReconnecting Status = "reconnecting"
	// StatusRestricted: the network limits the account for a time (a temporary ban); the runtime opens the session
	// again when the restriction ends (the instance's ReconnectNextAt).
	StatusRestricted   Status = "restricted"
	StatusDisconnected Status = "disconnected"
	StatusLoggedOut    Status = "logged_out"
	StatusFailed       Status = "failed"
)

// Restriction is what a session's Run returns when the network restricted the account for a time (a temporary
// ban): the runtime shows the instance restricted with Reason until Until, then opens the session again. A
// restriction with no known end is not one: the session reports failed with the reason instead.
type Restriction struct {
	Until  time.Time
	Reason string
}

func (r *Restriction) Error() string {
	return fmt.Sprintf("%s (restricted until %s)", r.Reason, r.Until.UTC().Format(time.RFC3339))
}

// Party is someone a message is from or to, as the network names them.
type Party struct {
	Address     string // normalized
	DisplayName string
	IDs         []string // other identifiers of the same account
	// Presence is a contact's availability where the network shares it (available, chat, away, xa, dnd,
	// unavailable); empty when it does not.
	Presence string
}

// Inbound is a message the network delivered to an instance.
type Inbound struct {
	ProviderID string
	Chat       string // the person or group the message belongs to
	From       Party
	At         time.Time
	Type       MessageType
	Text       string
	Media      *Media
	Location   *Location
	Contact    *ContactCard
	ReplyTo    string
	Target     string
	Emoji      string
	Poll       *Poll
	// FromMe marks a message the account sent from another device.
	FromMe bool
}

// The availabilities a Presence reports (a network's finer shades are mapped onto them: XMPP's xa is away, dnd
// busy).
const (
	PresenceAvailable   = "available"
	PresenceAway        = "away"
	PresenceBusy        = "busy"
	PresenceUnavailable = "unavailable"
)

// Presence is a contact's availability (State is one of the Presence* constants; LastSeen when the network tells)
// or a chat state they show the account (State is typing, recording or paused; Chat names the chat: the person, or
// the group they type in).
type Presence struct {
	From     Party
	Chat     string
	State    string
	LastSeen time.Time
}

// IsChatState reports whether the presence is a chat state rather than an availability.
func (p Presence) IsChatState() bool {
	switch p.State {
	case StateTyping, StateRecording, StatePaused:
		return true
	}
	return false
}

// Receipt is a network's report that a sent message was delivered or read, or that the network failed to deliver
// a message it took (status failed, with the Failure).
type Receipt struct {
	ProviderID string
	Status     string // delivered, read, failed
	At         time.Time
	Failure    *Failure
}

// Sink receives what a session reports. Every method returns once the change is durable; a session acknowledges
// upstream only after that, so a crash never loses what the network handed over.
type Sink interface {
	// State reports a state change with a reason a person can read ("qr expired", "stream error 401", …).
	State(ctx context.Context, s Status, reason string) error
	// QR shows a pairing code to scan, valid until expires.
	QR(ctx context.Context, code string, expires time.Time) error
	// Connected reports a paired, connected account and the credentials to keep for the next Open.
	Connected(ctx context.Context, account Party, credentials []byte) error
	Inbound(ctx context.Context, m Inbound) error
	Receipt(ctx context.Context, r Receipt) error
	GroupChanged(ctx context.Context, g Group, change string) error
	ContactChanged(ctx context.Context, p Party) error
	// Presence reports a contact's availability or a chat state they show the account (presence.receive).
	Presence(ctx context.Context, p Presence) error
	// PollVote reports a vote on a poll the account sent (messages.poll).
	PollVote(ctx context.Context, v PollVote) error
	// Call reports an incoming call (calls.receive) and answers whether the instance declines it (calls.reject):
	// the session then declines it on the network. Whatever the instance sends the caller afterwards is queued by
	// the service.
	Call(ctx context.Context, c IncomingCall) (CallAnswer, error)
	// ChatOrganized reports that the account archived, pinned or muted a chat on another device (its phone).
	ChatOrganized(ctx context.Context, chat string, o ChatOrganization) error
	// LabelChanged reports a label the account created, renamed, recolored or (Deleted) deleted on another device
	// (chats.labels), by the network's ID of it.
	LabelChanged(ctx context.Context, l NetworkLabel) error
	// ChatLabelled reports that the account put a label (by the network's ID) on a chat or took it off (on false)
	// on another device (chats.labels).
	ChatLabelled(ctx context.Context, chat, label string, on bool) error
}

// Report is one report of a batch (BatchSink.Record): an inbound message or a receipt, exactly one of them set.
type Report struct {
	Inbound *Inbound
	Receipt *Receipt
}

// BatchSink is a Sink that records a run of reports in one transaction: what a session that hands over many
// messages and receipts at once (a backlog after a reconnect, a network that delivers in pages) calls instead of
// one Inbound or Receipt each, which cost a transaction each. The Service's sinks implement it; a session type
// asserts it and falls back to the single calls when the sink does not.
type BatchSink interface {
	Sink
	// Record records reports in order, as Inbound and Receipt would one by one, and returns how many it recorded:
	// all of them, or those before the first that failed with that one's error. The recorded ones are durable
	// when it returns.
	Record(ctx context.Context, reports []Report) (int, error)
}

// RecordEach records reports through sink: in one Record when it is a BatchSink, else one Inbound or Receipt
// each, stopping at the first that fails. It returns how many were recorded.
func RecordEach(ctx context.Context, sink Sink, reports []Report) (int, error) {
	if b, ok := sink.(BatchSink); ok {
		return b.Record(ctx, reports)
	}
	for i, r := range reports {
		var err error
		if r.Inbound != nil {
			err = sink.Inbound(ctx, *r.Inbound)
		} else if r.Receipt != nil {
			err = sink.Receipt(ctx, *r.Receipt)
		}
		if err != nil {
			return i, err
		}
	}
	return len(reports), nil
}

// Command is a call to an instance's live session, carried to the process that holds it. Op names a session method
// ("groups.create", "contacts.lookup", "chats.mark_read", "auth.pairing_code", "sandbox.control", …); Args and the
// result are JSON so that a command can cross processes.
type Command struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// ErrNotConnected is the error of a command to an instance that has no live session.
var ErrNotConnected = errors.New("channels: instance not connected")

// Sessions is the runtime that holds sessions: each instance's session lives in exactly one process (a lease in
// the database), and Do runs a command on it wherever it is.
type Sessions interface {
	// Start asks for the instance to be connected (now, by whichever process takes its lease); Stop disconnects it
	// keeping credentials; both return at once.
	Start(ctx context.Context, instanceID string) error
	Stop(ctx context.Context, instanceID string) error
	// Do runs c on the instance's session and returns its JSON result; an instance without a live session answers
	// an error wrapping ErrNotConnected.
	Do(ctx context.Context, instanceID string, c Command) (json.RawMessage, error)
}
