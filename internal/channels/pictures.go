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
	mediaID, pictureID, err := s.fetchPicture(ctx, inst, address, c.PictureID, c.PictureMediaID)
	if err != nil {
		return ContactPicture{}, err
	}
	if err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return s.db.Contacts.SetPicture(ctx, tx, c.ID, mediaID, pictureID, now)
	}); err != nil {
		return ContactPicture{}, storeError(err, "contact", contactID)
	}
	c.PictureMediaID, c.PictureFetchedAt = mediaID, &now
	return s.pictureOf(ctx, c)
}

// fetchPicture asks the instance's session for the picture of an address ("": none to ask for) and keeps it as a
// media file of the workspace, unless it is the picture kept already (keptID names it on the network, keptMedia is
// its file). It returns the file (nil: no picture) and the network's ID of the picture.
func (s *Service) fetchPicture(ctx context.Context, inst store.Instance, address string, keptID, keptMedia *string) (mediaID, pictureID *string, err error) {
	var pic Picture
	if address != "" {
		if pic, err = call(ctx, s, inst, cmdPicture, pictureArgs{Address: address}); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case len(pic.Data) == 0:
		return nil, nil, nil
	case pic.ID != "" && keptID != nil && *keptID == pic.ID && keptMedia != nil:
		return keptMedia, keptID, nil // the same picture: kept
	}
	m, err := s.storeMedia(ctx, inst.WorkspaceID, pictureName(pic.MIMEType), pic.MIMEType, pic.Data, nil, "/picture")
	if err != nil {
		return nil, nil, err
	}
	return &m.ID, nonEmpty(pic.ID), nil
}

// pictureName is the file name a picture of a media type is kept under.
func pictureName(mimeType string) string {
	name := "picture"
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		name += exts[len(exts)-1]
	}
	return name
}

// keptMedia is a kept picture's media file: nil when none is kept or the file was deleted since.
func (s *Service) keptMedia(ctx context.Context, workspaceID string, mediaID *string) (*MediaFile, error) {
	if mediaID == nil {
		return nil, nil
	}
	f, err := s.GetMedia(ctx, workspaceID, *mediaID)
	var pe interface{ Status() int }
	if errors.As(err, &pe) && pe.Status() == 404 {
		return nil, nil // the file was deleted: as if none were kept
	}
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// pictureOf is a contact's kept picture.
func (s *Service) pictureOf(ctx context.Context, c store.Contact) (ContactPicture, error) {
	f, err := s.keptMedia(ctx, c.WorkspaceID, c.PictureMediaID)
	if err != nil {
		return ContactPicture{}, err
	}
	return ContactPicture{ContactID: c.ID, FetchedAt: *c.PictureFetchedAt, Media: f}, nil
}
