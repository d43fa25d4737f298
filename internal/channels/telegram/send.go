package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/internal/channels"
)

// chatID is an address as the Bot API takes it: a number, or an @username.
func chatID(address string) any {
	if n, err := strconv.ParseInt(address, 10, 64); err == nil {
		return n
	}
	return address
}

// pace waits until a send to chat keeps Telegram's spacing: the chat's interval since its last send (groups have
// negative IDs and a longer one), then the bot's since any send. The send queue sends one message of a chat at a
// time, so only that chat waits its interval, and a bot slot is taken only once the chat's wait is over: a send
// that is due later never holds up another chat's send that is due now. The chat's interval runs from when its
// previous send ended (see sent): Telegram counts from when a request arrives, and a request held up on its way (a
// slow connection, a busy scheduler) would otherwise arrive closer to the next one than the interval.
func (s *session) pace(ctx context.Context, chat string) error {
	interval := s.p.opts.ChatInterval
	if strings.HasPrefix(chat, "-") {
		interval = s.p.opts.GroupInterval
	}
	s.mu.Lock()
	now := time.Now()
	at := now
	if last, ok := s.lastChat[chat]; ok && last.Add(interval).After(at) {
		at = last.Add(interval)
	}
	s.lastChat[chat] = at
	if len(s.lastChat) > 10000 { // forget chats whose interval passed long ago
		for c, t := range s.lastChat {
			if now.Sub(t) > time.Minute {
				delete(s.lastChat, c)
			}
		}
	}
	s.mu.Unlock()
	if err := sleepUntil(ctx, at); err != nil {
		return err
	}
	s.mu.Lock()
	at = time.Now()
	if next := s.lastAny.Add(s.p.opts.BotInterval); next.After(at) {
		at = next
	}
	s.lastAny = at
	s.mu.Unlock()
	return sleepUntil(ctx, at)
}

// sleepUntil waits until t, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	wait := time.Until(t)
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// sent marks the end of a send to chat: the next one to that chat waits its interval from here.
func (s *session) sent(chat string) {
	now := time.Now()
	s.mu.Lock()
	if now.After(s.lastChat[chat]) {
		s.lastChat[chat] = now
	}
	s.mu.Unlock()
}

// Send sends one message.
func (s *session) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	if err := s.pace(ctx, m.Chat); err != nil {
		return channels.Sent{}, err
	}
	defer s.sent(m.Chat)
	chat := chatID(m.Chat)
	var reply *models.ReplyParameters
	if _, id, ok := parseProviderID(m.ReplyTo); ok {
		reply = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
	}
	_, target, _ := parseProviderID(m.Target)
	var (
		msg *models.Message
		err error
	)
	switch m.Type {
	case channels.TypeText:
		msg, err = s.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, Text: m.Text, ParseMode: models.ParseMode(s.parse),
			ReplyParameters: reply})
	case channels.TypeMedia:
		msg, err = s.sendMedia(ctx, chat, m, reply)
	case channels.TypeLocation:
		if m.Location.Name != "" || m.Location.Address != "" {
			msg, err = s.b.SendVenue(ctx, &bot.SendVenueParams{ChatID: chat, Latitude: m.Location.Latitude,
				Longitude: m.Location.Longitude, Title: m.Location.Name, Address: m.Location.Address, ReplyParameters: reply})
		} else {
			msg, err = s.b.SendLocation(ctx, &bot.SendLocationParams{ChatID: chat, Latitude: m.Location.Latitude,
				Longitude: m.Location.Longitude, ReplyParameters: reply})
		}
	case channels.TypeContact:
		if len(m.Contact.Phones) == 0 {
			return channels.Sent{}, &channels.Failure{Code: "invalid_message", Detail: "Telegram contacts need a phone number"}
		}
		first, last, _ := strings.Cut(m.Contact.Name, " ")
		msg, err = s.b.SendContact(ctx, &bot.SendContactParams{ChatID: chat, PhoneNumber: m.Contact.Phones[0],
			FirstName: first, LastName: last, ReplyParameters: reply})
	case channels.TypeReaction:
		var r []models.ReactionType
		if m.Emoji != "" {
			r = []models.ReactionType{{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Emoji: m.Emoji}}}
		}
		_, err = s.b.SetMessageReaction(ctx, &bot.SetMessageReactionParams{ChatID: chat, MessageID: target, Reaction: r})
	case channels.TypeEdit:
		msg, err = s.b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: target, Text: m.Text,
			ParseMode: models.ParseMode(s.parse)})
	case channels.TypeDelete:
		_, err = s.b.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chat, MessageID: target})
	case channels.TypePoll:
		// Not anonymous: Telegram reports answers (poll_answer, with the voter) only of polls that name voters.
		options := make([]models.InputPollOption, len(m.Poll.Options))
		for i, o := range m.Poll.Options {
			options[i] = models.InputPollOption{Text: o}
		}
		msg, err = s.b.SendPoll(ctx, &bot.SendPollParams{ChatID: chat, Question: m.Poll.Question, Options: options,
			IsAnonymous: new(false), AllowsMultipleAnswers: m.Poll.MultipleChoice, ReplyParameters: reply})
	default:
		return channels.Sent{}, &channels.Failure{Code: "capability_not_supported", Detail: "Telegram bots cannot send " + string(m.Type) + " messages"}
	}
	if err != nil {
		return channels.Sent{}, s.failure(err, m)
	}
	// The Bot API takes no idempotency key: a resend is a second message.
	sent := channels.Sent{At: time.Now(), PossibleRepeat: m.MayRepeat()}
	if msg != nil && m.Type != channels.TypeEdit {
		sent.ProviderID = providerID(msg.Chat.ID, msg.ID)
		sent.At = time.Unix(int64(msg.Date), 0)
		if msg.Poll != nil {
			sent.PollID = msg.Poll.ID // votes name the poll, not its message
		}
	}
	return sent, nil
}

