package channels

import (
	"context"
	"errors"
	"mime"
	"time"

	"github.com/switchboard/switchboard/store"
)

// pictureTTL is how long a contact's fetched profile picture is trusted before the network is asked again.
const pictureTTL = 24 * time.Hour

// ContactPicture is a contact's profile picture as last fetched: the media file (nil: none shared) and when the
// network was asked.
type ContactPicture struct {
	ContactID string
	Media     *MediaFile
	FetchedAt time.Time
}

// ContactPicture returns a contact's profile picture, asking the instance's session when none was fetched within
// pictureTTL or refresh is set. The picture is kept as a media file of the workspace, stored again only when the
// network's picture changed. Returns a NotFound problem for an instance or contact not in the workspace,
// CapabilityNotSupported for a provider without pictures, and InstanceNotConnected when the network must be asked
// and the instance has no live session.
func (s *Service) ContactPicture(ctx context.Context, workspaceID, instanceID, contactID string, refresh bool) (ContactPicture, error) {
	inst, err := s.Get(ctx, workspaceID, instanceID)
	if err != nil {
		return ContactPicture{}, err
	}
	p, ok := s.provider(inst.Provider)
	if !ok || !p.Info().Has(CapContactsPicture) {
		return ContactPicture{}, notSupported(inst.Provider, CapContactsPicture)
	}
	c, err := s.GetContact(ctx, workspaceID, instanceID, contactID)
	if err != nil {
		return ContactPicture{}, err
	}
	if !refresh && c.PictureFetchedAt != nil && time.Since(*c.PictureFetchedAt) < pictureTTL {
		return s.pictureOf(ctx, c)
	}
	address := ""
	for _, a := range c.Addresses {
		if n, err := p.NormalizeAddress(a); err == nil {
			address = n
			break
		}
	}
	now := micro(time.Now()) // as the database keeps it
	var pic Picture
	if address != "" {
		if pic, err = call(ctx, s, inst, cmdPicture, pictureArgs{Address: address}); err != nil {
			return ContactPicture{}, err
		}
	}
	var mediaID *string
	switch {
	case len(pic.Data) == 0:
	case pic.ID != "" && c.PictureID != nil && *c.PictureID == pic.ID && c.PictureMediaID != nil:
		mediaID = c.PictureMediaID // the same picture: kept
	default:
		name := "picture"
		if exts, _ := mime.ExtensionsByType(pic.MIMEType); len(exts) > 0 {
			name += exts[len(exts)-1]
		}
		m, err := s.storeMedia(ctx, workspaceID, name, pic.MIMEType, pic.Data, nil, "/picture")
		if err != nil {
			return ContactPicture{}, err
		}
		mediaID = &m.ID
	}
	if err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return s.db.Contacts.SetPicture(ctx, tx, c.ID, mediaID, nonEmpty(pic.ID), now)
	}); err != nil {
		return ContactPicture{}, storeError(err, "contact", contactID)
	}
	c.PictureMediaID, c.PictureFetchedAt = mediaID, &now
	return s.pictureOf(ctx, c)
}

// pictureOf is a contact's kept picture.
func (s *Service) pictureOf(ctx context.Context, c store.Contact) (ContactPicture, error) {
	out := ContactPicture{ContactID: c.ID, FetchedAt: *c.PictureFetchedAt}
	if c.PictureMediaID == nil {
		return out, nil
	}
	f, err := s.GetMedia(ctx, c.WorkspaceID, *c.PictureMediaID)
	var pe interface{ Status() int }
	if errors.As(err, &pe) && pe.Status() == 404 {
		return out, nil // the file was deleted: as if none were kept
	}
	if err != nil {
		return ContactPicture{}, err
	}
	out.Media = &f
	return out, nil
}
