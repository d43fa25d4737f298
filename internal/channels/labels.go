package channels

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/switchboard/switchboard/internal/text"
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
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		// The network can report the new label back before this records it (a WhatsApp device is handed the app
		// state it sent itself): then the label is the one that report recorded, as asked.
		known, err := s.db.Labels.ByExternalID(ctx, tx, instanceID, l.ID)
		if errors.Is(err, store.ErrNotFound) {
			return s.db.Labels.Create(ctx, tx, &l)
		}
		if err != nil {
			return err
		}
		if l = known; l.Name == name && l.Color == color {
			return nil
		}
		l.Name, l.Color = name, color
		return s.db.Labels.Save(ctx, tx, &l)
	})
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
		return s.dropLabel(ctx, tx, l)
	})
	return storeError(err, "label", id)
}

// dropLabel deletes a label inside tx, which locked its instance, with chat.updated of each chat that carried it.
// A label gone already is no error: the network's report of its deletion (of this very one, handed back) came
// first.
func (s *Recorder) dropLabel(ctx context.Context, tx store.Tx, l store.Label) error {
	chats, err := s.db.Labels.ChatsOf(ctx, tx, l.ID)
	if err != nil {
		return err
	}
	if _, err := s.db.Labels.Delete(ctx, tx, l.WorkspaceID, l.InstanceID, l.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	for _, chatID := range chats {
		c, err := s.db.Chats.Lock(ctx, tx, l.InstanceID, chatID)
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

// The API's bounds of a label (its Label schema): a name of at most labelNameLimit characters, a color index below
// labelColors.
const (
	labelNameLimit = 100
	labelColors    = 20
)

// ownLabelID matches the IDs Switchboard gives labels (the API's LabelID).
var ownLabelID = regexp.MustCompile(`^lbl_[0-9A-HJKMNP-TV-Z]{26}$`)

// LabelChanged records a label as another of the account's devices left it, matched by the network's ID: one first
// seen is created (keeping the network's ID), a known one renamed or recolored, a deleted one deleted with
// chat.updated of each chat that carried it. A repeat changes nothing: WhatsApp replays its labels to each device
// that links, and hands a device back what it sent itself.
func (k *sink) LabelChanged(ctx context.Context, l NetworkLabel) error {
	l = text.Cleaned(l)
	name, color := labelName(l.Name, l.ID), labelColor(l.Color)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		known, err := k.s.db.Labels.ByExternalID(ctx, tx, k.id, l.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if l.Deleted {
				return nil
			}
			_, err := k.s.createNetworkLabel(ctx, tx, inst, l.ID, name, color)
			return err
		case err != nil:
			return err
		case l.Deleted:
			return k.s.dropLabel(ctx, tx, known)
		case known.Name == name && known.Color == color:
			return nil
		}
		known.Name, known.Color = name, color
		return k.s.db.Labels.Save(ctx, tx, &known)
	})
}

// ChatLabelled records that another of the account's devices put a label on a chat (on) or took it off, with
// chat.updated; a chat already as reported is no change. A chat the instance does not know yet is left alone, as
// ChatOrganized leaves it: what the network names is an address, and a chat made from it alone could be of the
// wrong kind (a group not listed yet). A label the network has not reported yet is created under a name of its own,
// which its report replaces (a device that links is handed the account's labels and their chats in no fixed
// order).
func (k *sink) ChatLabelled(ctx context.Context, chat, label string, on bool) error {
	chat, label = text.Clean(chat), text.Clean(label)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	return k.knownChat(ctx, chat, func(ctx context.Context, tx store.Tx, c store.Chat) error {
		l, err := k.s.db.Labels.ByExternalID(ctx, tx, k.id, label)
		if errors.Is(err, store.ErrNotFound) {
			if !on {
				return nil
			}
			l, err = k.s.createNetworkLabel(ctx, tx, inst, label, labelName("", label), 0)
		}
		if err != nil {
			return err
		}
		assign := k.s.db.Labels.Unassign
		if on {
			assign = k.s.db.Labels.Assign
		}
		changed, err := assign(ctx, tx, c.ID, l.ID)
		if err != nil || !changed {
			return err
		}
		return k.s.emitLabelledChat(ctx, tx, c)
	})
}

// knownChat runs fn on the instance's chat with an address, inside a transaction that locked the instance; a chat
// the instance does not know is left alone (fn does not run).
func (k *sink) knownChat(ctx context.Context, address string, fn func(ctx context.Context, tx store.Tx, c store.Chat) error) error {
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		c, err := k.s.db.Chats.ByAddress(ctx, tx, k.id, address)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(ctx, tx, c)
	})
}

// createNetworkLabel records, inside tx, a label first seen on the network, by the network's ID. Its ID here is
// that ID when the label was made here (its creation reported back before it was recorded) and no label has it
// yet — the same account linked as two instances shares its labels —, a new one otherwise.
func (s *Recorder) createNetworkLabel(ctx context.Context, tx store.Tx, inst store.Instance, networkID, name string,
	color int) (store.Label, error) {
	l := store.Label{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Name: name, Color: color, ExternalID: &networkID}
	if ownLabelID.MatchString(networkID) {
		taken, err := s.db.Labels.Taken(ctx, tx, networkID)
		if err != nil {
			return l, err
		}
		if !taken {
			l.ID = networkID
		}
	}
	return l, s.db.Labels.Create(ctx, tx, &l)
}

// labelName is a network's name of a label as the API shows it: one line of at most labelNameLimit characters,
// without spaces around it. A label without a name is called by its network ID.
func labelName(name, networkID string) string {
	name = strings.Join(strings.Fields(name), " ")
	if name == "" {
		name = strings.Join(strings.Fields("Label "+networkID), " ")
	}
	if r := []rune(name); len(r) > labelNameLimit {
		name = strings.TrimSpace(string(r[:labelNameLimit]))
	}
	return name
}

// labelColor is a network's color index of a label as the API shows it: one outside the API's range (which the
// providers map their palettes onto) is the first color.
func labelColor(c int) int {
	if c < 0 || c >= labelColors {
		return 0
	}
	return c
}
