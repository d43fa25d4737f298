package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Label is a label an instance's account keeps for its chats. ExternalID is its ID on the network (nil where the
// network has none of its own).
type Label struct {
	bun.BaseModel `bun:"table:labels,alias:lbl"`

	ID          string    `bun:"id,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	InstanceID  string    `bun:"instance_id"`
	Name        string    `bun:"name"`
	Color       int       `bun:"color"`
	ExternalID  *string   `bun:"external_id"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// chatLabel is one label carried by one chat.
type chatLabel struct {
	bun.BaseModel `bun:"table:chat_labels,alias:cl"`

	ChatID  string `bun:"chat_id,pk"`
	LabelID string `bun:"label_id,pk"`
}

// Labels is the repository of chat labels.
type Labels struct {
	workspaceScoped[Label]
}

// Create inserts a label inside tx, giving it its ID and times. Returns ErrNotFound if its instance does not exist
// and ErrConflict if the instance has a label with its external ID already.
func (s *Labels) Create(ctx context.Context, tx bun.IDB, l *Label) error {
	t := now()
	if l.ID == "" {
		l.ID = NewID("lbl")
	}
	l.CreatedAt, l.UpdatedAt = t, t
	return s.create(ctx, tx, l)
}

// Get returns a label of a workspace's instance. Returns ErrNotFound if it is not there.
func (s *Labels) Get(ctx context.Context, workspaceID, instanceID, id string) (Label, error) {
	l, err := s.get(ctx, workspaceID, id)
	if err == nil && l.InstanceID != instanceID {
		return Label{}, ErrNotFound
	}
	return l, err
}

// ByExternalID reads, inside tx, an instance's label with its ID on the network. Returns ErrNotFound if there is
// none.
func (s *Labels) ByExternalID(ctx context.Context, tx bun.IDB, instanceID, externalID string) (Label, error) {
	var l Label
	err := tx.NewSelect().Model(&l).Where("lbl.instance_id = ? AND lbl.external_id = ?", instanceID, externalID).
		Scan(ctx)
	return l, mapErr(err)
}

// Taken reports, read on db, whether a label of any instance has the ID.
func (s *Labels) Taken(ctx context.Context, db bun.IDB, id string) (bool, error) {
	return db.NewSelect().Model((*Label)(nil)).Where("lbl.id = ?", id).Exists(ctx)
}

// Save writes a label's name and color inside tx, stamping updated_at. Returns ErrNotFound if it is gone.
func (s *Labels) Save(ctx context.Context, tx bun.IDB, l *Label) error {
	l.UpdatedAt = now()
	res, err := tx.NewUpdate().Model(l).WherePK().Column("name", "color", "updated_at").Exec(ctx)
	return expectOneRow(res, err)
}

// Delete removes a label of a workspace's instance inside tx (its chats lose it) and returns its last state.
// Returns ErrNotFound if it is not there.
func (s *Labels) Delete(ctx context.Context, tx bun.IDB, workspaceID, instanceID, id string) (Label, error) {
	var l Label
	err := inWorkspace(tx.NewDelete().Model(&l), workspaceID, id).Where("instance_id = ?", instanceID).
		Returning("*").Scan(ctx)
	return l, mapErr(err)
}

// List returns a page of an instance's labels, newest first, and whether more follow. It returns no sentinel
// errors.
func (s *Labels) List(ctx context.Context, workspaceID, instanceID string, p Page) ([]Label, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("lbl.instance_id = ?", instanceID)
	})
}

// Assign gives a chat a label inside tx and reports whether the chat did not carry it yet. The caller checks that
// both are the same instance's.
func (s *Labels) Assign(ctx context.Context, tx bun.IDB, chatID, labelID string) (bool, error) {
	res, err := tx.NewInsert().Model(&chatLabel{ChatID: chatID, LabelID: labelID}).On("CONFLICT DO NOTHING").Exec(ctx)
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// Unassign takes a label off a chat inside tx and reports whether the chat carried it.
func (s *Labels) Unassign(ctx context.Context, tx bun.IDB, chatID, labelID string) (bool, error) {
	res, err := tx.NewDelete().Model((*chatLabel)(nil)).Where("chat_id = ? AND label_id = ?", chatID, labelID).
		Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// OfChats returns the IDs of the labels each chat carries (in ID order), by chat ID, read on db. It returns no
// sentinel errors.
func (s *Labels) OfChats(ctx context.Context, db bun.IDB, chatIDs []string) (map[string][]string, error) {
	out := make(map[string][]string, len(chatIDs))
	if len(chatIDs) == 0 {
		return out, nil
	}
	var rows []chatLabel
	err := db.NewSelect().Model(&rows).Where("cl.chat_id IN (?)", bun.In(chatIDs)).
		OrderExpr("cl.chat_id, cl.label_id").Scan(ctx)
	for _, r := range rows {
		out[r.ChatID] = append(out[r.ChatID], r.LabelID)
	}
	return out, err
}

// ChatsOf returns the IDs of the chats carrying a label (in ID order), read on db. It returns no sentinel errors.
func (s *Labels) ChatsOf(ctx context.Context, db bun.IDB, labelID string) ([]string, error) {
	ids := []string{}
	err := db.NewSelect().Model((*chatLabel)(nil)).Column("chat_id").Where("label_id = ?", labelID).
		OrderExpr("chat_id").Scan(ctx, &ids)
	return ids, err
}
