package telegram

import (
	"bytes"
	"context"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/internal/channels"
)

var (
	_ channels.GroupConfigurer = (*session)(nil)
	_ channels.PictureWriter   = (*session)(nil)
	_ channels.ProfileEditor   = (*session)(nil)
)

// SetGroupSettings sets a group's default member permissions: members may send (every kind of message) or not,
// and may change its info or not; admins keep theirs. Telegram replaces the permissions as a whole, so the others
// are read first and kept. The bot must be an admin allowed to restrict members.
func (s *session) SetGroupSettings(ctx context.Context, group string, set channels.GroupSettings) (channels.Group, error) {
	c, err := s.b.GetChat(ctx, &bot.GetChatParams{ChatID: chatID(group)})
	if err != nil {
		return channels.Group{}, s.failure(err, channels.Outbound{})
	}
	perms := models.ChatPermissions{}
	if c.Permissions != nil {
		perms = *c.Permissions
	}
	if set.Send != "" {
		all := set.Send == channels.GroupAll
		perms.CanSendMessages, perms.CanSendAudios, perms.CanSendDocuments, perms.CanSendPhotos = all, all, all, all
		perms.CanSendVideos, perms.CanSendVideoNotes, perms.CanSendVoiceNotes, perms.CanSendPolls = all, all, all, all
		perms.CanSendOtherMessages, perms.CanAddWebPagePreviews = all, all
	}
	if set.EditInfo != "" {
		perms.CanChangeInfo = set.EditInfo == channels.GroupAll
	}
	if _, err := s.b.SetChatPermissions(ctx, &bot.SetChatPermissionsParams{ChatID: chatID(group), Permissions: perms,
		UseIndependentChatPermissions: true}); err != nil {
		return channels.Group{}, s.failure(err, channels.Outbound{})
	}
	return s.GetGroup(ctx, group)
}

// settingsOf is who may send and who may edit a group's info by its default member permissions (nil: Telegram
// did not send them).
func settingsOf(p *models.ChatPermissions) *channels.GroupSettings {
	if p == nil {
		return nil
	}
	return channels.AdminsOnly(!p.CanSendMessages, !p.CanChangeInfo)
}

// SetPicture sets or removes a group's photo. A bot has no profile photo of its own to set through the Bot API
// (the provider does not list profile.picture; @BotFather sets it).
func (s *session) SetPicture(ctx context.Context, target string, data []byte, _ string) (string, error) {
	if target == "" {
		return "", errCannot("set their own profile photo; @BotFather does")
	}
	var err error
	if len(data) == 0 {
		_, err = s.b.DeleteChatPhoto(ctx, &bot.DeleteChatPhotoParams{ChatID: chatID(target)})
	} else {
		_, err = s.b.SetChatPhoto(ctx, &bot.SetChatPhotoParams{ChatID: chatID(target),
			Photo: &models.InputFileUpload{Filename: "picture.jpg", Data: bytes.NewReader(data)}})
	}
	if err != nil {
		return "", s.failure(err, channels.Outbound{})
	}
	if len(data) == 0 {
		return "", nil
	}
	// Telegram answers true: its ID of the new photo is the chat's, read without downloading the photo.
	c, err := s.b.GetChat(ctx, &bot.GetChatParams{ChatID: chatID(target)})
	if err != nil {
		return "", s.failure(err, channels.Outbound{})
	}
	if c.Photo == nil {
		return "", nil
	}
	return c.Photo.BigFileUniqueID, nil
}

// Profile is the bot's name and short description (the about text on its profile page).
func (s *session) Profile(ctx context.Context) (channels.Profile, error) {
	name, err := s.b.GetMyName(ctx, &bot.GetMyNameParams{})
	if err != nil {
		return channels.Profile{}, s.failure(err, channels.Outbound{})
	}
	about, err := s.b.GetMyShortDescription(ctx, &bot.GetMyShortDescriptionParams{})
	if err != nil {
		return channels.Profile{}, s.failure(err, channels.Outbound{})
	}
	return channels.Profile{Name: &name.Name, About: &about.ShortDescription}, nil
}

// SetProfile changes the bot's name and short description for every language without one of its own.
func (s *session) SetProfile(ctx context.Context, change channels.Profile) error {
	if change.Name != nil {
		if _, err := s.b.SetMyName(ctx, &bot.SetMyNameParams{Name: *change.Name}); err != nil {
			return s.failure(err, channels.Outbound{})
		}
	}
	if change.About != nil {
		if _, err := s.b.SetMyShortDescription(ctx, &bot.SetMyShortDescriptionParams{ShortDescription: *change.About}); err != nil {
			return s.failure(err, channels.Outbound{})
		}
	}
	return nil
}
