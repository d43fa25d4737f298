package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Party is who a message is from or to, as stored: the contact is resolved from the address when it is read, so
// that merging two contacts of one person never leaves a message pointing at the one that went.
type Party struct {
	Address     string `json:"address"`
	DisplayName string `json:"display_name,omitempty"`
}

// MessageMedia is a message's attachment.
type MessageMedia struct {
	MediaID  string `json:"media_id"`
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type"`
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size"`
	Caption  string `json:"caption,omitempty"`
}

// Location is a point on the map.
type Location struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Name      string  `json:"name,omitempty"`
	Address   string  `json:"address,omitempty"`
}

// MessagePoll is a poll message's question and options, and each voter's current choice.
type MessagePoll struct {
	Question       string     `json:"question"`
	Options        []string   `json:"options"`
	MultipleChoice bool       `json:"multiple_choice,omitempty"`
	Votes          []PollVote `json:"votes,omitempty"`
}

// PollVote is a voter's current choice of a poll (no options: the vote was taken back).
type PollVote struct {
	Voter   Party     `json:"voter"`
	Options []int     `json:"options"`
	At      time.Time `json:"at"`
}

// ContactCard is a shared contact.
type ContactCard struct {
	Name   string   `json:"name"`
	Phones []string `json:"phones"`
}

// MessageTemplate is the template a template message was sent with.
type MessageTemplate struct {
	Name       string           `json:"name"`
	Language   string           `json:"language"`
	Parameters []string         `json:"parameters"`
	Components []map[string]any `json:"components,omitempty"`
}

// StatusChange is one step of a message's status history.
type StatusChange struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Failure is why a message failed.
type Failure struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Message is a message an instance sent or received.
type Message struct {
	bun.BaseModel `bun:"table:messages,alias:m"`

	ID                string           `bun:"id,pk"`
	WorkspaceID       string           `bun:"workspace_id"`
	InstanceID        string           `bun:"instance_id"`
	ChatID            string           `bun:"chat_id"`
	Direction         string           `bun:"direction"`
	From              Party            `bun:"from_party,type:json"`
	To                Party            `bun:"to_party,type:json"`
	Type              string           `bun:"type"`
	Text              *string          `bun:"text"`
	Media             *MessageMedia    `bun:"media,type:json"`
	Location          *Location        `bun:"location,type:json"`
	Contact           *ContactCard     `bun:"contact,type:json"`
	Template          *MessageTemplate `bun:"template,type:json"`
	Poll              *MessagePoll     `bun:"poll,type:json"`
	ReplyToMessageID  *string          `bun:"reply_to_message_id"`
	TargetMessageID   *string          `bun:"target_message_id"`
	Emoji             *string          `bun:"emoji"`
	ProviderMessageID *string          `bun:"provider_message_id"`
	ClientMessageID   *string          `bun:"client_message_id"`
	// RouteID is the route this message is an attempt of (nil for other messages).
	RouteID       *string        `bun:"route_id"`
	Status        string         `bun:"status"`
	StatusHistory []StatusChange `bun:"status_history,type:json"`
	Failure       *Failure       `bun:"failure,type:json"`
	Metadata      map[string]any `bun:"metadata,type:json"`
	CreatedAt     time.Time      `bun:"created_at"`
	UpdatedAt     time.Time      `bun:"updated_at"`
}

// Messages is the repository of messages.
type Messages struct {
	workspaceScoped[Message]
}

// Create inserts a message inside tx (its ID given by the caller), stamping its times. Returns ErrConflict if the
// instance has a message with its client_message_id already.
func (s *Messages) Create(ctx context.Context, tx bun.IDB, m *Message) error {
	t := now()
	m.CreatedAt, m.UpdatedAt = t, t
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	// With parameters (see insertRows): every accepted send inserts one.
	return insertParams(ctx, s.db, tx, []Message{*m})
}

