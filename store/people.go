package store

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// Person is one person across a workspace's instances: the contacts that share an address or were linked by hand.
type Person struct {
	bun.BaseModel `bun:"table:people,alias:per"`

	ID          string    `bun:"id,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// PersonContact is a contact of a person with the provider of its instance.
type PersonContact struct {
	Contact
	Provider string
}

// ErrReferenceNotFound is returned when a member of a request names an object that is not in the workspace.
var ErrReferenceNotFound = errors.New("store: reference not found")

// People is the repository of people.
type People struct {
	workspaceScoped[Person]
}

// e164 and bareJID are the addresses that name one person on any network: a phone number, an email-like JID.
// Network-local handles (a user name, a sandbox address) say nothing across networks, so they never group.
var (
	e164    = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
	bareJID = regexp.MustCompile(`^[^@/\s]+@[^@/\s]+$`)
)

// SharedAddress reports whether an address names the same person on every instance that knows it.
func SharedAddress(a string) bool { return e164.MatchString(a) || bareJID.MatchString(a) }

// group gives c, inside tx, the person of the workspace's contacts that share one of its addresses, merging the
// people it finds into the oldest (absorbed, when set, are the people of contacts just merged into c: the same
// person). A contact the user linked or split keeps its person. It returns no sentinel errors.
func (s *Contacts) group(ctx context.Context, tx bun.IDB, c *Contact, personManual bool, absorbed []string) error {
	ids := slices.Clone(absorbed)
	if c.PersonID != nil {
		ids = append(ids, *c.PersonID)
	}
	if !personManual {
		var shared []string
		for _, a := range c.Addresses {
			if SharedAddress(a) {
				shared = append(shared, a)
			}
		}
		if len(shared) > 0 {
			var found []string
			if err := tx.NewSelect().Model((*Contact)(nil)).ColumnExpr("DISTINCT ct.person_id").
				Join("JOIN contact_addresses AS ca ON ca.contact_id = ct.id").
				Where("ct.workspace_id = ? AND ca.address IN (?) AND ct.id <> ?", c.WorkspaceID, bun.In(shared), c.ID).
				Where("ct.person_id IS NOT NULL AND ct.person_manual = ?", false).Scan(ctx, &found); err != nil {
				return err
			}
			ids = append(ids, found...)
		}
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	t := now()
	if len(ids) == 0 {
		p := Person{ID: NewID("per"), WorkspaceID: c.WorkspaceID, CreatedAt: t, UpdatedAt: t}
		if err := insert(ctx, tx, &p); err != nil {
			return err
		}
		ids = []string{p.ID}
	}
	target := ids[0]
	if err := s.mergePeople(ctx, tx, target, ids[1:]); err != nil {
		return err
	}
	if c.PersonID == nil || *c.PersonID != target {
		c.PersonID = &target
		if _, err := tx.NewUpdate().Model((*Contact)(nil)).Set("person_id = ?", target).Where("id = ?", c.ID).
			Exec(ctx); err != nil {
			return err
		}
		return touchPerson(ctx, tx, target)
	}
	return nil
}

// mergePeople moves, inside tx, every contact of the people others to target and deletes others.
func (s *Contacts) mergePeople(ctx context.Context, tx bun.IDB, target string, others []string) error {
	if len(others) == 0 {
		return nil
	}
	if _, err := tx.NewUpdate().Model((*Contact)(nil)).Set("person_id = ?", target).
		Where("person_id IN (?)", bun.In(others)).Exec(ctx); err != nil {
		return err
	}
	if _, err := tx.NewDelete().Model((*Person)(nil)).Where("id IN (?)", bun.In(others)).Exec(ctx); err != nil {
		return err
	}
	return touchPerson(ctx, tx, target)
}

func touchPerson(ctx context.Context, tx bun.IDB, id string) error {
	_, err := tx.NewUpdate().Model((*Person)(nil)).Set("updated_at = ?", now()).Where("id = ?", id).Exec(ctx)
	return err
}

// visible narrows a query on contacts (alias ct) to the instances, when instanceIDs is not nil.
func visible(q *bun.SelectQuery, instanceIDs []string) *bun.SelectQuery {
	if instanceIDs != nil {
		q = q.Where("ct.instance_id IN (?)", bun.In(append([]string{""}, instanceIDs...)))
	}
	return q
}

// List returns a page of the workspace's people with a contact on one of instanceIDs (nil: any instance), only the
// one with a contact holding address when it is not empty, and whether more follow. It returns no sentinel errors.
func (s *People) List(ctx context.Context, workspaceID, address string, instanceIDs []string, p Page) ([]Person, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		sub := visible(s.db.r.NewSelect().Model((*Contact)(nil)).ColumnExpr("1").Where("ct.person_id = per.id"), instanceIDs)
		if address != "" {
			sub = sub.Where("EXISTS (SELECT 1 FROM contact_addresses AS ca WHERE ca.contact_id = ct.id AND ca.address = ?)",
				address)
		}
		return q.Where("EXISTS (?)", sub)
	})
}

// Get returns a person of the workspace with its contacts on instanceIDs (nil: every instance), oldest first.
// Returns ErrNotFound if it is not in the workspace or has no such contact.
func (s *People) Get(ctx context.Context, db bun.IDB, workspaceID, id string, instanceIDs []string) (Person, []PersonContact, error) {
	var p Person
	if err := inWorkspace(db.NewSelect().Model(&p), workspaceID, id).Scan(ctx); err != nil {
		return p, nil, mapErr(err)
	}
	got, err := s.Members(ctx, db, []string{id}, instanceIDs)
	if err != nil {
		return p, nil, err
	}
	if len(got[id]) == 0 {
		return p, nil, ErrNotFound
	}
	return p, got[id], nil
}

// Members maps people to their contacts on instanceIDs (nil: every instance), oldest first, with their addresses
// and providers. It returns no sentinel errors.
func (s *People) Members(ctx context.Context, db bun.IDB, ids, instanceIDs []string) (map[string][]PersonContact, error) {
	out := map[string][]PersonContact{}
	if len(ids) == 0 {
		return out, nil
	}
	var cs []Contact
	if err := visible(db.NewSelect().Model(&cs).Where("ct.person_id IN (?)", bun.In(ids)), instanceIDs).
		OrderExpr("ct.id").Scan(ctx); err != nil {
		return nil, err
	}
	ptrs := make([]*Contact, len(cs))
	var instances []string
	for i := range cs {
		ptrs[i] = &cs[i]
		instances = append(instances, cs[i].InstanceID)
	}
	if err := s.db.Contacts.withAddresses(ctx, db, ptrs); err != nil {
		return nil, err
	}
	providers := map[string]string{}
	if len(instances) > 0 {
		var rows []Instance
		if err := db.NewSelect().Model(&rows).Column("id", "provider").Where("id IN (?)", bun.In(instances)).
			Scan(ctx); err != nil {
			return nil, err
		}
		for _, r := range rows {
			providers[r.ID] = r.Provider
		}
	}
	for _, c := range cs {
		out[*c.PersonID] = append(out[*c.PersonID], PersonContact{Contact: c, Provider: providers[c.InstanceID]})
	}
	return out, nil
}

// Link merges, inside tx, the person of a workspace's contact into the person id and marks the contact as linked
// by hand. Returns ErrNotFound if the person is not in the workspace, and ErrReferenceNotFound if the contact is not
// (or is on none of instanceIDs, when that is not nil).
func (s *People) Link(ctx context.Context, tx bun.IDB, workspaceID, id, contactID string, instanceIDs []string) error {
	if _, err := s.lock(ctx, tx, workspaceID, id); err != nil {
		return err
	}
	c, err := s.member(ctx, tx, workspaceID, contactID, instanceIDs)
	if errors.Is(err, ErrNotFound) {
		return ErrReferenceNotFound
	} else if err != nil {
		return err
	}
	if c.PersonID != nil && *c.PersonID != id {
		if err := s.db.Contacts.mergePeople(ctx, tx, id, []string{*c.PersonID}); err != nil {
			return err
		}
	}
	_, err = tx.NewUpdate().Model((*Contact)(nil)).Set("person_id = ?, person_manual = ?", id, true).
		Where("id = ?", c.ID).Exec(ctx)
	if err != nil {
		return err
	}
	return touchPerson(ctx, tx, id)
}

// Unlink makes, inside tx, a contact of the person id its own person (unless it is alone in it already), marked as
// split by hand, and returns that person's ID. Returns ErrNotFound if the person or the contact (on one of
// instanceIDs, when that is not nil) is not the workspace's, or the contact is not the person's.
func (s *People) Unlink(ctx context.Context, tx bun.IDB, workspaceID, id, contactID string, instanceIDs []string) (string, error) {
	if _, err := s.lock(ctx, tx, workspaceID, id); err != nil {
		return "", err
	}
	c, err := s.member(ctx, tx, workspaceID, contactID, instanceIDs)
	if err != nil {
		return "", err
	}
	if c.PersonID == nil || *c.PersonID != id {
		return "", ErrNotFound
	}
	n, err := tx.NewSelect().Model((*Contact)(nil)).Where("ct.person_id = ?", id).Count(ctx)
	if err != nil {
		return "", err
	}
	target := id
	if n > 1 {
		t := now()
		p := Person{ID: NewID("per"), WorkspaceID: workspaceID, CreatedAt: t, UpdatedAt: t}
		if err := insert(ctx, tx, &p); err != nil {
			return "", err
		}
		target = p.ID
		if err := touchPerson(ctx, tx, id); err != nil {
			return "", err
		}
	}
	_, err = tx.NewUpdate().Model((*Contact)(nil)).Set("person_id = ?, person_manual = ?", target, true).
		Where("id = ?", c.ID).Exec(ctx)
	return target, err
}

// member reads a workspace's contact on one of instanceIDs (nil: any) inside tx. Returns ErrNotFound if there is
// none.
func (s *People) member(ctx context.Context, tx bun.IDB, workspaceID, contactID string, instanceIDs []string) (Contact, error) {
	var c Contact
	err := visible(tx.NewSelect().Model(&c).Where("ct.id = ? AND ct.workspace_id = ?", contactID, workspaceID), instanceIDs).
		Scan(ctx)
	return c, mapErr(err)
}
