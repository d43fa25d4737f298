package channels

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// DefaultLookupTTL is how long the answer of a contacts lookup is trusted before the network is asked again.
const DefaultLookupTTL = 24 * time.Hour

// resolve returns, inside tx, the one contact of a person on an instance (every address and ID the network
// reported for them), creating or merging contacts as needed, with their newest display name; a change emits
// contact.updated.
func (s *Recorder) resolve(ctx context.Context, tx store.Querier, inst store.Instance, p Party) (store.Contact, error) {
	c, changed, err := s.db.Contacts.Resolve(ctx, tx, inst.WorkspaceID, inst.ID, append([]string{p.Address}, p.IDs...))
	if err != nil {
		return c, err
	}
	if p.DisplayName != "" && deref(c.DisplayName) != p.DisplayName {
		c.DisplayName, changed = &p.DisplayName, true
		if err := s.db.Contacts.Save(ctx, tx, &c); err != nil {
			return c, err
		}
	}
	if changed {
		return c, s.emitContact(ctx, tx, c)
	}
	return c, nil
}

func (s *Recorder) emitContact(ctx context.Context, tx store.Querier, c store.Contact) error {
	return s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: c.WorkspaceID, InstanceID: c.InstanceID,
		Payload: gen.ContactUpdatedEvent{Contact: ContactAPI(c), InstanceId: c.InstanceID}})
}

// ContactAPI is the API's Contact of a stored contact.
func ContactAPI(c store.Contact) gen.Contact {
	out := gen.Contact{Id: c.ID, Object: gen.ContactObjectContact, InstanceId: c.InstanceID, DisplayName: c.DisplayName,
		Addresses: c.Addresses, OnNetwork: c.OnNetwork, Blocked: c.Blocked, LastSeenAt: c.LastSeenAt,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if c.Presence != nil {
		p := gen.ContactPresence(*c.Presence)
		out.Presence = &p
	}
	if out.Addresses == nil {
		out.Addresses = []string{}
	}
	return out
}

// GetContact returns a contact of a workspace's instance. Returns a NotFound problem if it is not there.
func (s *Service) GetContact(ctx context.Context, workspaceID, instanceID, id string) (store.Contact, error) {
	c, err := s.db.Contacts.Get(ctx, workspaceID, instanceID, id)
	return c, storeError(err, "contact", id)
}

// ListContacts returns a page of an instance's contacts and whether more follow. Returns a NotFound problem if the
// instance is not in the workspace.
func (s *Service) ListContacts(ctx context.Context, workspaceID, instanceID string, blocked *bool, p store.Page) ([]store.Contact, bool, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, false, err
	}
	return s.db.Contacts.List(ctx, workspaceID, instanceID, blocked, p)
}

// LookupAnswer is the answer for one address of a lookup.
type LookupAnswer struct {
	Address, Normalized string
	OnNetwork           bool
	Contact             *store.Contact
}

