//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	waCommon "go.mau.fi/whatsmeow/proto/waCommon"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/channels"
)

// MaxMedia is the largest attachment sent: WhatsApp's limit for documents (media of other kinds are smaller on
// the phone's side, which refuses them).
const MaxMedia = 100 << 20

// messageID is the WhatsApp message ID of an outbound message: derived from its ID in the API, so that every
// attempt of one message carries the same ID (as WhatsApp Web's own IDs: "3EB0" and 18 hex digits).
func messageID(id string) types.MessageID {
	sum := sha256.Sum256([]byte(id))
	return "3EB0" + strings.ToUpper(hex.EncodeToString(sum[:9]))
}

// jidOf is the JID of a normalized address.
func jidOf(address string) (types.JID, error) {
	if strings.HasPrefix(address, "+") {
		return types.NewJID(address[1:], types.DefaultUserServer), nil
	}
	j, err := types.ParseJID(address)
	if err != nil || (j.Server != types.GroupServer && j.Server != types.HiddenUserServer) {
		return types.EmptyJID, &channels.Failure{Code: "invalid_address", Detail: fmt.Sprintf("%q is not a WhatsApp address", address)}
	}
	return j, nil
}

// Send sends one message. Every attempt of a message carries the same WhatsApp message ID; whether the
// recipient's devices drop a second copy by it is WhatsApp's to decide, so a resend says it may repeat.
func (s *session) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	c, to, err := s.target(m.Chat)
	if err != nil {
		return channels.Sent{}, err
	}
	msg, err := s.content(ctx, c, to, m)
	if err != nil {
		return channels.Sent{}, err
	}
	id := messageID(m.MessageID)
	resp, err := c.SendMessage(ctx, to, msg, id)
	if err != nil {
		return channels.Sent{}, failureOf(err)
	}
	own, _, _ := c.Own()
	s.p.keys.put(s.inst.ID+"/"+id, sender{chat: to, from: own.ToNonAD(), fromMe: true})
	at := resp.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return channels.Sent{ProviderID: id, At: at, PossibleRepeat: m.MayRepeat()}, nil
}

func invalid(detail string) error { return &channels.Failure{Code: "invalid_message", Detail: detail} }

// content is the WhatsApp message of m.
func (s *session) content(ctx context.Context, c Client, to types.JID, m channels.Outbound) (*waE2E.Message, error) {
	reply := s.replyContext(to, m.ReplyTo)
	switch m.Type {
	case channels.TypeText:
		if m.Text == "" {
			return nil, invalid("a text message needs text")
		}
		if reply == nil {
			return &waE2E.Message{Conversation: proto.String(m.Text)}, nil
		}
		return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String(m.Text), ContextInfo: reply}}, nil
	case channels.TypeMedia:
		return s.mediaMessage(ctx, c, m.Media, reply)
	case channels.TypeLocation:
		if m.Location == nil {
			return nil, invalid("a location message needs a location")
		}
		l := m.Location
		return &waE2E.Message{LocationMessage: &waE2E.LocationMessage{DegreesLatitude: proto.Float64(l.Latitude),
			DegreesLongitude: proto.Float64(l.Longitude), Name: nonEmpty(l.Name), Address: nonEmpty(l.Address),
			ContextInfo: reply}}, nil
	case channels.TypeContact:
		if m.Contact == nil || m.Contact.Name == "" {
			return nil, invalid("a contact message needs a contact with a name")
		}
		return &waE2E.Message{ContactMessage: &waE2E.ContactMessage{DisplayName: proto.String(m.Contact.Name),
			Vcard: proto.String(vcard(m.Contact)), ContextInfo: reply}}, nil
	case channels.TypeReaction:
		if m.Target == "" {
			return nil, invalid("a reaction needs the message it reacts to")
		}
		return &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Key: s.key(to, m.Target),
			Text: proto.String(m.Emoji), SenderTimestampMS: proto.Int64(time.Now().UnixMilli())}}, nil
	case channels.TypeEdit:
		if m.Target == "" || m.Text == "" {
			return nil, invalid("an edit needs the message it edits and its new text")
		}
		return &waE2E.Message{EditedMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{
			ProtocolMessage: &waE2E.ProtocolMessage{Key: &waCommon.MessageKey{FromMe: proto.Bool(true),
				ID: proto.String(m.Target), RemoteJID: proto.String(to.String())},
				Type:          waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(),
				EditedMessage: &waE2E.Message{Conversation: proto.String(m.Text)},
				TimestampMS:   proto.Int64(time.Now().UnixMilli())}}}}, nil
	case channels.TypePoll:
		if m.Poll == nil || len(m.Poll.Options) < 2 {
			return nil, invalid("a poll needs a question and at least two options")
		}
		// WhatsApp's count of options a voter may pick: 1 for a single choice, 0 for any number.
		selectable := 1
		if m.Poll.MultipleChoice {
			selectable = 0
		}
		msg := c.BuildPollCreation(m.Poll.Question, m.Poll.Options, selectable)
		if reply != nil {
			msg.GetPollCreationMessage().ContextInfo = reply
		}
		return msg, nil
	case channels.TypeDelete:
		if m.Target == "" {
			return nil, invalid("a delete needs the message it deletes")
		}
		return &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(),
			Key: s.key(to, m.Target)}}, nil
	}
	return nil, &channels.Failure{Code: "capability_not_supported",
		Detail: "WhatsApp Web cannot send " + string(m.Type) + " messages"}
}

