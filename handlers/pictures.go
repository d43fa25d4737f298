package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
)

// GetContactPicture answers GET /api/v1/instances/{instance_id}/contacts/{contact_id}/picture.
func (s *Server) GetContactPicture(ctx context.Context, req gen.GetContactPictureRequestObject) (gen.GetContactPictureResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	refresh := req.Params.Refresh != nil && *req.Params.Refresh
	p, err := s.channels.ContactPicture(ctx, key.WorkspaceID, req.InstanceId, req.ContactId, refresh)
	if err != nil {
		return nil, err
	}
	out := gen.ContactPicture{Object: gen.ContactPictureObjectContactPicture, ContactId: p.ContactID, FetchedAt: p.FetchedAt}
	if p.Media != nil {
		m := mediaAPI(*p.Media)
		out.Media = &m
	}
	return gen.GetContactPicture200JSONResponse{Body: out}, nil
}