// Lookup tells for each address whether it is on the instance's network and makes a contact of each that is.
// Answers younger than the lookup TTL are served from the contacts without asking the network. Returns NotFound,
// CapabilityNotSupported, ValidationFailed for an address the network cannot have, and InstanceNotConnected.
func (s *Service) Lookup(ctx context.Context, workspaceID, instanceID string, addresses []string) ([]LookupAnswer, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, CapContactsLookup)
	if err != nil {
		return nil, err
	}
	var errs problem.Fields
	out := make([]LookupAnswer, len(addresses))
	for i, a := range addresses {
		n, err := p.NormalizeAddress(a)
		if err != nil {
			errs.Add(problem.Pointer("addresses", itoa(i)), err.Error())
		}
		out[i] = LookupAnswer{Address: a, Normalized: n}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	var ask []string
	owners, err := s.db.Contacts.Owners(ctx, s.db.Reader(), instanceID, normalized(out))
	if err != nil {
		return nil, err
	}
	cached := map[string]store.Contact{}
	for _, r := range out {
		if id, ok := owners[r.Normalized]; ok {
			if c, err := s.db.Contacts.Get(ctx, workspaceID, instanceID, id); err == nil && c.LookedUpAt != nil &&
				c.OnNetwork != nil && time.Since(*c.LookedUpAt) < s.lookupTTL {
				cached[r.Normalized] = c
				continue
			}
		}
		ask = append(ask, r.Normalized)
	}
	answers := map[string]LookupAnswer{}
	if len(ask) > 0 {
		found, err := call(ctx, s, inst, cmdContactsLookup, lookupArgs{Addresses: ask})
		if err != nil {
			return nil, err
		}
		err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
			now := micro(time.Now())
			for _, f := range found {
				key := f.Address
				if f.Normalized != "" {
					key = f.Normalized
				}
				r := LookupAnswer{Normalized: key, OnNetwork: f.OnNetwork}
				if f.OnNetwork {
					c, err := s.resolve(ctx, tx, inst, Party{Address: key, DisplayName: f.DisplayName, IDs: f.IDs})
					if err != nil {
						return err
					}
					on := true
					c.OnNetwork, c.LookedUpAt = &on, &now
					if err := s.db.Contacts.Save(ctx, tx, &c); err != nil {
						return err
					}
					r.Contact = &c
				}
				answers[f.Address] = r
				answers[key] = r
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i, r := range out {
		if c, ok := cached[r.Normalized]; ok {
			out[i].OnNetwork, out[i].Contact = *c.OnNetwork, &c
		} else if a, ok := answers[r.Normalized]; ok {
			out[i].OnNetwork, out[i].Contact = a.OnNetwork, a.Contact
		}
	}
	return out, nil
}

func normalized(rs []LookupAnswer) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Normalized
	}
	return out
}

// Block blocks (or unblocks) a contact on the network and records it, emitting contact.updated. Returns NotFound,
// CapabilityNotSupported and InstanceNotConnected.
func (s *Service) Block(ctx context.Context, workspaceID, instanceID, contactID string, blocked bool) (store.Contact, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapContactsBlock)
	if err != nil {
		return store.Contact{}, err
	}
	c, err := s.GetContact(ctx, workspaceID, instanceID, contactID)
	if err != nil {
		return c, err
	}
	if len(c.Addresses) == 0 {
		return c, problem.Errorf(problem.Conflict, "Contact %s has no address to block.", contactID)
	}
	if _, err := call(ctx, s, inst, cmdContactsBlock, blockArgs{Address: c.Addresses[0], Blocked: blocked}); err != nil {
		return c, err
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		c, err = s.db.Contacts.Lock(ctx, tx, instanceID, contactID)
		if err != nil {
			return err
		}
		if c.Blocked == blocked {
			return nil
		}
		c.Blocked = blocked
		if err := s.db.Contacts.Save(ctx, tx, &c); err != nil {
			return err
		}
		return s.emitContact(ctx, tx, c)
	})
	return c, storeError(err, "contact", contactID)
}

// capable returns an instance of the workspace and its provider when the provider has capability c. Returns a
// NotFound problem if the instance is not in the workspace and CapabilityNotSupported if the provider lacks c.
func (s *Service) capable(ctx context.Context, workspaceID, instanceID string, c Capability) (store.Instance, Provider, error) {
	inst, err := s.Get(ctx, workspaceID, instanceID)
	if err != nil {
		return inst, nil, err
	}
	p, ok := s.provider(inst.Provider)
	if !ok {
		return inst, nil, problem.Errorf(problem.Conflict, "The provider %q of this instance is not available on this server.", inst.Provider)
	}
	if c != "" && !p.Info().Has(c) {
		return inst, nil, notSupported(inst.Provider, c)
	}
	return inst, p, nil
}