// CreateMany inserts messages inside tx (their IDs given by the caller), stamping the times of
// those without a creation time. Returns ErrConflict if the instance has a message with one's client_message_id
// already.
func (s *Messages) CreateMany(ctx context.Context, tx bun.IDB, ms []Message) error {
	if len(ms) == 0 {
		return nil
	}
	t := now()
	for i := range ms {
		if ms[i].CreatedAt.IsZero() {
			ms[i].CreatedAt = t
		}
		ms[i].UpdatedAt = ms[i].CreatedAt
		if ms[i].Metadata == nil {
			ms[i].Metadata = map[string]any{}
		}
	}
	// With parameters (see insertRows): every run of inbound messages inserts them.
	return insertParams(ctx, s.db, tx, ms)
}

// Get returns a message of a workspace's instance. Returns ErrNotFound if it is not there.
func (s *Messages) Get(ctx context.Context, workspaceID, instanceID, id string) (Message, error) {
	m, err := s.get(ctx, workspaceID, id)
	if err == nil && m.InstanceID != instanceID {
		return Message{}, ErrNotFound
	}
	return m, err
}

// ByID reads a message whatever its workspace, on db. Returns ErrNotFound if there is none.
func (s *Messages) ByID(ctx context.Context, db bun.IDB, id string) (Message, error) {
	// With a parameter (see execParams): the send queue reads every message it sends.
	return selectOneParams[Message](ctx, s.db, db, "SELECT "+columnsOf[Message](s.db, "m")+" FROM messages AS m WHERE m.id = ?", id)
}

// Lock reads a message inside tx for a change. Returns ErrNotFound if there is none.
func (s *Messages) Lock(ctx context.Context, tx bun.IDB, id string) (Message, error) {
	var m Message
	err := s.db.forUpdate(tx.NewSelect().Model(&m).Where("m.id = ?", id)).Scan(ctx)
	return m, mapErr(err)
}

// LockMany reads the messages among ids inside tx for a change, in ID order (those that do not exist are left
// out). It returns no sentinel errors.
func (s *Messages) LockMany(ctx context.Context, tx bun.IDB, ids []string) ([]Message, error) {
	if len(ids) == 0 {
		return []Message{}, nil
	}
	// With parameters (see execParams): every claim and every recorded send moves a batch of messages.
	cond, arg := s.db.oneOfParam("m.id", ids)
	return selectParams[Message](ctx, s.db, tx, "SELECT "+columnsOf[Message](s.db, "m")+" FROM messages AS m WHERE "+cond+
		" ORDER BY m.id"+s.db.forUpdateSQL(), arg)
}

// ByClientID reads an instance's message by its client_message_id on db. Returns ErrNotFound if there is none.
func (s *Messages) ByClientID(ctx context.Context, db bun.IDB, instanceID, clientID string) (Message, error) {
	var m Message
	err := db.NewSelect().Model(&m).Where("m.instance_id = ? AND m.client_message_id = ?", instanceID, clientID).Scan(ctx)
	return m, mapErr(err)
}

// ByProviderID reads, for a change inside tx, an instance's message by the network's ID. Returns ErrNotFound if
// there is none.
func (s *Messages) ByProviderID(ctx context.Context, tx bun.IDB, instanceID, providerID string) (Message, error) {
	var m Message
	err := s.db.forUpdate(tx.NewSelect().Model(&m).
		Where("m.instance_id = ? AND m.provider_message_id = ?", instanceID, providerID).Limit(1)).Scan(ctx)
	return m, mapErr(err)
}

// SetProviderPollID records, inside tx, the network's own ID of a poll message (a network that names votes by the
// poll rather than by its message, as Telegram does).
func (s *Messages) SetProviderPollID(ctx context.Context, tx bun.IDB, id, pollID string) error {
	res, err := tx.NewUpdate().Table("messages").Set("provider_poll_id = ?", pollID).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}

// ByProviderPollID reads, for a change inside tx, an instance's poll message by the network's ID of the poll.
// Returns ErrNotFound if there is none.
func (s *Messages) ByProviderPollID(ctx context.Context, tx bun.IDB, instanceID, pollID string) (Message, error) {
	var m Message
	err := s.db.forUpdate(tx.NewSelect().Model(&m).
		Where("m.instance_id = ? AND m.provider_poll_id = ?", instanceID, pollID).Limit(1)).Scan(ctx)
	return m, mapErr(err)
}

