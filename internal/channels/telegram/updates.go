package telegram

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/internal/channels"
)

// apply hands one update to the sink and returns how many messages and changes it carried. An update of a kind
// Switchboard does not carry counts 0 and is acknowledged.
func apply(ctx context.Context, ba botAPI, sink channels.Sink, u models.Update) (int, error) {
	switch {
	case u.Message != nil:
		return 1, sink.Inbound(ctx, inbound(ba, u.Message))
	case u.ChannelPost != nil:
		return 1, sink.Inbound(ctx, inbound(ba, u.ChannelPost))
	case u.EditedMessage != nil:
		m := u.EditedMessage
		in := inbound(ba, m)
		in.Target, in.Type = in.ProviderID, channels.TypeEdit
		in.ProviderID = fmt.Sprintf("%s:e%d", in.ProviderID, m.EditDate)
		in.Media, in.Location, in.Contact = nil, nil, nil
		if in.Text == "" {
			in.Text = m.Caption
		}
		return 1, sink.Inbound(ctx, in)
	case u.CallbackQuery != nil:
		return 1, sink.Inbound(ctx, callback(u.CallbackQuery))
	case u.MyChatMember != nil:
		return 1, memberChange(ctx, sink, u.MyChatMember)
	case u.PollAnswer != nil && u.PollAnswer.User != nil:
		// An answer on behalf of a chat (an anonymous group admin) names no person to count: left out.
		a := u.PollAnswer
		options := a.OptionIDs
		if options == nil {
			options = []int{} // retracted
		}
		return 1, sink.PollVote(ctx, channels.PollVote{PollID: a.PollID, Voter: userParty(*a.User), Options: options,
			At: time.Now()})
	}
	return 0, nil
}

// userParty is a Telegram user as a party: the numeric ID is the address (what sends need), the @username another
// ID of the same person.
func userParty(u models.User) channels.Party {
	p := channels.Party{Address: strconv.FormatInt(u.ID, 10), DisplayName: strings.TrimSpace(u.FirstName + " " + u.LastName)}
	if u.Username != "" {
		p.IDs = []string{"@" + strings.ToLower(u.Username)}
	}
	return p
}

// chatParty is the sender of a message: its user, or the chat itself for channel posts.
func chatParty(m *models.Message) channels.Party {
	if m.From != nil {
		return userParty(*m.From)
	}
	p := channels.Party{Address: strconv.FormatInt(m.Chat.ID, 10), DisplayName: m.Chat.Title}
	if m.Chat.Username != "" {
		p.IDs = []string{"@" + strings.ToLower(m.Chat.Username)}
	}
	return p
}

// providerID is a message's ID on the network: Telegram numbers messages per chat.
func providerID(chat int64, id int) string { return fmt.Sprintf("%d:%d", chat, id) }

// parseProviderID splits a provider ID into its chat and message ID.
func parseProviderID(s string) (int64, int, bool) {
	chat, id, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false
	}
	c, err1 := strconv.ParseInt(chat, 10, 64)
	n, err2 := strconv.Atoi(id)
	return c, n, err1 == nil && err2 == nil
}

