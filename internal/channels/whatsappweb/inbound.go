//go:build whatsapp_web

package whatsappweb

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"

	"go.mau.fi/whatsmeow"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
)

// message reports a message of a chat or group, the account's own from its other devices included.
func (s *session) message(e *events.Message) {
	ctx := s.live()
	if ctx == nil || e.Message == nil {
		return
	}
	if notif := e.Message.GetProtocolMessage().GetHistorySyncNotification(); notif != nil {
		if s.history {
			s.historySync(ctx, notif)
		}
		return
	}
	if e.Message.GetPollUpdateMessage() != nil {
		s.pollVote(ctx, e)
		return
	}
	in, ok := s.inboundOf(ctx, e)
	if !ok {
		return
	}
	if !e.Info.IsFromMe && !e.Info.IsGroup {
		s.watch(ctx, e.Info.Sender)
	}
	s.report(func(ctx context.Context) error { return s.sink.Inbound(ctx, in) })
}

// inboundOf is a message event as the API's message, remembered for later reactions and replies; ok is false for
// what is not reported.
func (s *session) inboundOf(ctx context.Context, e *events.Message) (channels.Inbound, bool) {
	info := e.Info
	if info.Chat.Server == types.BroadcastServer || info.Chat.Server == types.NewsletterServer {
		return channels.Inbound{}, false // status updates and channels are not chats of the instance
	}
	in, ok := s.inbound(ctx, e)
	if ok {
		s.p.keys.put(s.inst.ID+"/"+info.ID, sender{chat: info.Chat, from: info.Sender, fromMe: info.IsFromMe})
	}
	return in, ok
}

// historySync reports the messages of the history the phone sent, in one run: the service records each message
// once however often the phone offers it.
func (s *session) historySync(ctx context.Context, notif *waE2E.HistorySyncNotification) {
	h, err := s.c.DownloadHistorySync(ctx, notif)
	if err != nil {
		// The phone offers the history again on a later connection; the session goes on without it.
		return
	}
	var reports []channels.Report
	for _, conv := range h.GetConversations() {
		chat, err := types.ParseJID(conv.GetID())
		if err != nil {
			continue
		}
		for _, hm := range conv.GetMessages() {
			evt, err := s.c.ParseWebMessage(chat, hm.GetMessage())
			if err != nil || evt.Message == nil {
				continue
			}
			if in, ok := s.inboundOf(ctx, evt); ok {
				reports = append(reports, channels.Report{Inbound: &in})
			}
		}
	}
	if len(reports) == 0 {
		return
	}
	s.report(func(ctx context.Context) error {
		_, err := channels.RecordEach(ctx, s.sink, reports)
		return err
	})
}

// chat is the address of the chat a message belongs to: the group, or the person (by number when known).
func (s *session) chat(ctx context.Context, info types.MessageInfo) string {
	if info.IsGroup || info.Chat.Server == types.GroupServer {
		return info.Chat.ToNonAD().String()
	}
	alt := info.SenderAlt
	if info.IsFromMe {
		alt = info.RecipientAlt
	}
	return s.party(ctx, info.Chat, alt, "").Address
}

