package channels

import (
	"context"
	"errors"

	"github.com/switchboard/switchboard/store"
)

// LabelChange is a change of a label; nil fields stay.
type LabelChange struct {
	Name  *string
	Color *int
}

// ListLabels returns a page of an instance's labels and whether more follow. Returns a NotFound problem for an
// instance not in the workspace and CapabilityNotSupported for a provider without labels.
func (s *Service) ListLabels(ctx context.Context, workspaceID, instanceID string, p store.Page) ([]store.Label, bool, error) {
	if _, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels); err != nil {
		return nil, false, err
	}
	return s.db.Labels.List(ctx, workspaceID, instanceID, p)
}

// GetLabel returns a label of the workspace's instance. Returns the problems of ListLabels, and NotFound for a label
// not of the instance.
func (s *Service) GetLabel(ctx context.Context, workspaceID, instanceID, id string) (store.Label, error) {
	if _, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels); err != nil {
		return store.Label{}, err
	}
	l, err := s.db.Labels.Get(ctx, workspaceID, instanceID, id)
	return l, storeError(err, "label", id)
}

// CreateLabel makes a label on the network, then here. Returns the problems of ListLabels, and
// InstanceNotConnected when the instance has no live session.
func (s *Service) CreateLabel(ctx context.Context, workspaceID, instanceID, name string, color int) (store.Label, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels)
	if err != nil {
		return store.Label{}, err
	}
	l := store.Label{ID: store.NewID("lbl"), WorkspaceID: workspaceID, InstanceID: instanceID, Name: name, Color: color}
	l.ExternalID = &l.ID // the network keeps it by the ID given here
	if _, err := call(ctx, s, inst, cmdSaveLabel, NetworkLabel{ID: l.ID, Name: name, Color: color}); err != nil {
		return store.Label{}, err
	}
	err = s.inTx(ctx, func(ctx context.Context, tx store.Tx) error { return s.db.Labels.Create(ctx, tx, &l) })
	return l, storeError(err, "instance", instanceID)
}

// UpdateLabel renames or recolors a label on the network, then here. Returns a NotFound problem for a label not
// of the workspace's instance, and the problems of CreateLabel.
func (s *Service) UpdateLabel(ctx context.Context, workspaceID, instanceID, id string, c LabelChange) (store.Label, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels)
	if err != nil {
		return store.Label{}, err
	}
	l, err := s.db.Labels.Get(ctx, workspaceID, instanceID, id)
	if err != nil {
		return store.Label{}, storeError(err, "label", id)
	}
	next := l
	if c.Name != nil {
		next.Name = *c.Name
	}
	if c.Color != nil {
		next.Color = *c.Color
	}
	if next.Name == l.Name && next.Color == l.Color {
		return l, nil
	}
	if _, err := call(ctx, s, inst, cmdSaveLabel, NetworkLabel{ID: networkLabelID(l), Name: next.Name, Color: next.Color}); err != nil {
		return store.Label{}, err
	}
	err = s.inTx(ctx, func(ctx context.Context, tx store.Tx) error { return s.db.Labels.Save(ctx, tx, &next) })
	return next, storeError(err, "label", id)
}

// DeleteLabel deletes a label on the network, then here; each chat that carried it is a chat.updated. Returns the
// problems of UpdateLabel.
func (s *Service) DeleteLabel(ctx context.Context, workspaceID, instanceID, id string) error {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels)
	if err != nil {
		return err
	}
	l, err := s.db.Labels.Get(ctx, workspaceID, instanceID, id)
	if err != nil {
		return storeError(err, "label", id)
	}
	if _, err := call(ctx, s, inst, cmdSaveLabel, NetworkLabel{ID: networkLabelID(l), Name: l.Name, Color: l.Color, Deleted: true}); err != nil {
		return err
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		chats, err := s.db.Labels.ChatsOf(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := s.db.Labels.Delete(ctx, tx, workspaceID, instanceID, id); err != nil {
			return err
		}
		for _, chatID := range chats {
			c, err := s.db.Chats.Lock(ctx, tx, instanceID, chatID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := s.emitLabelledChat(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
	return storeError(err, "label", id)
}

// LabelChat puts a label on a chat (on) or takes it off, on the network, then here, with chat.updated; a chat that
// already is as asked is answered as it is. Returns NotFound problems for a chat or label not of the workspace's
// instance, and the problems of CreateLabel.
func (s *Service) LabelChat(ctx context.Context, workspaceID, instanceID, chatID, labelID string, on bool) (store.Chat, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapLabels)
	if err != nil {
		return store.Chat{}, err
	}
	c, err := s.GetChat(ctx, workspaceID, instanceID, chatID)
	if err != nil {
		return c, err
	}
	l, err := s.db.Labels.Get(ctx, workspaceID, instanceID, labelID)
	if err != nil {
		return c, storeError(err, "label", labelID)
	}
	carried, err := s.db.Labels.OfChats(ctx, s.db.Reader(), []string{c.ID})
	if err != nil {
		return c, err
	}
	has := false
	for _, id := range carried[c.ID] {
		has = has || id == l.ID
	}
	if has == on {
		return c, nil
	}
	if _, err := call(ctx, s, inst, cmdLabelChat, labelChatArgs{Chat: c.Address, Label: networkLabelID(l), On: on}); err != nil {
		return c, err
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		if c, err = s.db.Chats.Lock(ctx, tx, instanceID, chatID); err != nil {
			return err
		}
		assign := s.db.Labels.Unassign
		if on {
			assign = s.db.Labels.Assign
		}
		changed, err := assign(ctx, tx, c.ID, l.ID)
		if err != nil || !changed {
			return err
		}
		return s.emitLabelledChat(ctx, tx, c)
	})
	return c, storeError(err, "chat", chatID)
}

// networkLabelID is the ID the network keeps a label by.
func networkLabelID(l store.Label) string {
	if l.ExternalID != nil {
		return *l.ExternalID
	}
	return l.ID
}
