package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"unicode/utf8"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// Limits of the simulated network, near WhatsApp's: a name of 25 characters, an about text of 139, a picture of
// 1 MiB.
const (
	maxProfileName = 25
	maxAbout       = 139
	maxPicture     = 1 << 20
)

// SetGroupSettings changes who may send to a group and who may edit its info; only admins may. The other
// participants are told (group updated).
func (s *session) SetGroupSettings(ctx context.Context, group string, set channels.GroupSettings) (channels.Group, error) {
	for _, v := range []string{set.Send, set.EditInfo} {
		if v != "" && v != channels.GroupAll && v != channels.GroupAdmins {
			return channels.Group{}, failure("invalid_settings", "%q is not who may (all, admins)", v)
		}
	}
	return s.changeGroup(ctx, group, roleAdmin, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, _ string) (map[string]string, string, error) {
		if set.Send != "" {
			g.AdminsOnlySend = set.Send == channels.GroupAdmins
		}
		if set.EditInfo != "" {
			g.AdminsOnlyEdit = set.EditInfo == channels.GroupAdmins
		}
		return nil, channels.GroupUpdated, s.p.net.UpdateGroup(ctx, tx, *g)
	})
}

// SetPicture sets or (no data) removes the picture of a group (a participant allowed to edit its info may) or of
// the instance's own account. The network takes JPEG and PNG up to maxPicture.
func (s *session) SetPicture(ctx context.Context, target string, data []byte, mimeType string) (string, error) {
	_, number := s.live()
	if number == "" {
		return "", notConnected()
	}
	var encoded, kind *string
	id := ""
	if len(data) > 0 {
		if mimeType != "image/jpeg" && mimeType != "image/png" {
			return "", failure("unsupported_media", "a picture is a JPEG or PNG image, not %s", mimeType)
		}
		if len(data) > maxPicture {
			return "", failure("media_too_large", "a picture is at most %d bytes", maxPicture)
		}
		e := base64.StdEncoding.EncodeToString(data)
		encoded, kind, id = &e, &mimeType, pictureID(data)
	}
	if target == "" {
		return id, s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			a, err := s.p.net.Account(ctx, tx, number)
			if err != nil {
				return err
			}
			a.Picture, a.PictureType = encoded, kind
			return s.p.net.SetProfile(ctx, tx, a)
		})
	}
	_, err := s.changeGroup(ctx, target, roleEditor, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, _ string) (map[string]string, string, error) {
		g.Picture, g.PictureType = encoded, kind
		return nil, channels.GroupUpdated, s.p.net.UpdateGroup(ctx, tx, *g)
	})
	return id, err
}

// pictureID names a picture set on the network by its content: the same image, the same ID.
func pictureID(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// storedPicture decodes a picture kept base64-encoded on the network; false when none is kept.
func storedPicture(encoded, kind *string) (channels.Picture, bool) {
	if encoded == nil || kind == nil {
		return channels.Picture{}, false
	}
	data, err := base64.StdEncoding.DecodeString(*encoded)
	if err != nil {
		return channels.Picture{}, false
	}
	return channels.Picture{ID: pictureID(data), MIMEType: *kind, Data: data}, true
}

// Profile is the account's display name and about text as its contacts see them.
func (s *session) Profile(ctx context.Context) (channels.Profile, error) {
	_, number := s.live()
	if number == "" {
		return channels.Profile{}, notConnected()
	}
	a, err := s.p.net.Account(ctx, s.p.net.Reader(), number)
	if err != nil {
		return channels.Profile{}, err
	}
	about := ""
	if a.About != nil {
		about = *a.About
	}
	return channels.Profile{Name: &a.DisplayName, About: &about}, nil
}

// SetProfile changes the account's display name (the accounts that know the number are told, as on connect) and
// about text. The instance's config keeps its own display_name, which a later connect announces again.
func (s *session) SetProfile(ctx context.Context, change channels.Profile) error {
	rs, number := s.live()
	if number == "" {
		return notConnected()
	}
	if change.Name != nil && (*change.Name == "" || utf8.RuneCountInString(*change.Name) > maxProfileName) {
		return failure("invalid_name", "a name has 1 to %d characters", maxProfileName)
	}
	if change.About != nil && utf8.RuneCountInString(*change.About) > maxAbout {
		return failure("invalid_about", "an about text has at most %d characters", maxAbout)
	}
	var letters []letter
	err := s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		a, err := s.p.net.Account(ctx, tx, number)
		if err != nil {
			return err
		}
		renamed := change.Name != nil && *change.Name != a.DisplayName
		if renamed {
			a.DisplayName = *change.Name
		}
		if change.About != nil {
			a.About = change.About
		}
		if err := s.p.net.SetProfile(ctx, tx, a); err != nil || !renamed {
			return err
		}
		known, err := s.p.net.Counterparts(ctx, tx, number)
		if err != nil {
			return err
		}
		at := now()
		for _, k := range known {
			letters = append(letters, letter{to: k.Number, instance: k.InstanceID, due: at,
				env: envelope{Contact: &channels.Party{Address: number, DisplayName: a.DisplayName}}})
		}
		return s.p.post(ctx, tx, letters)
	})
	if err != nil {
		return err
	}
	s.wakeAll(rs, letters)
	return nil
}
