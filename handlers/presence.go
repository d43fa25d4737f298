package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
)

// SendChatPresence answers POST /api/v1/instances/{instance_id}/chats/{chat_id}/presence.
func (s *Server) SendChatPresence(ctx context.Context, req gen.SendChatPresenceRequestObject) (gen.SendChatPresenceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.channels.SendChatPresence(ctx, key.WorkspaceID, req.InstanceId, req.ChatId, string(req.Body.State)); err != nil {
		return nil, err
	}
	return gen.SendChatPresence200JSONResponse{Body: gen.ChatPresence{Object: gen.ChatPresenceObjectChatPresence,
		InstanceId: req.InstanceId, ChatId: req.ChatId, State: req.Body.State}}, nil
}

// SetInstancePresence answers PUT /api/v1/instances/{instance_id}/presence.
func (s *Server) SetInstancePresence(ctx context.Context, req gen.SetInstancePresenceRequestObject) (gen.SetInstancePresenceResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	available := req.Body.Availability == gen.AvailabilityAvailable
	if err := s.channels.SetPresence(ctx, key.WorkspaceID, req.InstanceId, available); err != nil {
		return nil, err
	}
	return gen.SetInstancePresence200JSONResponse{Body: gen.InstancePresence{
		Object: gen.InstancePresenceObjectInstancePresence, InstanceId: req.InstanceId,
		Availability: req.Body.Availability}}, nil
}

// SandboxPollVote answers POST /api/v1/instances/{instance_id}/sandbox/poll-votes.
func (s *Server) SandboxPollVote(ctx context.Context, req gen.SandboxPollVoteRequestObject) (gen.SandboxPollVoteResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "poll_vote", channels.Control{MessageID: req.Body.MessageId,
		Options: req.Body.Options})
	if err != nil {
		return nil, err
	}
	return gen.SandboxPollVote200JSONResponse{Body: out}, nil
}