// key is the key of a message of the chat: whose it is comes from the messages this process saw; one it did not
// see is taken for the other party's in a chat with a person, and cannot be named in a group.
func (s *session) key(chat types.JID, id string) *waCommon.MessageKey {
	k := &waCommon.MessageKey{RemoteJID: proto.String(chat.String()), ID: proto.String(id), FromMe: proto.Bool(false)}
	if seen, ok := s.p.keys.get(s.inst.ID + "/" + id); ok {
		k.FromMe = proto.Bool(seen.fromMe)
		if chat.Server == types.GroupServer && !seen.fromMe {
			k.Participant = proto.String(seen.from.ToNonAD().String())
		}
	}
	return k
}

// replyContext quotes the message replied to.
func (s *session) replyContext(chat types.JID, replyTo string) *waE2E.ContextInfo {
	if replyTo == "" {
		return nil
	}
	ci := &waE2E.ContextInfo{StanzaID: proto.String(replyTo), QuotedMessage: &waE2E.Message{Conversation: proto.String("")}}
	if seen, ok := s.p.keys.get(s.inst.ID + "/" + replyTo); ok {
		ci.Participant = proto.String(seen.from.ToNonAD().String())
	} else if chat.Server != types.GroupServer {
		ci.Participant = proto.String(chat.ToNonAD().String())
	}
	return ci
}

// mediaMessage uploads an attachment (encrypted by whatsmeow) and returns the message that carries it.
func (s *session) mediaMessage(ctx context.Context, c Client, md *channels.Media, reply *waE2E.ContextInfo) (*waE2E.Message, error) {
	if md == nil || md.Open == nil {
		return nil, invalid("a media message needs an attachment")
	}
	r, err := md.Open(ctx)
	if err != nil {
		return nil, &channels.Failure{Code: "network_error", Detail: "reading the attachment: " + err.Error(), Retryable: true}
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxMedia+1))
	_ = r.Close()
	if err != nil {
		return nil, &channels.Failure{Code: "network_error", Detail: "reading the attachment: " + err.Error(), Retryable: true}
	}
	if len(data) > MaxMedia {
		return nil, &channels.Failure{Code: "media_rejected", Detail: "WhatsApp takes attachments up to 100 MB"}
	}
	kind := whatsmeow.MediaDocument
	switch md.Kind {
	case "image", "sticker":
		kind = whatsmeow.MediaImage
	case "video":
		kind = whatsmeow.MediaVideo
	case "audio":
		kind = whatsmeow.MediaAudio
	}
	up, err := c.Upload(ctx, data, kind)
	if err != nil {
		return nil, &channels.Failure{Code: "media_rejected", Detail: "uploading the attachment: " + err.Error()}
	}
	mime, caption := md.MIMEType, nonEmpty(md.Caption)
	size := proto.Uint64(uint64(len(data)))
	switch md.Kind {
	case "image":
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{URL: &up.URL, DirectPath: &up.DirectPath,
			MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: size,
			Mimetype: proto.String(mime), Caption: caption, ContextInfo: reply}}, nil
	case "sticker":
		return &waE2E.Message{StickerMessage: &waE2E.StickerMessage{URL: &up.URL, DirectPath: &up.DirectPath,
			MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: size,
			Mimetype: proto.String(mime), ContextInfo: reply}}, nil
	case "video":
		return &waE2E.Message{VideoMessage: &waE2E.VideoMessage{URL: &up.URL, DirectPath: &up.DirectPath,
			MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: size,
			Mimetype: proto.String(mime), Caption: caption, ContextInfo: reply}}, nil
	case "audio":
		// An Opus file in Ogg is what the phone records: it is sent as a voice note (PTT).
		voice := strings.HasPrefix(mime, "audio/ogg")
		return &waE2E.Message{AudioMessage: &waE2E.AudioMessage{URL: &up.URL, DirectPath: &up.DirectPath,
			MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: size,
			Mimetype: proto.String(mime), PTT: proto.Bool(voice), ContextInfo: reply}}, nil
	}
	name := md.Filename
	if name == "" {
		name = "document"
	}
	return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{URL: &up.URL, DirectPath: &up.DirectPath,
		MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: size,
		Mimetype: proto.String(mime), FileName: proto.String(name), Title: proto.String(name), Caption: caption,
		ContextInfo: reply}}, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return proto.String(s)
}

