package channels

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// maxPictureUpload bounds a picture set on a network: WhatsApp and Telegram take profile photos well under it,
// and the bytes travel in one command to the process holding the session.
const maxPictureUpload = 5 << 20

// GroupPicture is a group's picture as last fetched or set: the media file (nil: none) and when.
type GroupPicture struct {
	GroupID   string
	Media     *MediaFile
	FetchedAt time.Time
}

// GroupPicture returns a group's picture, asking the instance's session (contacts.picture: a group's picture is
// read as a person's) when none was fetched within pictureTTL or refresh is set. Returns NotFound,
// CapabilityNotSupported and InstanceNotConnected.
func (s *Service) GroupPicture(ctx context.Context, workspaceID, instanceID, groupID string, refresh bool) (GroupPicture, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapContactsPicture)
	if err != nil {
		return GroupPicture{}, err
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return GroupPicture{}, err
	}
	if refresh || g.PictureFetchedAt == nil || time.Since(*g.PictureFetchedAt) >= pictureTTL {
		now := micro(time.Now())
		mediaID, pictureID, err := s.fetchPicture(ctx, inst, g.Address, g.PictureID, g.PictureMediaID)
		if err != nil {
			return GroupPicture{}, err
		}
		if err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
			return s.db.Groups.SetPicture(ctx, tx, g.ID, mediaID, pictureID, now)
		}); err != nil {
			return GroupPicture{}, storeError(err, "group", groupID)
		}
		g.PictureMediaID, g.PictureFetchedAt = mediaID, &now
	}
	f, err := s.keptMedia(ctx, workspaceID, g.PictureMediaID)
	return GroupPicture{GroupID: g.ID, Media: f, FetchedAt: *g.PictureFetchedAt}, err
}

// SetGroupPicture shows a media file of the workspace as a group's picture on the network, or removes it (mediaID
// ""), and records it with group.updated (changed: picture). Returns NotFound, CapabilityNotSupported, a
// ReferenceNotFound or ValidationFailed problem for a media file that is not there or not a JPEG or PNG image, a
// Conflict for a community, and InstanceNotConnected.
func (s *Service) SetGroupPicture(ctx context.Context, workspaceID, instanceID, groupID, mediaID string) (GroupPicture, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapGroupsPicture)
	if err != nil {
		return GroupPicture{}, err
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return GroupPicture{}, err
	}
	if ro := readOnly(g); ro != nil {
		return GroupPicture{}, ro
	}
	args, file, err := s.pictureUpload(ctx, workspaceID, mediaID, "/media_id")
	if err != nil {
		return GroupPicture{}, err
	}
	args.Target = g.Address
	set, err := call(ctx, s, inst, cmdSetPicture, args)
	if err != nil {
		return GroupPicture{}, err
	}
	now := micro(time.Now())
	err = s.inTxFor(ctx, []string{inst.ID}, func(ctx context.Context, tx store.Tx) error {
		if err := s.db.Groups.SetPicture(ctx, tx, g.ID, nonEmpty(mediaID), nonEmpty(set.ID), now); err != nil {
			return err
		}
		row, err := s.db.Groups.ByAddress(ctx, tx, inst.ID, g.Address)
		if err != nil {
			return err
		}
		api, err := s.GroupAPI(ctx, tx, row)
		if err != nil {
			return err
		}
		return s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: workspaceID, InstanceID: inst.ID, Payload: gen.GroupUpdatedEvent{
			Group: api, Changed: []string{"picture"}, InstanceId: inst.ID}})
	})
	if err != nil {
		return GroupPicture{}, storeError(err, "group", groupID)
	}
	return GroupPicture{GroupID: g.ID, Media: file, FetchedAt: now}, nil
}

// pictureUpload reads a media file of the workspace to set as a picture (mediaID "": a removal, no file). The file
// must be a JPEG or PNG image within maxPictureUpload; pointer names the request's field in the problems.
func (s *Service) pictureUpload(ctx context.Context, workspaceID, mediaID, pointer string) (setPictureArgs, *MediaFile, error) {
	if mediaID == "" {
		return setPictureArgs{}, nil, nil
	}
	f, data, err := s.MediaContent(ctx, workspaceID, mediaID)
	var pe interface{ Status() int }
	if errors.As(err, &pe) && pe.Status() == 404 {
		e := problem.Errorf(problem.ReferenceNotFound, "There is no media file %s in this workspace.", mediaID)
		e.Fields = []problem.Field{{Pointer: pointer, Detail: "there is no such media file in this workspace"}}
		return setPictureArgs{}, nil, e
	}
	if err != nil {
		return setPictureArgs{}, nil, err
	}
	if f.MIMEType != "image/jpeg" && f.MIMEType != "image/png" {
		return setPictureArgs{}, nil, problem.Invalid(pointer, "a picture is a JPEG or PNG image; this file is "+f.MIMEType)
	}
	if len(data) > maxPictureUpload {
		return setPictureArgs{}, nil, problem.Invalid(pointer, "a picture has at most 5 MiB")
	}
	return setPictureArgs{Data: data, MIMEType: f.MIMEType}, &f, nil
}

