//go:build whatsapp_web

package whatsappweb

import (
	"context"

	"go.mau.fi/whatsmeow/appstate"
	waSyncAction "go.mau.fi/whatsmeow/proto/waSyncAction"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
)

// WhatsApp's labels live in the account's app state, as archiving and pinning do: a label is kept by an ID (small
// numbers for those made on the phone, Switchboard's own lbl_ ID for those made here) with a name and a color, and
// every linked device and the phone apply each change.
//
// Colors: WhatsApp draws a label in one of a fixed palette of 20 colors, which it keeps as the index 0 to 19;
// Switchboard's color (the API's Label.color, 0 to 19) is that index, unchanged, both ways. An index past the
// palette, should WhatsApp ever widen it, wraps around it rather than being lost.
const paletteSize = 20

// SaveLabel creates, renames, recolors or deletes a label in the account's app state (chats.labels).
func (s *session) SaveLabel(ctx context.Context, l channels.NetworkLabel) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	if err := c.SendAppState(ctx, appstate.BuildLabelEdit(l.ID, l.Name, paletteColor(l.Color), l.Deleted)); err != nil {
		return failureOf(err)
	}
	return nil
}

// LabelChat puts a label on a chat or takes it off, in the account's app state (chats.labels).
func (s *session) LabelChat(ctx context.Context, chat, label string, on bool) error {
	c, j, err := s.target(chat)
	if err != nil {
		return err
	}
	if err := c.SendAppState(ctx, appstate.BuildLabelChat(j, label, on)); err != nil {
		return failureOf(err)
	}
	return nil
}

// paletteColor is Switchboard's color of a label as WhatsApp's palette index.
func paletteColor(c int) int32 { return int32(((c % paletteSize) + paletteSize) % paletteSize) }

// computedLists are the kinds of WhatsApp's chat lists that are filters the app computes from the chats (unread,
// groups, archived …) rather than labels the account puts on chats: the phone keeps them in the app state as
// labels, but no chat is labelled with them, so the instance shows none of them.
var computedLists = map[waSyncAction.LabelEditAction_ListType]bool{
	waSyncAction.LabelEditAction_UNREAD: true, waSyncAction.LabelEditAction_GROUPS: true,
	waSyncAction.LabelEditAction_COMMUNITY: true, waSyncAction.LabelEditAction_DRAFTED: true,
	waSyncAction.LabelEditAction_CHANNELS: true, waSyncAction.LabelEditAction_ARCHIVED: true,
	waSyncAction.LabelEditAction_LOCKED: true, waSyncAction.LabelEditAction_INVITES: true,
	waSyncAction.LabelEditAction_MENTIONS_AND_REPLIES: true, waSyncAction.LabelEditAction_AI_RESPONDING: true,
}

// labelEdit reports a label the account created, changed or deleted on its phone or another device (or this one's
// own change, which whatsmeow hands back). A computed list is reported deleted: it is no label of the instance,
// and a label recorded for it before its kind was known (from a chat said to carry it) goes.
func (s *session) labelEdit(e *events.LabelEdit) {
	a := e.Action
	if a == nil || e.LabelID == "" {
		return
	}
	l := channels.NetworkLabel{ID: e.LabelID, Name: a.GetName(), Color: int(paletteColor(int(a.GetColor()))),
		Deleted: a.GetDeleted() || computedLists[a.GetType()]}
	if l.Name == "" && a.GetType() == waSyncAction.LabelEditAction_FAVORITES {
		l.Name = "Favorites" // the app names the list itself, in the phone's language
	}
	s.report(func(ctx context.Context) error { return s.sink.LabelChanged(ctx, l) })
}

// labelAssociation reports a chat the account labelled or unlabelled on its phone or another device.
func (s *session) labelAssociation(e *events.LabelAssociationChat) {
	ctx := s.live()
	if ctx == nil || e.Action == nil || e.LabelID == "" || e.JID.IsEmpty() {
		return
	}
	address, on := s.chatAddress(ctx, e.JID), e.Action.GetLabeled()
	s.report(func(ctx context.Context) error { return s.sink.ChatLabelled(ctx, address, e.LabelID, on) })
}