// vcard is a vCard 3.0 of a shared contact; each phone carries its WhatsApp ID, so the recipient's app offers to
// message it.
func vcard(c *channels.ContactCard) string {
	var b strings.Builder
	esc := strings.NewReplacer("\\", "\\\\", ",", "\\,", ";", "\\;", "\n", "\\n", "\r", "")
	b.WriteString("BEGIN:VCARD\nVERSION:3.0\nFN:" + esc.Replace(c.Name) + "\n")
	for _, ph := range c.Phones {
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, ph)
		b.WriteString("TEL;type=CELL;waid=" + digits + ":+" + digits + "\n")
	}
	b.WriteString("END:VCARD")
	return b.String()
}

// MarkRead marks the chat's messages up to upTo read (blue ticks for the sender).
func (s *session) MarkRead(ctx context.Context, chat, upTo string) error {
	c, to, err := s.target(chat)
	if err != nil {
		return err
	}
	if upTo == "" {
		return nil
	}
	var from types.JID
	if seen, ok := s.p.keys.get(s.inst.ID + "/" + upTo); ok && to.Server == types.GroupServer {
		from = seen.from
	}
	if err := c.MarkRead(ctx, []types.MessageID{upTo}, time.Now(), to, from); err != nil {
		return failureOf(err)
	}
	return nil
}

// failureOf maps whatsmeow's errors to the API's failure codes.
func failureOf(err error) error {
	var f *channels.Failure
	var iq *whatsmeow.IQError
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, whatsmeow.ErrIQTimedOut), errors.Is(err, whatsmeow.ErrMessageTimedOut):
		return &channels.Failure{Code: "network_error", Detail: "WhatsApp did not answer in time", Retryable: true}
	case errors.Is(err, whatsmeow.ErrNotConnected), errors.Is(err, whatsmeow.ErrNotLoggedIn),
		errors.Is(err, whatsmeow.ErrIQDisconnected):
		return &channels.Failure{Code: "not_connected", Detail: "the linked device is not connected", Retryable: true}
	case errors.Is(err, whatsmeow.ErrGroupNotFound):
		return &channels.Failure{Code: "group_not_found", Detail: "WhatsApp has no such group"}
	case errors.Is(err, whatsmeow.ErrNotInGroup):
		return &channels.Failure{Code: "not_a_participant", Detail: "the account is not a participant of the group"}
	case errors.Is(err, whatsmeow.ErrGroupInviteLinkUnauthorized):
		return &channels.Failure{Code: "not_group_admin", Detail: "only the group's admins may see its invite link"}
	case errors.Is(err, whatsmeow.ErrInviteLinkInvalid), errors.Is(err, whatsmeow.ErrInviteLinkRevoked):
		return &channels.Failure{Code: "invalid_invite", Detail: err.Error()}
	case errors.Is(err, whatsmeow.ErrPhoneNumberTooShort), errors.Is(err, whatsmeow.ErrPhoneNumberIsNotInternational),
		errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrRecipientADJID):
		return &channels.Failure{Code: "invalid_address", Detail: err.Error()}
	case errors.As(err, &iq):
		switch iq.Code {
		case 401, 403:
			return &channels.Failure{Code: "not_permitted", Detail: "WhatsApp refused: " + iq.Error()}
		case 404:
			return &channels.Failure{Code: "not_found", Detail: "WhatsApp has no such object: " + iq.Error()}
		case 429:
			return &channels.Failure{Code: "rate_limited", Detail: "WhatsApp asks to slow down: " + iq.Error(), Retryable: true}
		}
		if iq.Code >= 500 {
			return &channels.Failure{Code: "network_error", Detail: "WhatsApp failed: " + iq.Error(), Retryable: true}
		}
		return &channels.Failure{Code: "rejected", Detail: "WhatsApp refused: " + iq.Error()}
	}
	return &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
}

// Picture is a person's or group's profile picture as WhatsApp shows it to the account (none when hidden).
func (s *session) Picture(ctx context.Context, address string) (channels.Picture, error) {
	c, who, err := s.target(address)
	if err != nil {
		return channels.Picture{}, err
	}
	id, data, err := c.ProfilePicture(ctx, who)
	if err != nil || len(data) == 0 {
		return channels.Picture{}, err
	}
	return channels.Picture{ID: id, MIMEType: "image/jpeg", Data: data}, nil
}