// ByProviderIDs reads, for a change inside tx, an instance's messages with the network's IDs among ids, by
// network ID (IDs no message has are left out). It returns no sentinel errors.
func (s *Messages) ByProviderIDs(ctx context.Context, tx bun.IDB, instanceID string, ids []string) (map[string]Message, error) {
	out := map[string]Message{}
	if len(ids) == 0 {
		return out, nil
	}
	// With parameters (see execParams): every run of inbound messages and receipts reads them.
	cond, arg := s.db.oneOfParam("m.provider_message_id", ids)
	ms, err := selectParams[Message](ctx, s.db, tx, "SELECT "+columnsOf[Message](s.db, "m")+
		" FROM messages AS m WHERE m.instance_id = ? AND "+cond+s.db.forUpdateSQL(), instanceID, arg)
	// No ORDER BY: SQLite would walk the instance's every message in ID order instead of the network-ID index.
	for _, m := range ms {
		if prev, seen := out[*m.ProviderMessageID]; !seen || m.ID < prev.ID {
			out[*m.ProviderMessageID] = m
		}
	}
	return out, err
}

// ByProviderIDRead reads an instance's message by the network's ID on the read pool. Returns ErrNotFound if there
// is none.
func (s *Messages) ByProviderIDRead(ctx context.Context, instanceID, providerID string) (Message, error) {
	var m Message
	err := s.db.r.NewSelect().Model(&m).Where("m.instance_id = ? AND m.provider_message_id = ?", instanceID, providerID).
		Limit(1).Scan(ctx)
	return m, mapErr(err)
}

// Save writes a message's status, provider ID, history and failure inside tx, stamping updated_at.
func (s *Messages) Save(ctx context.Context, tx bun.IDB, m *Message) error {
	m.UpdatedAt = now()
	if s.db.dialect == SQLite {
		return s.saveParams(ctx, tx, m)
	}
	res, err := tx.NewUpdate().Model(m).WherePK().
		Column("status", "status_history", "failure", "provider_message_id", "updated_at").Exec(ctx)
	return expectOneRow(res, err)
}

// SavePoll writes a poll message's poll (its votes changed) inside tx. Returns ErrNotFound if it is not there.
func (s *Messages) SavePoll(ctx context.Context, tx bun.IDB, m *Message) error {
	m.UpdatedAt = now()
	res, err := tx.NewUpdate().Model(m).WherePK().Column("poll", "updated_at").Exec(ctx)
	return expectOneRow(res, err)
}

// SaveMany is Save for several messages inside tx, in one statement whatever their number. Returns ErrNotFound if
// one of them is not there.
func (s *Messages) SaveMany(ctx context.Context, tx bun.IDB, ms []Message) error {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return s.Save(ctx, tx, &ms[0])
	}
	t := now()
	for i := range ms {
		ms[i].UpdatedAt = t
	}
	if s.db.dialect == SQLite {
		// One parameterized statement a message, parsed once per connection (see execParams), costs less than
		// parsing a bulk statement with every value written into it.
		for i := range ms {
			if err := s.saveParams(ctx, tx, &ms[i]); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := tx.NewUpdate().Model(&ms).
		Column("status", "status_history", "failure", "provider_message_id", "updated_at").Bulk().Exec(ctx)
	if err != nil {
		return mapErr(err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(ms)) {
		return ErrNotFound
	}
	return nil
}

// saveParams is Save with parameters, for SQLite.
func (s *Messages) saveParams(ctx context.Context, tx bun.IDB, m *Message) error {
	var history, failure any
	if m.StatusHistory != nil {
		b, err := json.Marshal(m.StatusHistory)
		if err != nil {
			return err
		}
		history = string(b)
	}
	if m.Failure != nil {
		b, err := json.Marshal(m.Failure)
		if err != nil {
			return err
		}
		failure = string(b)
	}
	return expectOneRow(s.db.execParams(ctx, tx, "UPDATE messages SET status = ?, status_history = ?, failure = ?, "+
		"provider_message_id = ?, updated_at = ? WHERE id = ?", m.Status, history, failure, m.ProviderMessageID,
		m.UpdatedAt, m.ID))
}

// MessageFilter narrows a list of messages; empty fields do not.
type MessageFilter struct {
	ChatID, Direction, Status, RouteID string
}

// List returns a page of an instance's messages and whether more follow. It returns no sentinel errors.
func (s *Messages) List(ctx context.Context, workspaceID, instanceID string, f MessageFilter, p Page) ([]Message, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		q = q.Where("m.instance_id = ?", instanceID)
		if f.ChatID != "" {
			q = q.Where("m.chat_id = ?", f.ChatID)
		}
		if f.Direction != "" {
			q = q.Where("m.direction = ?", f.Direction)
		}
		if f.Status != "" {
			q = q.Where("m.status = ?", f.Status)
		}
		if f.RouteID != "" {
			q = q.Where("m.route_id = ?", f.RouteID)
		}
		return q
	})
}

