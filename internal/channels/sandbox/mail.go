package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// envelope is one piece of mail the network holds for an account: a message, a receipt of a message the account
// sent, a change of a group it is (or was) in, or a change or presence of an account it knows. Exactly one of its fields is
// set.
type envelope struct {
	Message *mailMessage `json:"message,omitempty"`
	Receipt *mailReceipt `json:"receipt,omitempty"`
	Group   *mailGroup   `json:"group,omitempty"`
	// Contact is an account the recipient knows that changed its display name.
	Contact *channels.Party `json:"contact,omitempty"`
	// Presence is an availability or a chat state of an account the recipient knows.
	Presence *mailPresence `json:"presence,omitempty"`
	// Vote is a vote on a poll the recipient sent (or, in a group, saw).
	Vote *mailVote `json:"vote,omitempty"`
}

type mailMessage struct {
	ID       string                `json:"id"`
	Chat     string                `json:"chat"` // as the recipient sees it: the sender's number or the group
	From     string                `json:"from"`
	FromName string                `json:"from_name,omitempty"`
	At       time.Time             `json:"at"`
	Type     channels.MessageType  `json:"type"`
	Text     string                `json:"text,omitempty"`
	Media    *mailMedia            `json:"media,omitempty"`
	Location *channels.Location    `json:"location,omitempty"`
	Contact  *channels.ContactCard `json:"contact,omitempty"`
	ReplyTo  string                `json:"reply_to,omitempty"`
	Target   string                `json:"target,omitempty"`
	Emoji    string                `json:"emoji,omitempty"`
	Poll     *channels.Poll        `json:"poll,omitempty"`
	// Schedule is the sender's receipt schedule; nil for a message no instance sent (a test control's, the echo's
	// answer): nobody to tell.
	Schedule *schedule `json:"schedule,omitempty"`
}

// mailMedia carries an attachment's bytes with the mail, so that the recipient's instance can read them in any
// process, however long after it was sent.
type mailMedia struct {
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type,omitempty"`
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size"`
	Caption  string `json:"caption,omitempty"`
	URL      string `json:"url,omitempty"`
	Data     []byte `json:"data,omitempty"`
}

type mailReceipt struct {
	ID     string    `json:"id"`
	Status string    `json:"status"` // delivered, read
	At     time.Time `json:"at"`
}

type mailGroup struct {
	Group  channels.Group `json:"group"`
	Change string         `json:"change"`
}

// letter addresses an envelope to a number, due at a time.
type letter struct {
	to       string
	instance string // the instance that holds the number, to wake ("" for none)
	due      time.Time
	env      envelope
}

// newID returns a time-sortable id (the order mail is taken in, the order of messages in a chat).
func newID() string { return ulid.Make().String() }

// mail turns letters into the store's rows, ids in the order given.
func mail(letters []letter) ([]store.SandboxMail, error) {
	rows := make([]store.SandboxMail, 0, len(letters))
	for _, l := range letters {
		b, err := json.Marshal(l.env)
		if err != nil {
			return nil, err
		}
		rows = append(rows, store.SandboxMail{ID: newID(), Number: l.to, DueAt: l.due, Envelope: string(b)})
	}
	return rows, nil
}

// inbound is what the recipient's sink is told of a message.
func (m *mailMessage) inbound() channels.Inbound {
	in := channels.Inbound{
		ProviderID: m.ID, Chat: m.Chat, From: channels.Party{Address: m.From, DisplayName: m.FromName}, At: m.At,
		Type: m.Type, Text: m.Text, Location: m.Location, Contact: m.Contact, ReplyTo: m.ReplyTo, Target: m.Target,
		Emoji: m.Emoji, Poll: m.Poll,
	}
	if md := m.Media; md != nil {
		in.Media = &channels.Media{Kind: md.Kind, MIMEType: md.MIMEType, Filename: md.Filename, Size: md.Size,
			Caption: md.Caption, URL: md.URL}
		if md.Data != nil {
			data := md.Data
			in.Media.Open = func(context.Context) (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(data)), nil
			}
		}
	}
	return in
}
