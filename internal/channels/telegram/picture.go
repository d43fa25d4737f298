package telegram

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/go-telegram/bot"

	"github.com/switchboard/switchboard/internal/channels"
)

// maxPicture bounds a profile picture read from the Bot API (Telegram's are a few hundred KiB at most).
const maxPicture = 5 << 20

var _ channels.PictureReader = (*session)(nil)

// Picture reads a user's current profile photo (getUserProfilePhotos, its largest size, then getFile) or a group's
// photo (getChat). Telegram names a photo by its file_unique_id, the same while the photo is.
func (s *session) Picture(ctx context.Context, address string) (channels.Picture, error) {
	id, err := strconv.ParseInt(address, 10, 64)
	if err != nil {
		return channels.Picture{}, &channels.Failure{Code: "invalid_address", Detail: fmt.Sprintf("%q is not a Telegram chat ID", address)}
	}
	var fileID, unique string
	if id > 0 {
		photos, err := s.b.GetUserProfilePhotos(ctx, &bot.GetUserProfilePhotosParams{UserID: id, Limit: 1})
		if err != nil {
			return channels.Picture{}, s.redact(err)
		}
		if len(photos.Photos) == 0 || len(photos.Photos[0]) == 0 {
			return channels.Picture{}, nil
		}
		sizes := photos.Photos[0]
		largest := sizes[len(sizes)-1] // sizes come smallest first
		fileID, unique = largest.FileID, largest.FileUniqueID
	} else {
		chat, err := s.b.GetChat(ctx, &bot.GetChatParams{ChatID: id})
		if err != nil {
			return channels.Picture{}, s.redact(err)
		}
		if chat.Photo == nil {
			return channels.Picture{}, nil
		}
		fileID, unique = chat.Photo.BigFileID, chat.Photo.BigFileUniqueID
	}
	rc, err := s.botAPI().download(ctx, fileID)
	if err != nil {
		return channels.Picture{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxPicture+1))
	if err != nil {
		return channels.Picture{}, s.redact(err)
	}
	if len(data) > maxPicture {
		return channels.Picture{}, &channels.Failure{Code: "media_rejected", Detail: "the profile photo is larger than 5 MiB"}
	}
	return channels.Picture{ID: unique, MIMEType: "image/jpeg", Data: data}, nil
}
