package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// labelAPI is the API's Label.
func labelAPI(l store.Label) gen.Label {
	return gen.Label{Id: l.ID, Object: gen.LabelObjectLabel, InstanceId: l.InstanceID, Name: l.Name, Color: l.Color,
		CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// ListLabels answers GET /api/v1/instances/{instance_id}/labels.
func (s *Server) ListLabels(ctx context.Context, req gen.ListLabelsRequestObject) (gen.ListLabelsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "lbl_", false)
	if err != nil {
		return nil, err
	}
	rows, more, err := s.channels.ListLabels(ctx, key.WorkspaceID, req.InstanceId, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(l store.Label) string { return l.ID },
		func(l store.Label) (gen.Label, error) { return labelAPI(l), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListLabels200JSONResponse{Body: gen.LabelList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// CreateLabel answers POST /api/v1/instances/{instance_id}/labels.
func (s *Server) CreateLabel(ctx context.Context, req gen.CreateLabelRequestObject) (gen.CreateLabelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	color := 0
	if req.Body.Color != nil {
		color = *req.Body.Color
	}
	l, err := s.channels.CreateLabel(ctx, key.WorkspaceID, req.InstanceId, req.Body.Name, color)
	if err != nil {
		return nil, err
	}
	return gen.CreateLabel201JSONResponse{Body: labelAPI(l)}, nil
}

// GetLabel answers GET /api/v1/instances/{instance_id}/labels/{label_id}.
func (s *Server) GetLabel(ctx context.Context, req gen.GetLabelRequestObject) (gen.GetLabelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.channels.GetLabel(ctx, key.WorkspaceID, req.InstanceId, req.LabelId)
	if err != nil {
		return nil, err
	}
	return gen.GetLabel200JSONResponse{Body: labelAPI(l)}, nil
}

// UpdateLabel answers PATCH /api/v1/instances/{instance_id}/labels/{label_id}.
func (s *Server) UpdateLabel(ctx context.Context, req gen.UpdateLabelRequestObject) (gen.UpdateLabelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.channels.UpdateLabel(ctx, key.WorkspaceID, req.InstanceId, req.LabelId,
		channels.LabelChange{Name: req.Body.Name, Color: req.Body.Color})
	if err != nil {
		return nil, err
	}
	return gen.UpdateLabel200JSONResponse{Body: labelAPI(l)}, nil
}

// DeleteLabel answers DELETE /api/v1/instances/{instance_id}/labels/{label_id}.
func (s *Server) DeleteLabel(ctx context.Context, req gen.DeleteLabelRequestObject) (gen.DeleteLabelResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.channels.DeleteLabel(ctx, key.WorkspaceID, req.InstanceId, req.LabelId); err != nil {
		return nil, err
	}
	return gen.DeleteLabel204Response{}, nil
}

// LabelChat answers PUT /api/v1/instances/{instance_id}/chats/{chat_id}/labels/{label_id}.
func (s *Server) LabelChat(ctx context.Context, req gen.LabelChatRequestObject) (gen.LabelChatResponseObject, error) {
	api, err := s.labelChat(ctx, req.InstanceId, req.ChatId, req.LabelId, true)
	if err != nil {
		return nil, err
	}
	return gen.LabelChat200JSONResponse{Body: api}, nil
}

// UnlabelChat answers DELETE /api/v1/instances/{instance_id}/chats/{chat_id}/labels/{label_id}.
func (s *Server) UnlabelChat(ctx context.Context, req gen.UnlabelChatRequestObject) (gen.UnlabelChatResponseObject, error) {
	api, err := s.labelChat(ctx, req.InstanceId, req.ChatId, req.LabelId, false)
	if err != nil {
		return nil, err
	}
	return gen.UnlabelChat200JSONResponse{Body: api}, nil
}

func (s *Server) labelChat(ctx context.Context, instanceID, chatID, labelID string, on bool) (gen.Chat, error) {
	key, err := principal(ctx)
	if err != nil {
		return gen.Chat{}, err
	}
	c, err := s.channels.LabelChat(ctx, key.WorkspaceID, instanceID, chatID, labelID, on)
	if err != nil {
		return gen.Chat{}, err
	}
	return s.channels.LabelledChatAPI(ctx, s.db.Reader(), c)
}
