package store

import (
	"context"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// Contact is a person on an instance's network, with every address the network reported for them.
type Contact struct {
	bun.BaseModel `bun:"table:contacts,alias:ct"`

	ID          string     `bun:"id,pk"`
	WorkspaceID string     `bun:"workspace_id"`
	InstanceID  string     `bun:"instance_id"`
	DisplayName *string    `bun:"display_name"`
	OnNetwork   *bool      `bun:"on_network"`
	LookedUpAt  *time.Time `bun:"looked_up_at"`
	Blocked     bool       `bun:"blocked"`
	Presence    *string    `bun:"presence"`     // available, away, busy, unavailable; nil: never told
	LastSeenAt  *time.Time `bun:"last_seen_at"` // where the network tells
	// PersonID is the person of the workspace the contact is part of (see People); nil for a contact not reported
	// since people came. PersonManual: the user linked or split it, so shared addresses no longer move it.
	PersonID     *string `bun:"person_id"`
	PersonManual bool    `bun:"person_manual"`
	// PictureMediaID is the profile picture last fetched (nil: none shared, or never asked: see PictureFetchedAt),
	// PictureID the network's ID of it.
	PictureMediaID   *string    `bun:"picture_media_id"`
	PictureID        *string    `bun:"picture_id"`
	PictureFetchedAt *time.Time `bun:"picture_fetched_at"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`

	// Addresses are read from contact_addresses, oldest first.
	Addresses []string `bun:"-"`
}

type contactAddress struct {
	bun.BaseModel `bun:"table:contact_addresses,alias:ca"`

	InstanceID string `bun:"instance_id,pk"`
	Address    string `bun:"address,pk"`
	ContactID  string `bun:"contact_id"`
}

// Contacts is the repository of contacts and their addresses.
type Contacts struct {
	workspaceScoped[Contact]
}

// Resolve returns, inside tx, the one contact of an instance that holds any of addresses, creating it when none
// does and adding the addresses it lacks. When the addresses belong to several contacts (the network revealed that
// two of them are one person) they are merged into the oldest: its addresses gain the others', chats move to it
// and the others are deleted. changed reports whether anything was written. It returns no sentinel errors.
func (s *Contacts) Resolve(ctx context.Context, tx bun.IDB, workspaceID, instanceID string, addresses []string) (c Contact, changed bool, err error) {
	addresses = slices.Compact(slices.Sorted(slices.Values(addresses)))
	var owners []contactAddress
	if err := tx.NewSelect().Model(&owners).Where("ca.instance_id = ? AND ca.address IN (?)", instanceID, bun.In(addresses)).
		Scan(ctx); err != nil {
		return c, false, err
	}
	var ids []string
	for _, o := range owners {
		ids = append(ids, o.ContactID)
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	t := now()
	var absorbed []string // the people of contacts merged into c
	if len(ids) == 0 {
		c = Contact{ID: NewID("con"), WorkspaceID: workspaceID, InstanceID: instanceID, CreatedAt: t, UpdatedAt: t}
		if err := s.create(ctx, tx, &c); err != nil {
			return c, false, err
		}
		changed = true
	} else {
		if err := s.db.forUpdate(tx.NewSelect().Model(&c).Where("ct.id = ?", ids[0])).Scan(ctx); err != nil {
			return c, false, mapErr(err)
		}
		if others := ids[1:]; len(others) > 0 {
			if err := tx.NewSelect().Model((*Contact)(nil)).Column("person_id").
				Where("id IN (?) AND person_id IS NOT NULL", bun.In(others)).Scan(ctx, &absorbed); err != nil {
				return c, false, err
			}
			if _, err := tx.NewUpdate().Model((*contactAddress)(nil)).Set("contact_id = ?", c.ID).
				Where("contact_id IN (?)", bun.In(others)).Exec(ctx); err != nil {
				return c, false, err
			}
			if _, err := tx.NewUpdate().Model((*Chat)(nil)).Set("contact_id = ?", c.ID).
				Where("contact_id IN (?)", bun.In(others)).Exec(ctx); err != nil {
				return c, false, err
			}
			if _, err := tx.NewDelete().Model((*Contact)(nil)).Where("id IN (?)", bun.In(others)).Exec(ctx); err != nil {
				return c, false, err
			}
			changed = true
		}
	}
	known := map[string]bool{}
	for _, o := range owners {
		known[o.Address] = true
	}
	var missing []contactAddress
	for _, a := range addresses {
		if !known[a] {
			missing = append(missing, contactAddress{InstanceID: instanceID, Address: a, ContactID: c.ID})
		}
	}
	if len(missing) > 0 {
		if _, err := tx.NewInsert().Model(&missing).Exec(ctx); err != nil {
			return c, false, mapErr(err)
		}
		changed = true
	}
	if changed {
		c.UpdatedAt = t
		if err := s.Save(ctx, tx, &c); err != nil {
			return c, false, err
		}
	}
	if err := s.withAddresses(ctx, tx, []*Contact{&c}); err != nil {
		return c, false, err
	}
	// The person follows the addresses in the same transaction; a contact whose addresses did not change keeps it,
	// which spares the hot path of every inbound message a query. Contacts from before people get theirs here.
	if changed || c.PersonID == nil {
		return c, changed, s.group(ctx, tx, &c, c.PersonManual, absorbed)
	}
	return c, changed, nil
}

// Save writes a contact's own columns inside tx.
func (s *Contacts) Save(ctx context.Context, tx bun.IDB, c *Contact) error {
	c.UpdatedAt = now()
	res, err := tx.NewUpdate().Model(c).WherePK().Column("display_name", "on_network", "looked_up_at", "blocked", "presence", "last_seen_at",
		"updated_at").Exec(ctx)
	return expectOneRow(res, err)
}

// withAddresses fills in the addresses of contacts.
func (s *Contacts) withAddresses(ctx context.Context, db bun.IDB, cs []*Contact) error {
	if len(cs) == 0 {
		return nil
	}
	byID := map[string]*Contact{}
	var ids []string
	for _, c := range cs {
		c.Addresses = []string{}
		byID[c.ID] = c
		ids = append(ids, c.ID)
	}
	var rows []contactAddress
	if err := db.NewSelect().Model(&rows).Where("ca.contact_id IN (?)", bun.In(ids)).OrderExpr("ca.address").Scan(ctx); err != nil {
		return err
	}
	for _, r := range rows {
		byID[r.ContactID].Addresses = append(byID[r.ContactID].Addresses, r.Address)
	}
	return nil
}

// Get returns a contact of a workspace's instance with its addresses. Returns ErrNotFound if it is not there.
func (s *Contacts) Get(ctx context.Context, workspaceID, instanceID, id string) (Contact, error) {
	c, err := s.get(ctx, workspaceID, id)
	if err == nil && c.InstanceID != instanceID {
		return Contact{}, ErrNotFound
	}
	if err != nil {
		return c, err
	}
	return c, s.withAddresses(ctx, s.db.r, []*Contact{&c})
}

// Lock reads a contact of an instance inside tx for a change, with its addresses. Returns ErrNotFound if it is not
// the instance's.
func (s *Contacts) Lock(ctx context.Context, tx bun.IDB, instanceID, id string) (Contact, error) {
	var c Contact
	if err := s.db.forUpdate(tx.NewSelect().Model(&c).Where("ct.id = ? AND ct.instance_id = ?", id, instanceID)).Scan(ctx); err != nil {
		return c, mapErr(err)
	}
	return c, s.withAddresses(ctx, tx, []*Contact{&c})
}

// List returns a page of an instance's contacts (blocked or not, when blocked is set) and whether more follow. It
// returns no sentinel errors.
func (s *Contacts) List(ctx context.Context, workspaceID, instanceID string, blocked *bool, p Page) ([]Contact, bool, error) {
	cs, more, err := s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		q = q.Where("ct.instance_id = ?", instanceID)
		if blocked != nil {
			q = q.Where("ct.blocked = ?", *blocked)
		}
		return q
	})
	if err != nil {
		return nil, false, err
	}
	ptrs := make([]*Contact, len(cs))
	for i := range cs {
		ptrs[i] = &cs[i]
	}
	return cs, more, s.withAddresses(ctx, s.db.r, ptrs)
}

