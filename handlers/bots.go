package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/bots"
	"github.com/switchboard/switchboard/store"
)

// ListBots answers GET /api/v1/instances/{instance_id}/bots.
func (s *Server) ListBots(ctx context.Context, req gen.ListBotsRequestObject) (gen.ListBotsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "bot_", false)
	if err != nil {
		return nil, err
	}
	rows, more, err := svc.List(ctx, key.WorkspaceID, req.InstanceId, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(b store.Bot) string { return b.ID }, bots.APIBot)
	if err != nil {
		return nil, err
	}
	return gen.ListBots200JSONResponse{Body: gen.BotList{Object: gen.BotListObjectList, Data: data, HasMore: more,
		NextCursor: next}}, nil
}

// CreateBot answers POST /api/v1/instances/{instance_id}/bots.
func (s *Server) CreateBot(ctx context.Context, req gen.CreateBotRequestObject) (gen.CreateBotResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	b, err := svc.Create(ctx, key.WorkspaceID, req.InstanceId, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateBot201JSONResponse{Body: b}, nil
}

// GetBot answers GET /api/v1/instances/{instance_id}/bots/{bot_id}.
func (s *Server) GetBot(ctx context.Context, req gen.GetBotRequestObject) (gen.GetBotResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	b, err := svc.Get(ctx, key.WorkspaceID, req.InstanceId, req.BotId)
	if err != nil {
		return nil, err
	}
	return gen.GetBot200JSONResponse{Body: b}, nil
}

// UpdateBot answers PATCH /api/v1/instances/{instance_id}/bots/{bot_id}.
func (s *Server) UpdateBot(ctx context.Context, req gen.UpdateBotRequestObject) (gen.UpdateBotResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	b, err := svc.Update(ctx, key.WorkspaceID, req.InstanceId, req.BotId, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateBot200JSONResponse{Body: b}, nil
}

// DeleteBot answers DELETE /api/v1/instances/{instance_id}/bots/{bot_id}.
func (s *Server) DeleteBot(ctx context.Context, req gen.DeleteBotRequestObject) (gen.DeleteBotResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	if err := svc.Delete(ctx, key.WorkspaceID, req.InstanceId, req.BotId); err != nil {
		return nil, err
	}
	return gen.DeleteBot204Response{}, nil
}

// ControlChatBot answers POST /api/v1/instances/{instance_id}/chats/{chat_id}/bot.
func (s *Server) ControlChatBot(ctx context.Context, req gen.ControlChatBotRequestObject) (gen.ControlChatBotResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	svc := s.cfg.Bots
	st, err := svc.Control(ctx, key.WorkspaceID, req.InstanceId, req.ChatId, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.ControlChatBot200JSONResponse{Body: st}, nil
}
