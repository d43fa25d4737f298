package handlers

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/channels"
)

// keyScope is the instances whose contacts a key sees in a person: nil (every instance) unless it is limited.
func keyScope(key apikey.Key) []string {
	if key.Limited() {
		return key.InstanceIDs
	}
	return nil
}

// personAPI is the API's Person: every address of its contacts and the contacts with their providers.
func personAPI(p channels.Person) gen.Person {
	out := gen.Person{Id: p.ID, Object: gen.PersonObjectPerson, Addresses: p.Addresses(), Contacts: []gen.PersonContact{},
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	for _, c := range p.Contacts {
		out.Contacts = append(out.Contacts, gen.PersonContact{Provider: c.Provider, Contact: channels.ContactAPI(c.Contact)})
	}
	return out
}

// ListPeople answers GET /api/v1/people.
func (s *Server) ListPeople(ctx context.Context, req gen.ListPeopleRequestObject) (gen.ListPeopleResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	page, err := pageFrom(req.Params.Limit, req.Params.Cursor, "per_", false)
	if err != nil {
		return nil, err
	}
	var address string
	if req.Params.Address != nil {
		address = *req.Params.Address
	}
	rows, more, err := s.channels.ListPeople(ctx, key.WorkspaceID, address, keyScope(key), page)
	if err != nil {
		return nil, err
	}
	data, next, err := listPage(rows, more, page, func(p channels.Person) string { return p.ID },
		func(p channels.Person) (gen.Person, error) { return personAPI(p), nil })
	if err != nil {
		return nil, err
	}
	return gen.ListPeople200JSONResponse{Body: gen.PersonList{Object: "list", Data: data, HasMore: more, NextCursor: next}}, nil
}

// GetPerson answers GET /api/v1/people/{person_id}.
func (s *Server) GetPerson(ctx context.Context, req gen.GetPersonRequestObject) (gen.GetPersonResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.GetPerson(ctx, key.WorkspaceID, req.PersonId, keyScope(key))
	if err != nil {
		return nil, err
	}
	return gen.GetPerson200JSONResponse{Body: personAPI(p)}, nil
}

// LinkPerson answers POST /api/v1/people/{person_id}/links.
func (s *Server) LinkPerson(ctx context.Context, req gen.LinkPersonRequestObject) (gen.LinkPersonResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.LinkPerson(ctx, key.WorkspaceID, req.PersonId, req.Body.ContactId, keyScope(key))
	if err != nil {
		return nil, err
	}
	return gen.LinkPerson200JSONResponse{Body: personAPI(p)}, nil
}

// UnlinkPerson answers DELETE /api/v1/people/{person_id}/links/{contact_id}.
func (s *Server) UnlinkPerson(ctx context.Context, req gen.UnlinkPersonRequestObject) (gen.UnlinkPersonResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.channels.UnlinkPerson(ctx, key.WorkspaceID, req.PersonId, req.ContactId, keyScope(key))
	if err != nil {
		return nil, err
	}
	return gen.UnlinkPerson200JSONResponse{Body: personAPI(p)}, nil
}