// sessionError maps what a session call failed with to the problem a client is told.
func sessionError(inst store.Instance, err error) error {
	var f *Failure
	switch {
	case errors.Is(err, ErrNotConnected):
		return problem.Errorf(problem.InstanceNotConnected, "Instance %s has no live session now (it is %s); connect it first.", inst.ID, inst.Status)
	case errors.Is(err, ErrUnsupported):
		return problem.Errorf(problem.CapabilityNotSupported, "The %s provider's session cannot do this call.", inst.Provider)
	case errors.As(err, &f):
		switch f.Code {
		case string(problem.RecipientNotOnNetwork):
			return problem.New(problem.RecipientNotOnNetwork, f.Detail)
		case "not_connected":
			return problem.New(problem.InstanceNotConnected, f.Detail)
		case "restricted", "banned":
			return problem.New(problem.InstanceRestricted, f.Detail)
		case "invalid_address", "invalid_control", "invalid_argument", "invalid_invite", "invalid_name", "invalid_about",
			"invalid_settings", "unsupported_media", "media_too_large":
			return problem.Invalid("", f.Detail)
		case "not_found":
			return problem.New(problem.NotFound, f.Detail)
		}
		return problem.Errorf(problem.Conflict, "The network refused: %s (%s).", f.Detail, f.Code)
	}
	return err
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// Person is a person of the workspace with the contacts a key sees.
type Person struct {
	store.Person
	Contacts []store.PersonContact
}

// Addresses is every address of the person's contacts, sorted, each once.
func (p Person) Addresses() []string {
	out := []string{}
	for _, c := range p.Contacts {
		out = append(out, c.Addresses...)
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// ListPeople returns a page of the workspace's people with a contact on instanceIDs (nil: any), only the one with
// a contact holding address when it is not empty, and whether more follow.
func (s *Service) ListPeople(ctx context.Context, workspaceID, address string, instanceIDs []string, p store.Page) ([]Person, bool, error) {
	rows, more, err := s.db.People.List(ctx, workspaceID, address, instanceIDs, p)
	if err != nil {
		return nil, false, err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	members, err := s.db.People.Members(ctx, s.db.Reader(), ids, instanceIDs)
	if err != nil {
		return nil, false, err
	}
	out := make([]Person, len(rows))
	for i, r := range rows {
		out[i] = Person{Person: r, Contacts: members[r.ID]}
	}
	return out, more, nil
}

// GetPerson returns a person of the workspace with its contacts on instanceIDs (nil: every instance). Returns a
// NotFound problem if it is not the workspace's or has no contact there.
func (s *Service) GetPerson(ctx context.Context, workspaceID, id string, instanceIDs []string) (Person, error) {
	p, cs, err := s.db.People.Get(ctx, s.db.Reader(), workspaceID, id, instanceIDs)
	return Person{Person: p, Contacts: cs}, storeError(err, "person", id)
}

// LinkPerson merges the person of a contact into a person, by the user's hand. Returns NotFound for a person the
// key does not see and a ReferenceNotFound problem for a contact it does not.
func (s *Service) LinkPerson(ctx context.Context, workspaceID, id, contactID string, instanceIDs []string) (Person, error) {
	var out Person
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if _, _, err := s.db.People.Get(ctx, tx, workspaceID, id, instanceIDs); err != nil {
			return storeError(err, "person", id)
		}
		if err := s.db.People.Link(ctx, tx, workspaceID, id, contactID, instanceIDs); errors.Is(err, store.ErrReferenceNotFound) {
			e := problem.Errorf(problem.ReferenceNotFound, "There is no contact %s in this workspace.", contactID)
			e.Fields = []problem.Field{{Pointer: "/contact_id", Detail: "there is no such contact in this workspace"}}
			return e
		} else if err != nil {
			return storeError(err, "person", id)
		}
		p, cs, err := s.db.People.Get(ctx, tx, workspaceID, id, instanceIDs)
		out = Person{Person: p, Contacts: cs}
		return storeError(err, "person", id)
	})
	return out, err
}

// UnlinkPerson splits a contact off a person into its own, by the user's hand, and returns that person. Returns
// NotFound for a person or contact the key does not see, or a contact that is not the person's.
func (s *Service) UnlinkPerson(ctx context.Context, workspaceID, id, contactID string, instanceIDs []string) (Person, error) {
	var out Person
	err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if _, _, err := s.db.People.Get(ctx, tx, workspaceID, id, instanceIDs); err != nil {
			return storeError(err, "person", id)
		}
		own, err := s.db.People.Unlink(ctx, tx, workspaceID, id, contactID, instanceIDs)
		if err != nil {
			return storeError(err, "contact", contactID)
		}
		p, cs, err := s.db.People.Get(ctx, tx, workspaceID, own, instanceIDs)
		out = Person{Person: p, Contacts: cs}
		return storeError(err, "person", own)
	})
	return out, err
}
