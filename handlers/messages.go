package handlers

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

func messageLocation(instanceID, id string) *string {
	loc := "/api/v1/instances/" + instanceID + "/messages/" + id
	return &loc
}

// SendMessage answers POST /api/v1/instances/{instance_id}/messages: 202 with the queued message, or 200 with the
// message a known client_message_id names.
func (s *Server) SendMessage(ctx context.Context, req gen.SendMessageRequestObject) (gen.SendMessageResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, created, err := s.channels.Send(ctx, key.WorkspaceID, req.InstanceId, draftOf(*req.Body))
	if err != nil {
		return nil, err
	}
	api, err := s.channels.MessageAPI(ctx, s.db.Reader(), m)
	if err != nil {
		return nil, err
	}
	if !created {
		return gen.SendMessage200JSONResponse{Body: api}, nil
	}
	return gen.SendMessage202JSONResponse{Body: api,
		Headers: gen.SendMessage202ResponseHeaders{Location: messageLocation(req.InstanceId, m.ID)}}, nil
}

// draftOf is the service's MessageDraft of the API's MessageCreate.
func draftOf(in gen.MessageCreate) channels.MessageDraft {
	d := channels.MessageDraft{Type: channels.MessageType(in.Type), To: in.To, ChatID: in.ChatId,
		ClientMessageID: in.ClientMessageId, ReplyToMessageID: in.ReplyToMessageId, TargetMessageID: in.TargetMessageId,
		Text: in.Text, Emoji: in.Emoji, Metadata: deref(in.Metadata)}
	if m := in.Media; m != nil {
		d.Media = &channels.MediaInput{MediaID: m.MediaId, URL: m.Url, Caption: m.Caption, Filename: m.Filename}
	}
	if l := in.Location; l != nil {
		d.Location = &store.Location{Latitude: l.Latitude, Longitude: l.Longitude, Name: deref(l.Name),
			Address: deref(l.Address)}
	}
	if c := in.Contact; c != nil {
		d.Contact = &store.ContactCard{Name: c.Name, Phones: c.Phones}
	}
	if t := in.Template; t != nil {
		d.Template = &store.MessageTemplate{Name: t.Name, Language: t.Language, Parameters: deref(t.Parameters),
			Components: deref(t.Components)}
	}
	if p := in.Poll; p != nil {
		d.Poll = &store.MessagePoll{Question: p.Question, Options: p.Options, MultipleChoice: deref(p.MultipleChoice)}
	}
	return d
}