// inbound maps a message's content; ok is false for content the API has no type for (calls, protocol messages
// other than edits and revokes), which is not reported.
func (s *session) inbound(ctx context.Context, e *events.Message) (channels.Inbound, bool) {
	info, m := e.Info, e.Message
	in := channels.Inbound{ProviderID: info.ID, Chat: s.chat(ctx, info), At: info.Timestamp, FromMe: info.IsFromMe,
		From: s.party(ctx, info.Sender, info.SenderAlt, info.PushName)}
	if info.IsFromMe {
		pn, lid, name := s.c.Own()
		in.From = s.party(ctx, pn, lid, name)
	}
	var ctxInfo *waE2E.ContextInfo
	switch {
	case m.GetConversation() != "":
		in.Type, in.Text = channels.TypeText, m.GetConversation()
	case m.GetExtendedTextMessage() != nil:
		x := m.GetExtendedTextMessage()
		in.Type, in.Text, ctxInfo = channels.TypeText, x.GetText(), x.GetContextInfo()
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		in.Media, ctxInfo = s.media("image", x, x.GetMimetype(), "", x.GetFileLength(), x.GetCaption()), x.GetContextInfo()
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		in.Media, ctxInfo = s.media("video", x, x.GetMimetype(), "", x.GetFileLength(), x.GetCaption()), x.GetContextInfo()
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		in.Media, ctxInfo = s.media("audio", x, x.GetMimetype(), "", x.GetFileLength(), ""), x.GetContextInfo()
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		in.Media, ctxInfo = s.media("document", x, x.GetMimetype(), x.GetFileName(), x.GetFileLength(), x.GetCaption()), x.GetContextInfo()
	case m.GetStickerMessage() != nil:
		x := m.GetStickerMessage()
		in.Media, ctxInfo = s.media("sticker", x, x.GetMimetype(), "", x.GetFileLength(), ""), x.GetContextInfo()
	case m.GetLocationMessage() != nil:
		x := m.GetLocationMessage()
		in.Type, ctxInfo = channels.TypeLocation, x.GetContextInfo()
		in.Location = &channels.Location{Latitude: x.GetDegreesLatitude(), Longitude: x.GetDegreesLongitude(),
			Name: x.GetName(), Address: x.GetAddress()}
	case m.GetContactMessage() != nil:
		x := m.GetContactMessage()
		in.Type, ctxInfo = channels.TypeContact, x.GetContextInfo()
		in.Contact = &channels.ContactCard{Name: x.GetDisplayName(), Phones: vcardPhones(x.GetVcard())}
	case pollOf(m) != nil:
		x := pollOf(m)
		if n := len(x.GetOptions()); n < 2 || n > maxPollOptions {
			return in, false
		}
		in.Type, ctxInfo = channels.TypePoll, x.GetContextInfo()
		in.Poll = &channels.Poll{Question: x.GetName(), MultipleChoice: x.GetSelectableOptionsCount() != 1}
		for _, o := range x.GetOptions() {
			in.Poll.Options = append(in.Poll.Options, o.GetOptionName())
		}
	case m.GetReactionMessage() != nil:
		x := m.GetReactionMessage()
		in.Type, in.Target, in.Emoji = channels.TypeReaction, x.GetKey().GetID(), x.GetText()
	case m.GetProtocolMessage() != nil:
		x := m.GetProtocolMessage()
		switch x.GetType() {
		case waE2E.ProtocolMessage_REVOKE:
			in.Type, in.Target = channels.TypeDelete, x.GetKey().GetID()
		case waE2E.ProtocolMessage_MESSAGE_EDIT:
			edited := x.GetEditedMessage()
			text := edited.GetConversation()
			if text == "" {
				text = edited.GetExtendedTextMessage().GetText()
			}
			in.Type, in.Target, in.Text = channels.TypeEdit, x.GetKey().GetID(), text
		default:
			return in, false
		}
	default:
		return in, false
	}
	if in.Media != nil {
		in.Type = channels.TypeMedia
	}
	in.ReplyTo = ctxInfo.GetStanzaID()
	return in, true
}

// media is an attachment whose bytes are downloaded (and decrypted) from WhatsApp's media servers when the
// service stores them.
func (s *session) media(kind string, msg whatsmeow.DownloadableMessage, mime, filename string, size uint64, caption string) *channels.Media {
	c := s.c
	return &channels.Media{Kind: kind, MIMEType: mime, Filename: filename, Size: int64(size), Caption: caption,
		Open: func(ctx context.Context) (io.ReadCloser, error) {
			b, err := c.Download(ctx, msg)
			if err != nil {
				return nil, &channels.Failure{Code: "network_error", Detail: "downloading the attachment: " + err.Error(),
					Retryable: true}
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		}}
}

// vcardPhones are the TEL lines of a vCard: the value after the last colon of each (waid parameters dropped).
func vcardPhones(card string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(card))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(strings.ToUpper(line), "TEL") {
			continue
		}
		if i := strings.LastIndex(line, ":"); i >= 0 && i < len(line)-1 {
			out = append(out, strings.TrimSpace(line[i+1:]))
		}
	}
	return out
}

