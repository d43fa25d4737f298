package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// participantResults maps a network's per-participant results to the API's, their contacts resolved.
func (s *Server) participantResults(ctx context.Context, g gen.Group, rs []channels.ParticipantResult) []gen.ParticipantResult {
	contacts := map[string]*string{}
	for _, p := range g.Participants {
		contacts[p.Address] = p.ContactId
	}
	out := make([]gen.ParticipantResult, len(rs))
	for i, r := range rs {
		out[i] = gen.ParticipantResult{Address: r.Address, ContactId: contacts[r.Address], Ok: r.OK}
		if r.Failure != nil {
			out[i].Error = &gen.MessageFailure{Code: r.Failure.Code, Detail: r.Failure.Detail}
		}
	}
	return out
}

func groupLocation(instanceID, id string) *string {
	loc := "/api/v1/instances/" + instanceID + "/groups/" + id
	return &loc
}

// CreateGroup answers POST /api/v1/instances/{instance_id}/groups.
func (s *Server) CreateGroup(ctx context.Context, req gen.CreateGroupRequestObject) (gen.CreateGroupResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	g, rejected, err := s.channels.CreateGroup(ctx, key.WorkspaceID, req.InstanceId, b.Subject, b.Description, b.Participants)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.GroupAPI(ctx, s.db.Reader(), g)
	if err != nil {
		return nil, err
	}
	out := gen.GroupCreated{Id: api.Id, Object: gen.GroupCreatedObject(api.Object), InstanceId: api.InstanceId,
		ChatId: api.ChatId, Address: api.Address, Subject: api.Subject, Description: api.Description,
		Participants: api.Participants, CreatedAt: api.CreatedAt, UpdatedAt: api.UpdatedAt, Community: api.Community,
		CommunityAddress: api.CommunityAddress, Settings: api.Settings, Rejected: s.participantResults(ctx, api, rejected)}
	return gen.CreateGroup201JSONResponse{Body: out,
		Headers: gen.CreateGroup201ResponseHeaders{Location: groupLocation(req.InstanceId, g.ID)}}, nil
}

// ListGroups answers GET /api/v1/instances/{instance_id}/groups.
func (s *Server) ListGroups(ctx context.Context, req gen.ListGroupsRequestObject) (gen.ListGroupsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "grp_", false)
	if err != nil {
		return nil, err
	}
	rows, more, err := s.channels.ListGroups(ctx, key.WorkspaceID, req.InstanceId, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(g store.ChatGroup) string { return g.ID },
		func(g store.ChatGroup) (gen.Group, error) { return s.channels.GroupAPI(ctx, s.db.Reader(), g) })
	if err != nil {
		return nil, err
	}
	return gen.ListGroups200JSONResponse{Body: gen.GroupList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetGroup answers GET /api/v1/instances/{instance_id}/groups/{group_id}.
func (s *Server) GetGroup(ctx context.Context, req gen.GetGroupRequestObject) (gen.GetGroupResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	g, err := s.channels.GetGroup(ctx, key.WorkspaceID, req.InstanceId, req.GroupId)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.GroupAPI(ctx, s.db.Reader(), g)
	if err != nil {
		return nil, err
	}
	return gen.GetGroup200JSONResponse{Body: api}, nil
}

// UpdateGroup answers PATCH /api/v1/instances/{instance_id}/groups/{group_id}.
func (s *Server) UpdateGroup(ctx context.Context, req gen.UpdateGroupRequestObject) (gen.UpdateGroupResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var settings *channels.GroupSettings
	if b := req.Body.Settings; b != nil {
		settings = &channels.GroupSettings{}
		if b.Send != nil {
			settings.Send = string(*b.Send)
		}
		if b.EditInfo != nil {
			settings.EditInfo = string(*b.EditInfo)
		}
	}
	g, err := s.channels.UpdateGroup(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, req.Body.Subject, req.Body.Description, settings)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.GroupAPI(ctx, s.db.Reader(), g)
	if err != nil {
		return nil, err
	}
	return gen.UpdateGroup200JSONResponse{Body: api}, nil
}

// ChangeGroupParticipants answers POST /api/v1/instances/{instance_id}/groups/{group_id}/participants.
func (s *Server) ChangeGroupParticipants(ctx context.Context, req gen.ChangeGroupParticipantsRequestObject) (gen.ChangeGroupParticipantsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	g, results, err := s.channels.ChangeParticipants(ctx, key.WorkspaceID, req.InstanceId, req.GroupId,
		string(req.Body.Action), req.Body.Participants)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.GroupAPI(ctx, s.db.Reader(), g)
	if err != nil {
		return nil, err
	}
	return gen.ChangeGroupParticipants200JSONResponse{Body: gen.ParticipantsChangeResult{Object: "list",
		GroupId: g.ID, Data: s.participantResults(ctx, api, results)}}, nil
}

// GetGroupInvite answers GET /api/v1/instances/{instance_id}/groups/{group_id}/invite.
func (s *Server) GetGroupInvite(ctx context.Context, req gen.GetGroupInviteRequestObject) (gen.GetGroupInviteResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	invite, err := s.channels.GroupInvite(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, false)
	if err != nil {
		return nil, err
	}
	return gen.GetGroupInvite200JSONResponse{Body: gen.GroupInvite{Object: gen.GroupInviteObjectGroupInvite,
		GroupId: req.GroupId, Invite: invite}}, nil
}

// RevokeGroupInvite answers POST /api/v1/instances/{instance_id}/groups/{group_id}/invite/revoke.
func (s *Server) RevokeGroupInvite(ctx context.Context, req gen.RevokeGroupInviteRequestObject) (gen.RevokeGroupInviteResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	invite, err := s.channels.GroupInvite(ctx, key.WorkspaceID, req.InstanceId, req.GroupId, true)
	if err != nil {
		return nil, err
	}
	return gen.RevokeGroupInvite200JSONResponse{Body: gen.GroupInvite{Object: gen.GroupInviteObjectGroupInvite,
		GroupId: req.GroupId, Invite: invite}}, nil
}

// JoinGroup answers POST /api/v1/instances/{instance_id}/groups/join.
func (s *Server) JoinGroup(ctx context.Context, req gen.JoinGroupRequestObject) (gen.JoinGroupResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	g, err := s.channels.JoinGroup(ctx, key.WorkspaceID, req.InstanceId, req.Body.Invite)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.GroupAPI(ctx, s.db.Reader(), g)
	if err != nil {
		return nil, err
	}
	return gen.JoinGroup200JSONResponse{Body: api}, nil
}

// LeaveGroup answers POST /api/v1/instances/{instance_id}/groups/{group_id}/leave.
func (s *Server) LeaveGroup(ctx context.Context, req gen.LeaveGroupRequestObject) (gen.LeaveGroupResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.channels.LeaveGroup(ctx, key.WorkspaceID, req.InstanceId, req.GroupId); err != nil {
		return nil, err
	}
	return gen.LeaveGroup204Response{}, nil
}