// ListMessages answers GET /api/v1/instances/{instance_id}/messages.
func (s *Server) ListMessages(ctx context.Context, req gen.ListMessagesRequestObject) (gen.ListMessagesResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	page, err := pageFrom(q.Limit, q.Cursor, "msg_", false)
	if err != nil {
		return nil, err
	}
	f := store.MessageFilter{ChatID: deref(q.ChatId), Direction: string(deref(q.Direction)), Status: string(deref(q.Status)),
		RouteID: deref(q.RouteId)}
	rows, more, err := s.channels.ListMessages(ctx, key.WorkspaceID, req.InstanceId, f, page)
	if err != nil {
		return nil, err
	}
	apis, err := s.channels.MessagesAPI(ctx, s.db.Reader(), rows)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(apis, more, page, func(m gen.Message) string { return m.Id },
		func(m gen.Message) (gen.Message, error) { return m, nil })
	if err != nil {
		return nil, err
	}
	return gen.ListMessages200JSONResponse{Body: gen.MessageList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetMessage answers GET /api/v1/instances/{instance_id}/messages/{message_id}.
func (s *Server) GetMessage(ctx context.Context, req gen.GetMessageRequestObject) (gen.GetMessageResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.channels.GetMessage(ctx, key.WorkspaceID, req.InstanceId, req.MessageId)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.MessageAPI(ctx, s.db.Reader(), m)
	if err != nil {
		return nil, err
	}
	return gen.GetMessage200JSONResponse{Body: api}, nil
}

// CancelMessage answers POST /api/v1/instances/{instance_id}/messages/{message_id}/cancel.
func (s *Server) CancelMessage(ctx context.Context, req gen.CancelMessageRequestObject) (gen.CancelMessageResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.channels.Cancel(ctx, key.WorkspaceID, req.InstanceId, req.MessageId)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.MessageAPI(ctx, s.db.Reader(), m)
	if err != nil {
		return nil, err
	}
	return gen.CancelMessage200JSONResponse{Body: api}, nil
}

// GetSendQueue answers GET /api/v1/instances/{instance_id}/queue.
func (s *Server) GetSendQueue(ctx context.Context, req gen.GetSendQueueRequestObject) (gen.GetSendQueueResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.channels.QueueStats(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.GetSendQueue200JSONResponse{Body: gen.SendQueue{Object: gen.SendQueueObjectSendQueue,
		InstanceId: req.InstanceId, Depth: st.Depth, InFlight: st.InFlight, OldestQueuedAt: st.Oldest,
		RatePerMinute: st.Rate, Burst: st.Burst}}, nil
}

// PurgeSendQueue answers DELETE /api/v1/instances/{instance_id}/queue.
func (s *Server) PurgeSendQueue(ctx context.Context, req gen.PurgeSendQueueRequestObject) (gen.PurgeSendQueueResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := s.channels.Purge(ctx, key.WorkspaceID, req.InstanceId)
	if err != nil {
		return nil, err
	}
	return gen.PurgeSendQueue200JSONResponse{Body: gen.SendQueuePurge{Object: gen.SendQueuePurgeObjectSendQueuePurge,
		InstanceId: req.InstanceId, Canceled: len(ids), MessageIds: ids}}, nil
}

// RequestPairingCode answers POST /api/v1/instances/{instance_id}/pairing-code.
func (s *Server) RequestPairingCode(ctx context.Context, req gen.RequestPairingCodeRequestObject) (gen.RequestPairingCodeResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	code, err := s.channels.PairingCode(ctx, key.WorkspaceID, req.InstanceId, req.Body.Phone)
	if err != nil {
		return nil, err
	}
	return gen.RequestPairingCode200JSONResponse{Body: gen.PairingCode{Object: gen.PairingCodeObjectPairingCode,
		InstanceId: req.InstanceId, Code: code}}, nil
}

// ListChats answers GET /api/v1/instances/{instance_id}/chats.
func (s *Server) ListChats(ctx context.Context, req gen.ListChatsRequestObject) (gen.ListChatsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	page, err := pageFrom(q.Limit, q.Cursor, "cht_", false)
	if err != nil {
		return nil, err
	}
	rows, more, err := s.channels.ListChats(ctx, key.WorkspaceID, req.InstanceId, store.ChatFilter{Unread: q.Unread,
		Archived: q.Archived, Pinned: q.Pinned, Muted: q.Muted, Label: deref(q.Label)}, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(c store.Chat) string { return c.ID },
		func(c store.Chat) (gen.Chat, error) { return s.channels.LabelledChatAPI(ctx, s.db.Reader(), c) })
	if err != nil {
		return nil, err
	}
	return gen.ListChats200JSONResponse{Body: gen.ChatList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetChat answers GET /api/v1/instances/{instance_id}/chats/{chat_id}.
func (s *Server) GetChat(ctx context.Context, req gen.GetChatRequestObject) (gen.GetChatResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.channels.GetChat(ctx, key.WorkspaceID, req.InstanceId, req.ChatId)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.LabelledChatAPI(ctx, s.db.Reader(), c)
	if err != nil {
		return nil, err
	}
	return gen.GetChat200JSONResponse{Body: api}, nil
}

// UpdateChat answers PATCH /api/v1/instances/{instance_id}/chats/{chat_id}.
func (s *Server) UpdateChat(ctx context.Context, req gen.UpdateChatRequestObject) (gen.UpdateChatResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b := req.Body
	o := channels.ChatOrganization{Archived: b.Archived, Pinned: b.Pinned, Muted: b.Muted}
	if b.MutedUntil != nil {
		o.MutedUntil = *b.MutedUntil
	}
	c, err := s.channels.OrganizeChat(ctx, key.WorkspaceID, req.InstanceId, req.ChatId, o)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.LabelledChatAPI(ctx, s.db.Reader(), c)
	if err != nil {
		return nil, err
	}
	return gen.UpdateChat200JSONResponse{Body: api}, nil
}

// MarkChatRead answers POST /api/v1/instances/{instance_id}/chats/{chat_id}/read.
func (s *Server) MarkChatRead(ctx context.Context, req gen.MarkChatReadRequestObject) (gen.MarkChatReadResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.channels.MarkRead(ctx, key.WorkspaceID, req.InstanceId, req.ChatId)
	if err != nil {
		return nil, err
	}
	api, err := s.channels.LabelledChatAPI(ctx, s.db.Reader(), c)
	if err != nil {
		return nil, err
	}
	return gen.MarkChatRead200JSONResponse{Body: api}, nil
}

// sandboxControl applies a test control and answers what was applied.
func (s *Server) sandboxControl(ctx context.Context, instanceID, kind string, c channels.Control) (gen.SandboxControl, error) {
	key, err := principal(ctx)
	if err != nil {
		return gen.SandboxControl{}, err
	}
	c.Kind = kind
	if err := s.channels.Control(ctx, key.WorkspaceID, instanceID, c); err != nil {
		return gen.SandboxControl{}, err
	}
	return gen.SandboxControl{Object: gen.SandboxControlObjectSandboxControl, InstanceId: instanceID,
		Control: gen.SandboxControlControl(kind)}, nil
}

// SandboxScan answers POST /api/v1/instances/{instance_id}/sandbox/scan.
func (s *Server) SandboxScan(ctx context.Context, req gen.SandboxScanRequestObject) (gen.SandboxScanResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "scan", channels.Control{})
	if err != nil {
		return nil, err
	}
	return gen.SandboxScan200JSONResponse{Body: out}, nil
}

// SandboxInbound answers POST /api/v1/instances/{instance_id}/sandbox/inbound.
func (s *Server) SandboxInbound(ctx context.Context, req gen.SandboxInboundRequestObject) (gen.SandboxInboundResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "inbound", channels.Control{From: req.Body.From, Text: req.Body.Text})
	if err != nil {
		return nil, err
	}
	return gen.SandboxInbound200JSONResponse{Body: out}, nil
}

// SandboxReceipt answers POST /api/v1/instances/{instance_id}/sandbox/receipts.
func (s *Server) SandboxReceipt(ctx context.Context, req gen.SandboxReceiptRequestObject) (gen.SandboxReceiptResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "receipt", channels.Control{MessageID: req.Body.MessageId,
		Status: string(req.Body.Status)})
	if err != nil {
		return nil, err
	}
	return gen.SandboxReceipt200JSONResponse{Body: out}, nil
}

// SandboxDisconnect answers POST /api/v1/instances/{instance_id}/sandbox/disconnect.
func (s *Server) SandboxDisconnect(ctx context.Context, req gen.SandboxDisconnectRequestObject) (gen.SandboxDisconnectResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "disconnect", channels.Control{})
	if err != nil {
		return nil, err
	}
	return gen.SandboxDisconnect200JSONResponse{Body: out}, nil
}

// SandboxLogout answers POST /api/v1/instances/{instance_id}/sandbox/logout.
func (s *Server) SandboxLogout(ctx context.Context, req gen.SandboxLogoutRequestObject) (gen.SandboxLogoutResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "logout", channels.Control{})
	if err != nil {
		return nil, err
	}
	return gen.SandboxLogout200JSONResponse{Body: out}, nil
}

