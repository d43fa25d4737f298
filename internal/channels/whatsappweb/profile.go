//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	_ "image/png" // PNG pictures are read to be sent as JPEG
	"strings"
	"unicode/utf8"

	"go.mau.fi/whatsmeow/types"

	"github.com/switchboard/switchboard/internal/channels"
)

// WhatsApp's limits on the account's own profile: a push name of 25 characters and an about text of 139.
const (
	MaxPushName = 25
	MaxAbout    = 139
)

// SetGroupSettings makes a group an announcement group or not (who may send) and locks its info to admins or not;
// WhatsApp lets only admins change either.
func (s *session) SetGroupSettings(ctx context.Context, group string, set channels.GroupSettings) (channels.Group, error) {
	c, j, err := s.groupClient(group)
	if err != nil {
		return channels.Group{}, err
	}
	if set.Send != "" {
		if err := c.SetGroupAnnounce(ctx, j, set.Send == channels.GroupAdmins); err != nil {
			return channels.Group{}, groupFailure(err)
		}
	}
	if set.EditInfo != "" {
		if err := c.SetGroupLocked(ctx, j, set.EditInfo == channels.GroupAdmins); err != nil {
			return channels.Group{}, groupFailure(err)
		}
	}
	return s.GetGroup(ctx, group)
}

// settingsOf is who may send to a group and who may edit its info, as WhatsApp's group info says.
func settingsOf(info *types.GroupInfo) *channels.GroupSettings {
	return channels.AdminsOnly(info.IsAnnounce, info.IsLocked)
}

// SetPicture sets the picture of a group (target) or of the account (no target), or removes it (no data). WhatsApp
// takes JPEG only: a PNG is re-encoded.
func (s *session) SetPicture(ctx context.Context, target string, data []byte, mimeType string) (string, error) {
	c, err := s.client()
	if err != nil {
		return "", err
	}
	who := types.EmptyJID
	if target != "" {
		if who, err = groupJID(target); err != nil {
			return "", err
		}
	}
	if len(data) > 0 && mimeType != "image/jpeg" {
		if data, err = asJPEG(data); err != nil {
			return "", &channels.Failure{Code: "unsupported_media", Detail: "the picture could not be read as an image: " + err.Error()}
		}
	}
	id, err := c.SetPicture(ctx, who, data)
	if err != nil {
		if target != "" {
			return "", groupFailure(err)
		}
		return "", failureOf(err)
	}
	return id, nil
}

// asJPEG re-encodes an image as a JPEG.
func asJPEG(data []byte) ([]byte, error) {
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = jpeg.Encode(&b, img, &jpeg.Options{Quality: 90})
	return b.Bytes(), err
}

// Profile is the account's push name and about text.
func (s *session) Profile(ctx context.Context) (channels.Profile, error) {
	c, err := s.client()
	if err != nil {
		return channels.Profile{}, err
	}
	_, _, name := c.Own()
	about, err := c.About(ctx)
	if err != nil {
		return channels.Profile{}, failureOf(err)
	}
	return channels.Profile{Name: &name, About: &about}, nil
}

// SetProfile changes the account's push name and about text within WhatsApp's limits.
func (s *session) SetProfile(ctx context.Context, change channels.Profile) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	if change.Name != nil && (strings.TrimSpace(*change.Name) == "" || utf8.RuneCountInString(*change.Name) > MaxPushName) {
		return &channels.Failure{Code: "invalid_name", Detail: fmt.Sprintf("a WhatsApp name has 1 to %d characters", MaxPushName)}
	}
	if change.About != nil && utf8.RuneCountInString(*change.About) > MaxAbout {
		return &channels.Failure{Code: "invalid_about", Detail: fmt.Sprintf("a WhatsApp about text has at most %d characters", MaxAbout)}
	}
	if change.Name != nil {
		if err := c.SetPushName(ctx, *change.Name); err != nil {
			return failureOf(err)
		}
	}
	if change.About != nil {
		if err := c.SetAbout(ctx, *change.About); err != nil {
			return failureOf(err)
		}
	}
	return nil
}
