package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// ListContacts answers GET /api/v1/instances/{instance_id}/contacts.
func (s *Server) ListContacts(ctx context.Context, req gen.ListContactsRequestObject) (gen.ListContactsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "con_", false)
	if err != nil {
		return nil, err
	}
	rows, more, err := s.channels.ListContacts(ctx, key.WorkspaceID, req.InstanceId, req.Params.Blocked, page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(c store.Contact) string { return c.ID },
		func(c store.Contact) (gen.Contact, error) { return channels.ContactAPI(c), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListContacts200JSONResponse{Body: gen.ContactList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetContact answers GET /api/v1/instances/{instance_id}/contacts/{contact_id}.
func (s *Server) GetContact(ctx context.Context, req gen.GetContactRequestObject) (gen.GetContactResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.channels.GetContact(ctx, key.WorkspaceID, req.InstanceId, req.ContactId)
	if err != nil {
		return nil, err
	}
	return gen.GetContact200JSONResponse{Body: channels.ContactAPI(c)}, nil
}

// LookupContacts answers POST /api/v1/instances/{instance_id}/contacts/lookup.
func (s *Server) LookupContacts(ctx context.Context, req gen.LookupContactsRequestObject) (gen.LookupContactsResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	answers, err := s.channels.Lookup(ctx, key.WorkspaceID, req.InstanceId, req.Body.Addresses)
	if err != nil {
		return nil, err
	}
	out := gen.ContactLookupResult{Object: "list", Data: make([]gen.ContactLookupItem, len(answers))}
	for i, a := range answers {
		out.Data[i] = gen.ContactLookupItem{Address: a.Address, Normalized: a.Normalized, OnNetwork: a.OnNetwork}
		if a.Contact != nil {
			c := channels.ContactAPI(*a.Contact)
			out.Data[i].Contact = &c
		}
	}
	return gen.LookupContacts200JSONResponse{Body: out}, nil
}

// BlockContact answers POST /api/v1/instances/{instance_id}/contacts/{contact_id}/block.
func (s *Server) BlockContact(ctx context.Context, req gen.BlockContactRequestObject) (gen.BlockContactResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.channels.Block(ctx, key.WorkspaceID, req.InstanceId, req.ContactId, true)
	if err != nil {
		return nil, err
	}
	return gen.BlockContact200JSONResponse{Body: channels.ContactAPI(c)}, nil
}

// UnblockContact answers POST /api/v1/instances/{instance_id}/contacts/{contact_id}/unblock.
func (s *Server) UnblockContact(ctx context.Context, req gen.UnblockContactRequestObject) (gen.UnblockContactResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.channels.Block(ctx, key.WorkspaceID, req.InstanceId, req.ContactId, false)
	if err != nil {
		return nil, err
	}
	return gen.UnblockContact200JSONResponse{Body: channels.ContactAPI(c)}, nil
}
