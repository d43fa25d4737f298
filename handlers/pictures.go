package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
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

// groupPictureAPI is the API's GroupPicture.
func groupPictureAPI(p channels.GroupPicture) gen.GroupPicture {
	out := gen.GroupPicture{Object: gen.GroupPictureObjectGroupPicture, GroupId: p.GroupID, FetchedAt: p.FetchedAt}
	if p.Media != nil {
		m := mediaAPI(*p.Media)
		out.Media = &m
	}
	return out
}

// GetGroupPicture answers GET /api/v1/instances/{instance_id}/groups/{group_id}/picture.
func (s *Server) GetGroupPicture(ctx context.Context, req gen.GetGroupPictureRequestObject) (gen.GetGroupPictureResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	refresh := req.Params.Refresh != nil && *req.Params.Refresh
	p, err := s.channels.GroupPicture(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, refresh)
	if err != nil {
		return nil, err
	}
	return gen.GetGroupPicture200JSONResponse{Body: groupPictureAPI(p)}, nil
}

// SetGroupPicture answers PUT /api/v1/instances/{instance_id}/groups/{group_id}/picture.
func (s *Server) SetGroupPicture(ctx context.Context, req gen.SetGroupPictureRequestObject) (gen.SetGroupPictureResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.SetGroupPicture(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, req.Body.MediaId)
	if err != nil {
		return nil, err
	}
	return gen.SetGroupPicture200JSONResponse{Body: groupPictureAPI(p)}, nil
}

// DeleteGroupPicture answers DELETE /api/v1/instances/{instance_id}/groups/{group_id}/picture.
func (s *Server) DeleteGroupPicture(ctx context.Context, req gen.DeleteGroupPictureRequestObject) (gen.DeleteGroupPictureResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.SetGroupPicture(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, "")
	if err != nil {
		return nil, err
	}
	return gen.DeleteGroupPicture200JSONResponse{Body: groupPictureAPI(p)}, nil
}

// profileAPI is the API's InstanceProfile.
func profileAPI(p channels.InstanceProfile) gen.InstanceProfile {
	out := gen.InstanceProfile{Object: gen.InstanceProfileObjectInstanceProfile, InstanceId: p.InstanceID,
		Name: p.Name, About: p.About, FetchedAt: p.FetchedAt}
	if p.Picture != nil {
		m := mediaAPI(*p.Picture)
		out.Picture = &m
	}
	return out
}

// GetInstanceProfile answers GET /api/v1/instances/{instance_id}/profile.
func (s *Server) GetInstanceProfile(ctx context.Context, req gen.GetInstanceProfileRequestObject) (gen.GetInstanceProfileResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.Profile(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.GetInstanceProfile200JSONResponse{Body: profileAPI(p)}, nil
}

// UpdateInstanceProfile answers PATCH /api/v1/instances/{instance_id}/profile.
func (s *Server) UpdateInstanceProfile(ctx context.Context, req gen.UpdateInstanceProfileRequestObject) (gen.UpdateInstanceProfileResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	u := channels.ProfileUpdate{Name: req.Body.Name, About: req.Body.About, PictureSet: req.Body.PictureMediaId.IsSpecified()}
	if u.PictureSet && !req.Body.PictureMediaId.IsNull() {
		u.PictureMediaID = req.Body.PictureMediaId.MustGet()
	}
	p, err := s.channels.UpdateProfile(ctx, key.WorkspaceID, req.InstanceId, u)
	if err != nil {
		return nil, err
	}
	return gen.UpdateInstanceProfile200JSONResponse{Body: profileAPI(p)}, nil
}