// inbound is a Telegram message in the network-neutral shape.
func inbound(ba botAPI, m *models.Message) channels.Inbound {
	in := channels.Inbound{ProviderID: providerID(m.Chat.ID, m.ID), Chat: strconv.FormatInt(m.Chat.ID, 10),
		From: chatParty(m), At: time.Unix(int64(m.Date), 0), Type: channels.TypeText, Text: m.Text}
	if m.ReplyToMessage != nil {
		in.ReplyTo = providerID(m.ReplyToMessage.Chat.ID, m.ReplyToMessage.ID)
	}
	file := func(kind, id, mime, name string, size int64) {
		in.Type = channels.TypeMedia
		in.Media = &channels.Media{Kind: kind, MIMEType: mime, Filename: name, Size: size, Caption: m.Caption,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return ba.download(ctx, id) }}
	}
	switch {
	case len(m.Photo) > 0:
		big := m.Photo[len(m.Photo)-1] // Telegram lists the sizes smallest first
		file("image", big.FileID, "image/jpeg", "photo.jpg", int64(big.FileSize))
	case m.Video != nil:
		file("video", m.Video.FileID, orDefault(m.Video.MimeType, "video/mp4"), m.Video.FileName, m.Video.FileSize)
	case m.Audio != nil:
		file("audio", m.Audio.FileID, orDefault(m.Audio.MimeType, "audio/mpeg"), m.Audio.FileName, m.Audio.FileSize)
	case m.Voice != nil:
		file("audio", m.Voice.FileID, orDefault(m.Voice.MimeType, "audio/ogg"), "voice.ogg", m.Voice.FileSize)
	case m.Document != nil:
		file("document", m.Document.FileID, orDefault(m.Document.MimeType, "application/octet-stream"), m.Document.FileName, m.Document.FileSize)
	case m.Sticker != nil:
		file("sticker", m.Sticker.FileID, "image/webp", "sticker.webp", int64(m.Sticker.FileSize))
	case m.Venue != nil:
		in.Type = channels.TypeLocation
		in.Location = &channels.Location{Latitude: m.Venue.Location.Latitude, Longitude: m.Venue.Location.Longitude,
			Name: m.Venue.Title, Address: m.Venue.Address}
	case m.Location != nil:
		in.Type = channels.TypeLocation
		in.Location = &channels.Location{Latitude: m.Location.Latitude, Longitude: m.Location.Longitude}
	case m.Contact != nil:
		in.Type = channels.TypeContact
		in.Contact = &channels.ContactCard{Name: strings.TrimSpace(m.Contact.FirstName + " " + m.Contact.LastName),
			Phones: []string{m.Contact.PhoneNumber}}
	case m.Text == "":
		// A poll, a dice, a game…: kept as a message that says what it was, never dropped unseen.
		in.Text = "(a Telegram message of a kind Switchboard does not carry)"
	}
	return in
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// callback is a press of an inline button: a text message whose text is the button's data, replying to the message
// the button was on.
func callback(q *models.CallbackQuery) channels.Inbound {
	in := channels.Inbound{ProviderID: "cb:" + q.ID, From: userParty(q.From), At: time.Now(), Type: channels.TypeText,
		Text: q.Data}
	in.Chat = in.From.Address
	if m := q.Message.Message; m != nil {
		in.Chat = strconv.FormatInt(m.Chat.ID, 10)
		in.ReplyTo = providerID(m.Chat.ID, m.ID)
	}
	return in
}

// memberChange reports the bot being added to a group (the group is the instance's now) or removed from it.
func memberChange(ctx context.Context, sink channels.Sink, u *models.ChatMemberUpdated) error {
	if u.Chat.Type == models.ChatTypePrivate {
		return nil
	}
	g := channels.Group{Address: strconv.FormatInt(u.Chat.ID, 10), Subject: u.Chat.Title, CreatedAt: time.Unix(int64(u.Date), 0)}
	switch u.NewChatMember.Type {
	case models.ChatMemberTypeLeft, models.ChatMemberTypeBanned:
		return sink.GroupChanged(ctx, g, channels.GroupLeft)
	}
	return sink.GroupChanged(ctx, g, channels.GroupCreated)
}

// download fetches a file a message carries (getFile, then the file URL).
func (ba botAPI) download(ctx context.Context, fileID string) (io.ReadCloser, error) {
	b, token := ba.bot(), ba.token
	f, err := b.GetFile(ctx, &bot.GetFileParams{FileID: fileID})
	if err != nil {
		return nil, fmt.Errorf("telegram: getFile: %s", strings.ReplaceAll(err.Error(), token, "<bot-token>"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.FileDownloadLink(f), nil)
	if err != nil {
		return nil, err
	}
	res, err := ba.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram: downloading a file: %s", strings.ReplaceAll(err.Error(), token, "<bot-token>"))
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("telegram: downloading a file: HTTP %d", res.StatusCode)
	}
	return res.Body, nil
}