// sendMedia uploads an attachment with the method of its kind.
func (s *session) sendMedia(ctx context.Context, chat any, m channels.Outbound, reply *models.ReplyParameters) (*models.Message, error) {
	rc, err := m.Media.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	name := m.Media.Filename
	if name == "" {
		name = "file"
	}
	file := &models.InputFileUpload{Filename: name, Data: rc}
	caption := m.Media.Caption
	switch m.Media.Kind {
	case "image":
		return s.b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: file, Caption: caption, ReplyParameters: reply})
	case "video":
		return s.b.SendVideo(ctx, &bot.SendVideoParams{ChatID: chat, Video: file, Caption: caption, ReplyParameters: reply})
	case "audio":
		return s.b.SendAudio(ctx, &bot.SendAudioParams{ChatID: chat, Audio: file, Caption: caption, ReplyParameters: reply})
	case "sticker":
		return s.b.SendSticker(ctx, &bot.SendStickerParams{ChatID: chat, Sticker: file, ReplyParameters: reply})
	}
	return s.b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: file, Caption: caption, ReplyParameters: reply})
}

// failure maps a Bot API error to the failure the message records: the codes clients can act on, with Telegram's
// own words as the detail. Errors without an answer (network, 5xx) stay plain errors, which the queue retries.
func (s *session) failure(err error, m channels.Outbound) error {
	var tooMany *bot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		return &channels.Failure{Code: "rate_limited", Detail: tooMany.Message, Retryable: true,
			RetryAfter: time.Duration(tooMany.RetryAfter) * time.Second}
	}
	text := s.redact(err).Error()
	lower := strings.ToLower(text)
	switch {
	case errors.Is(err, bot.ErrorForbidden) && (strings.Contains(lower, "blocked") || strings.Contains(lower, "kicked")):
		return &channels.Failure{Code: "recipient_blocked", Detail: text}
	case errors.Is(err, bot.ErrorForbidden) && strings.Contains(lower, "deactivated"):
		return &channels.Failure{Code: "recipient_not_on_network", Detail: text}
	case errors.Is(err, bot.ErrorForbidden):
		return &channels.Failure{Code: "not_permitted", Detail: text}
	case errors.Is(err, bot.ErrorUnauthorized):
		return &channels.Failure{Code: "not_connected", Detail: "Telegram no longer accepts the bot token: " + text}
	case errors.Is(err, bot.ErrorBadRequest) && strings.Contains(lower, "chat not found"):
		return &channels.Failure{Code: "recipient_not_on_network", Detail: text + " (a person must start a chat with the bot first)"}
	case errors.Is(err, bot.ErrorBadRequest) && strings.Contains(lower, "not found"):
		return &channels.Failure{Code: "message_not_found", Detail: text}
	case errors.Is(err, bot.ErrorBadRequest) && m.Type == channels.TypeMedia:
		return &channels.Failure{Code: "media_rejected", Detail: text}
	case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorNotFound), errors.Is(err, bot.ErrorConflict):
		return &channels.Failure{Code: "rejected", Detail: text}
	}
	return errors.New(text)
}

// SendChatState shows the chat that the bot is typing or recording a voice message (the Bot API's chat actions,
// which Telegram shows for five seconds or until the bot's next message). Telegram has no action for stopping:
// paused sends nothing and the action ends by itself.
func (s *session) SendChatState(ctx context.Context, chat, state string) error {
	action := models.ChatActionTyping
	switch state {
	case channels.StatePaused:
		return nil
	case channels.StateRecording:
		action = models.ChatActionRecordVoice
	}
	if _, err := s.b.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID(chat), Action: action}); err != nil {
		return s.failure(err, channels.Outbound{Chat: chat})
	}
	return nil
}