// Several reads messages by ID on db, in no order. It returns no sentinel errors.
func (s *Messages) Several(ctx context.Context, db bun.IDB, ids []string) ([]Message, error) {
	var ms []Message
	if len(ids) == 0 {
		return ms, nil
	}
	err := db.NewSelect().Model(&ms).Where("m.id IN (?)", bun.In(ids)).Scan(ctx)
	return ms, err
}

// CountOf counts an instance's messages, on the reader.
func (s *Messages) CountOf(ctx context.Context, instanceID string) (int64, error) {
	n, err := s.db.r.NewSelect().Model((*Message)(nil)).Where("instance_id = ?", instanceID).Count(ctx)
	return int64(n), err
}

// LastInbound returns the newest inbound message of a chat. Returns ErrNotFound when it has none.
func (s *Messages) LastInbound(ctx context.Context, db bun.IDB, chatID string) (Message, error) {
	var m Message
	err := db.NewSelect().Model(&m).Where("chat_id = ?", chatID).Where("direction = 'inbound'").
		OrderExpr("id DESC").Limit(1).Scan(ctx)
	return m, mapErr(err)
}

// MarkRead moves an instance's received messages of a chat to read inside tx and returns them. It returns no
// sentinel errors.
func (s *Messages) MarkRead(ctx context.Context, tx bun.IDB, chatID string) ([]Message, error) {
	var ms []Message
	if err := s.db.forUpdate(tx.NewSelect().Model(&ms).
		Where("m.chat_id = ? AND m.direction = 'inbound' AND m.status = 'received'", chatID)).Scan(ctx); err != nil {
		return nil, err
	}
	return ms, nil
}

// Chat is a conversation of an instance with one person or a group.
type Chat struct {
	bun.BaseModel `bun:"table:chats,alias:c"`

	ID            string     `bun:"id,pk"`
	WorkspaceID   string     `bun:"workspace_id"`
	InstanceID    string     `bun:"instance_id"`
	Type          string     `bun:"type"`
	Address       string     `bun:"address"`
	Name          *string    `bun:"name"`
	ContactID     *string    `bun:"contact_id"`
	GroupID       *string    `bun:"group_id"`
	LastMessageID *string    `bun:"last_message_id"`
	LastMessageAt *time.Time `bun:"last_message_at"`
	UnreadCount   int        `bun:"unread_count"`
	// Archived, Pinned and Muted are how the account keeps the chat; a mute ends at MutedUntil (nil: when unmuted).
	Archived   bool       `bun:"archived"`
	Pinned     bool       `bun:"pinned"`
	Muted      bool       `bun:"muted"`
	MutedUntil *time.Time `bun:"muted_until"`
	CreatedAt  time.Time  `bun:"created_at"`
	UpdatedAt  time.Time  `bun:"updated_at"`
}

// MutedAt reports whether the chat is muted at a time.
func (c Chat) MutedAt(t time.Time) bool {
	return c.Muted && (c.MutedUntil == nil || c.MutedUntil.After(t))
}

// ChatFilter narrows a list of chats; nil fields do not filter. Muted is judged at Now.
type ChatFilter struct {
	Unread, Archived, Pinned, Muted *bool
	Now                             time.Time
	// Label narrows the list to the chats carrying the label with this ID ("": no filter).
	Label string
}