// receipt reports the delivered and read receipts of the account's messages. Receipts of the account reading on
// its other devices, retries and server errors of the protocol are not statuses of a message.
func (s *session) receipt(e *events.Receipt) {
	if e.IsFromMe {
		return
	}
	var status string
	switch e.Type {
	case types.ReceiptTypeDelivered:
		status = "delivered"
	case types.ReceiptTypeRead, types.ReceiptTypePlayed:
		status = "read"
	default:
		return
	}
	reports := make([]channels.Report, len(e.MessageIDs))
	for i, id := range e.MessageIDs {
		reports[i].Receipt = &channels.Receipt{ProviderID: id, Status: status, At: e.Timestamp}
	}
	s.report(func(ctx context.Context) error {
		_, err := channels.RecordEach(ctx, s.sink, reports)
		return err
	})
}

// groupInfo reports a change of a group: the group as WhatsApp has it now, and what changed.
func (s *session) groupInfo(e *events.GroupInfo) {
	ctx := s.live()
	if ctx == nil {
		return
	}
	change := channels.GroupUpdated
	if len(e.Join)+len(e.Leave)+len(e.Promote)+len(e.Demote) > 0 {
		change = channels.GroupParticipantsChanged
	}
	pn, lid, _ := s.c.Own()
	for _, j := range e.Leave {
		if j.ToNonAD() == pn.ToNonAD() || (!lid.IsEmpty() && j.ToNonAD() == lid.ToNonAD()) {
			s.report(func(ctx context.Context) error {
				return s.sink.GroupChanged(ctx, channels.Group{Address: e.JID.ToNonAD().String()}, channels.GroupLeft)
			})
			return
		}
	}
	info, err := s.c.GroupInfo(ctx, e.JID)
	if err != nil {
		// The change is reported with what the event carries when WhatsApp cannot be asked for the whole group.
		g := channels.Group{Address: e.JID.ToNonAD().String()}
		if e.Name != nil {
			g.Subject = e.Name.Name
		}
		if e.Topic != nil {
			g.Description = e.Topic.Topic
		}
		s.report(func(ctx context.Context) error { return s.sink.GroupChanged(ctx, g, change) })
		return
	}
	s.report(func(ctx context.Context) error { return s.sink.GroupChanged(ctx, s.group(ctx, info), change) })
}

// syncGroups records the groups and communities the account is in as WhatsApp lists them at connect: those joined
// or changed while no session ran, and the communities, which no other event names. Only what is new or changed
// becomes an event (GroupSynced).
func (s *session) syncGroups(ctx context.Context, c Client) {
	infos, err := c.GetJoinedGroups(ctx)
	if err != nil {
		return // the next connection lists them again
	}
	reports := make([]channels.Group, 0, len(infos))
	for _, info := range infos {
		reports = append(reports, s.group(ctx, info))
	}
	s.report(func(ctx context.Context) error {
		for _, g := range reports {
			if err := s.sink.GroupChanged(ctx, g, channels.GroupSynced); err != nil {
				return err
			}
		}
		return nil
	})
}

// joinedGroup reports a group the account was added to, created, or joined by invite.
func (s *session) joinedGroup(e *events.JoinedGroup) {
	info := e.GroupInfo
	s.report(func(ctx context.Context) error {
		return s.sink.GroupChanged(ctx, s.group(ctx, &info), channels.GroupCreated)
	})
}

// group is a group as the API shows it, each participant by phone number when WhatsApp shares it.
func (s *session) group(ctx context.Context, info *types.GroupInfo) channels.Group {
	g := channels.Group{Address: info.JID.ToNonAD().String(), Subject: info.Name, Description: info.Topic,
		CreatedAt: info.GroupCreated, Community: info.IsParent, Settings: settingsOf(info)}
	if !info.LinkedParentJID.IsEmpty() {
		g.CommunityAddress = info.LinkedParentJID.ToNonAD().String()
	}
	for _, p := range info.Participants {
		role := "member"
		switch {
		case p.IsSuperAdmin:
			role = "owner"
		case p.IsAdmin:
			role = "admin"
		}
		alt := p.PhoneNumber
		if alt.IsEmpty() {
			alt = p.LID
		}
		party := s.party(ctx, p.JID, alt, p.DisplayName)
		g.Participants = append(g.Participants, channels.Participant{Address: party.Address,
			DisplayName: party.DisplayName, Role: role})
	}
	return g
}