// InstanceProfile is the account's own profile as the network shows it: name and about text (nil where the
// provider does not keep them) and picture (nil: none, or the provider cannot read it).
type InstanceProfile struct {
	InstanceID  string
	Name, About *string
	Picture     *MediaFile
	FetchedAt   time.Time
}

// ProfileUpdate is a change of the account's own profile: the fields set change (PictureSet with PictureMediaID ""
// removes the picture).
type ProfileUpdate struct {
	Name, About    *string
	PictureSet     bool
	PictureMediaID string
}

// Profile reads the account's own profile from the network: name and about text where the provider keeps them,
// the picture where it reads pictures (kept as a media file, stored again only when it changed). Returns NotFound,
// CapabilityNotSupported for a provider that keeps none of them, and InstanceNotConnected.
func (s *Service) Profile(ctx context.Context, workspaceID, instanceID string) (InstanceProfile, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return InstanceProfile{}, err
	}
	info := p.Info()
	if !info.Has(CapProfileName) && !info.Has(CapProfileAbout) && !info.Has(CapProfilePicture) {
		return InstanceProfile{}, notSupported(inst.Provider, CapProfileName)
	}
	out := InstanceProfile{InstanceID: inst.ID, FetchedAt: micro(time.Now())}
	if info.Has(CapProfileName) || info.Has(CapProfileAbout) {
		got, err := call(ctx, s, inst, cmdProfileGet, none{})
		if err != nil {
			return InstanceProfile{}, err
		}
		if info.Has(CapProfileName) {
			out.Name = got.Name
		}
		if info.Has(CapProfileAbout) {
			out.About = got.About
		}
	}
	if own := accountAddress(inst); own != "" && info.Has(CapContactsPicture) {
		mediaID, pictureID, err := s.fetchPicture(ctx, inst, own, inst.ProfilePictureID, inst.ProfilePictureMediaID)
		if err != nil {
			return InstanceProfile{}, err
		}
		if deref(mediaID) != deref(inst.ProfilePictureMediaID) || deref(pictureID) != deref(inst.ProfilePictureID) {
			if err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
				return s.db.Instances.SetProfilePicture(ctx, tx, inst.ID, mediaID, pictureID)
			}); err != nil {
				return InstanceProfile{}, storeError(err, "instance", instanceID)
			}
		}
		if out.Picture, err = s.keptMedia(ctx, workspaceID, mediaID); err != nil {
			return InstanceProfile{}, err
		}
	}
	return out, nil
}

// UpdateProfile changes the account's own name, about text or picture on the network, each checked against its
// capability before anything changes, and emits instance.updated naming the parts changed (a new name is also the
// account's display name). It answers the profile as the network then shows it. Returns NotFound,
// CapabilityNotSupported, ReferenceNotFound and ValidationFailed for the picture's file, and
// InstanceNotConnected.
func (s *Service) UpdateProfile(ctx context.Context, workspaceID, instanceID string, u ProfileUpdate) (InstanceProfile, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return InstanceProfile{}, err
	}
	var changed []string
	for _, need := range []struct {
		set bool
		c   Capability
	}{{u.Name != nil, CapProfileName}, {u.About != nil, CapProfileAbout}, {u.PictureSet, CapProfilePicture}} {
		if !need.set {
			continue
		}
		if !p.Info().Has(need.c) {
			return InstanceProfile{}, notSupported(inst.Provider, need.c)
		}
		changed = append(changed, string(need.c))
	}
	var upload setPictureArgs
	if u.PictureSet {
		if upload, _, err = s.pictureUpload(ctx, workspaceID, u.PictureMediaID, "/picture_media_id"); err != nil {
			return InstanceProfile{}, err
		}
	}
	if u.Name != nil || u.About != nil {
		if _, err := call(ctx, s, inst, cmdProfileSet, Profile{Name: u.Name, About: u.About}); err != nil {
			return InstanceProfile{}, err
		}
	}
	var pictureID string
	if u.PictureSet {
		set, err := call(ctx, s, inst, cmdSetPicture, upload)
		if err != nil {
			return InstanceProfile{}, err
		}
		pictureID = set.ID
	}
	err = s.inTxFor(ctx, []string{inst.ID}, func(ctx context.Context, tx store.Tx) error {
		i, err := s.db.Instances.Lock(ctx, tx, inst.ID)
		if err != nil {
			return err
		}
		if u.PictureSet {
			if err := s.db.Instances.SetProfilePicture(ctx, tx, i.ID, nonEmpty(u.PictureMediaID), nonEmpty(pictureID)); err != nil {
				return err
			}
		}
		if u.Name != nil && i.Account != nil && i.Account.DisplayName != *u.Name {
			account := *i.Account
			account.DisplayName = *u.Name
			i.Account = &account
			if err := s.db.Instances.Save(ctx, tx, &i); err != nil {
				return err
			}
		}
		return s.emit(ctx, tx, &i, func(api gen.Instance) any {
			return gen.InstanceUpdatedEvent{Instance: api, Changed: changed, InstanceId: i.ID}
		})
	})
	if err != nil {
		return InstanceProfile{}, storeError(err, "instance", instanceID)
	}
	return s.Profile(ctx, workspaceID, instanceID)
}