// SandboxCall answers POST /api/v1/instances/{instance_id}/sandbox/calls.
func (s *Server) SandboxCall(ctx context.Context, req gen.SandboxCallRequestObject) (gen.SandboxCallResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "call", channels.Control{From: req.Body.From, Video: deref(req.Body.Video)})
	if err != nil {
		return nil, err
	}
	return gen.SandboxCall200JSONResponse{Body: out}, nil
}

// SandboxRestrict answers POST /api/v1/instances/{instance_id}/sandbox/restrict.
func (s *Server) SandboxRestrict(ctx context.Context, req gen.SandboxRestrictRequestObject) (gen.SandboxRestrictResponseObject, error) {
	out, err := s.sandboxControl(ctx, req.InstanceId, "restrict", channels.Control{
		Duration: time.Duration(req.Body.Seconds) * time.Second, Text: deref(req.Body.Reason)})
	if err != nil {
		return nil, err
	}
	return gen.SandboxRestrict200JSONResponse{Body: out}, nil
}

// SandboxFailSends answers POST /api/v1/instances/{instance_id}/sandbox/fail-sends.
func (s *Server) SandboxFailSends(ctx context.Context, req gen.SandboxFailSendsRequestObject) (gen.SandboxFailSendsResponseObject, error) {
	b := req.Body
	out, err := s.sandboxControl(ctx, req.InstanceId, "fail_sends", channels.Control{Count: b.Count,
		Failure: &channels.Failure{Code: b.Code, Detail: deref(b.Detail), Retryable: deref(b.Retryable)}})
	if err != nil {
		return nil, err
	}
	return gen.SandboxFailSends200JSONResponse{Body: out}, nil
}