// Owners maps addresses of an instance to their contacts' IDs, on db (addresses of no contact are left out). It
// returns no sentinel errors.
func (s *Contacts) Owners(ctx context.Context, db bun.IDB, instanceID string, addresses []string) (map[string]string, error) {
	out := map[string]string{}
	if len(addresses) == 0 {
		return out, nil
	}
	// With parameters (see execParams): every message and chat event reads the owners of its addresses.
	cond, arg := s.db.oneOfParam("ca.address", addresses)
	rows, err := selectParams[contactAddress](ctx, s.db, db, "SELECT "+columnsOf[contactAddress](s.db, "ca")+
		" FROM contact_addresses AS ca WHERE ca.instance_id = ? AND "+cond, instanceID, arg)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.Address] = r.ContactID
	}
	return out, nil
}

// ChatGroup is a group an instance is (or was) a participant of.
type ChatGroup struct {
	bun.BaseModel `bun:"table:chat_groups,alias:g"`

	ID           string        `bun:"id,pk"`
	WorkspaceID  string        `bun:"workspace_id"`
	InstanceID   string        `bun:"instance_id"`
	Address      string        `bun:"address"`
	Subject      string        `bun:"subject"`
	Description  string        `bun:"description"`
	Participants []Participant `bun:"participants,type:json"`
	// Community marks a community's parent group (listed read-only); CommunityAddress names the community a group
	// belongs to.
	Community        bool    `bun:"community"`
	CommunityAddress *string `bun:"community_address"`
	// SettingsSend and SettingsEditInfo say who may send and who may edit the group's info ("all" or "admins"; nil:
	// the network has not said).
	SettingsSend     *string `bun:"settings_send"`
	SettingsEditInfo *string `bun:"settings_edit_info"`
	// The group's picture as last fetched or set: the media file (nil: none), the network's ID of it and when.
	// Upsert leaves them alone: only SetPicture writes them.
	PictureMediaID   *string    `bun:"picture_media_id"`
	PictureID        *string    `bun:"picture_id"`
	PictureFetchedAt *time.Time `bun:"picture_fetched_at"`
	LeftAt           *time.Time `bun:"left_at"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

// Participant is a member of a group.
type Participant struct {
	Address     string `json:"address"`
	DisplayName string `json:"display_name,omitempty"`
	Role        string `json:"role"`
}

// Groups is the repository of groups.
type Groups struct {
	workspaceScoped[ChatGroup]
}

// ByAddress reads, for a change inside tx, an instance's group with an address. Returns ErrNotFound if there is
// none.
func (s *Groups) ByAddress(ctx context.Context, tx bun.IDB, instanceID, address string) (ChatGroup, error) {
	var g ChatGroup
	err := s.db.forUpdate(tx.NewSelect().Model(&g).Where("g.instance_id = ? AND g.address = ?", instanceID, address)).Scan(ctx)
	return g, mapErr(err)
}

// Upsert inserts a group inside tx (giving it its ID and times) or, when the instance has one with its address,
// writes it over that one, which keeps its ID, its picture and, when g has none, its settings (a network that lists
// groups without them has not changed them). It returns no sentinel errors.
func (s *Groups) Upsert(ctx context.Context, tx bun.IDB, g *ChatGroup) (created bool, err error) {
	old, err := s.ByAddress(ctx, tx, g.InstanceID, g.Address)
	t := now()
	switch {
	case err == ErrNotFound:
		g.ID, g.CreatedAt, g.UpdatedAt = NewID("grp"), t, t
		return true, s.create(ctx, tx, g)
	case err != nil:
		return false, err
	}
	g.ID, g.CreatedAt, g.UpdatedAt = old.ID, old.CreatedAt, t
	if g.SettingsSend == nil && g.SettingsEditInfo == nil {
		g.SettingsSend, g.SettingsEditInfo = old.SettingsSend, old.SettingsEditInfo
	}
	g.PictureMediaID, g.PictureID, g.PictureFetchedAt = old.PictureMediaID, old.PictureID, old.PictureFetchedAt
	res, err := tx.NewUpdate().Model(g).WherePK().ExcludeColumn("id", "workspace_id", "instance_id", "created_at",
		"picture_media_id", "picture_id", "picture_fetched_at").Exec(ctx)
	return false, expectOneRow(res, err)
}

// SetPicture records, inside tx, a group's picture as the network answered or as it was set at a time.
func (s *Groups) SetPicture(ctx context.Context, tx bun.IDB, id string, mediaID, pictureID *string, at time.Time) error {
	res, err := tx.NewUpdate().Table("chat_groups").Set("picture_media_id = ?", mediaID).Set("picture_id = ?", pictureID).
		Set("picture_fetched_at = ?", at).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}

// Get returns a group of a workspace's instance. Returns ErrNotFound if it is not there.
func (s *Groups) Get(ctx context.Context, workspaceID, instanceID, id string) (ChatGroup, error) {
	g, err := s.get(ctx, workspaceID, id)
	if err == nil && g.InstanceID != instanceID {
		return ChatGroup{}, ErrNotFound
	}
	return g, err
}

// List returns a page of the groups an instance is a participant of, and whether more follow. It returns no
// sentinel errors.
func (s *Groups) List(ctx context.Context, workspaceID, instanceID string, p Page) ([]ChatGroup, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("g.instance_id = ? AND g.left_at IS NULL", instanceID)
	})
}

// SetPicture records, inside tx, what the network answered for a contact's profile picture at a time.
func (s *Contacts) SetPicture(ctx context.Context, tx bun.IDB, id string, mediaID, pictureID *string, at time.Time) error {
	res, err := tx.NewUpdate().Table("contacts").Set("picture_media_id = ?", mediaID).Set("picture_id = ?", pictureID).
		Set("picture_fetched_at = ?", at).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}