// Chats is the repository of chats.
type Chats struct {
	workspaceScoped[Chat]
}

// ByAddress reads, for a change inside tx, an instance's chat with an address. Returns ErrNotFound if there is
// none.
func (s *Chats) ByAddress(ctx context.Context, tx bun.IDB, instanceID, address string) (Chat, error) {
	// With parameters (see execParams): every inbound message and every send reads its chat.
	return selectOneParams[Chat](ctx, s.db, tx, "SELECT "+columnsOf[Chat](s.db, "c")+
		" FROM chats AS c WHERE c.instance_id = ? AND c.address = ?"+s.db.forUpdateSQL(), instanceID, address)
}

// Create inserts a chat inside tx, giving it its ID and times. Returns ErrConflict if the instance has a chat with
// the address already.
func (s *Chats) Create(ctx context.Context, tx bun.IDB, c *Chat) error {
	t := now()
	c.ID, c.CreatedAt, c.UpdatedAt = NewID("cht"), t, t
	return s.create(ctx, tx, c)
}

// Save writes every column of a chat inside tx, stamping updated_at.
func (s *Chats) Save(ctx context.Context, tx bun.IDB, c *Chat) error {
	c.UpdatedAt = now()
	// With parameters (see updateByID): every accepted send and every run of inbound messages saves its chats.
	return updateByID(ctx, s.db, tx, c, "workspace_id", "instance_id", "created_at")
}

// Get returns a chat of a workspace's instance. Returns ErrNotFound if it is not there.
func (s *Chats) Get(ctx context.Context, workspaceID, instanceID, id string) (Chat, error) {
	c, err := s.get(ctx, workspaceID, id)
	if err == nil && c.InstanceID != instanceID {
		return Chat{}, ErrNotFound
	}
	return c, err
}

// Several reads chats by ID on db, in no order (those that do not exist are left out). It returns no sentinel
// errors.
func (s *Chats) Several(ctx context.Context, db bun.IDB, ids []string) ([]Chat, error) {
	if len(ids) == 0 {
		return []Chat{}, nil
	}
	// With parameters (see execParams): the send queue reads the chats of every batch it claims.
	cond, arg := s.db.oneOfParam("c.id", ids)
	return selectParams[Chat](ctx, s.db, db, "SELECT "+columnsOf[Chat](s.db, "c")+" FROM chats AS c WHERE "+cond, arg)
}

// Lock reads a chat of an instance inside tx for a change. Returns ErrNotFound if it is not the instance's.
func (s *Chats) Lock(ctx context.Context, tx bun.IDB, instanceID, id string) (Chat, error) {
	var c Chat
	err := s.db.forUpdate(tx.NewSelect().Model(&c).Where("c.id = ? AND c.instance_id = ?", id, instanceID)).Scan(ctx)
	return c, mapErr(err)
}

// List returns a page of an instance's chats (only those with unread messages when unread) and whether more
// follow. It returns no sentinel errors.
func (s *Chats) List(ctx context.Context, workspaceID, instanceID string, f ChatFilter, p Page) ([]Chat, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		q = q.Where("c.instance_id = ?", instanceID)
		if f.Unread != nil && *f.Unread {
			q = q.Where("c.unread_count > 0")
		} else if f.Unread != nil {
			q = q.Where("c.unread_count = 0")
		}
		if f.Archived != nil {
			q = q.Where("c.archived = ?", *f.Archived)
		}
		if f.Pinned != nil {
			q = q.Where("c.pinned = ?", *f.Pinned)
		}
		if f.Label != "" {
			q = q.Where("EXISTS (SELECT 1 FROM chat_labels AS cl WHERE cl.chat_id = c.id AND cl.label_id = ?)", f.Label)
		}
		if f.Muted != nil {
			muted := "c.muted AND (c.muted_until IS NULL OR c.muted_until > ?)"
			if *f.Muted {
				q = q.Where(muted, f.Now)
			} else {
				q = q.Where("NOT ("+muted+")", f.Now)
			}
		}
		return q
	})
}
