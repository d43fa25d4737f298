package channels

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// GroupAPI is the API's Group of a stored group, its participants' contacts and its chat resolved on db.
func (s *Recorder) GroupAPI(ctx context.Context, db store.Querier, g store.ChatGroup) (gen.Group, error) {
	out := gen.Group{Id: g.ID, Object: gen.GroupObjectGroup, InstanceId: g.InstanceID, Address: g.Address,
		Subject: g.Subject, Description: g.Description, Participants: []gen.Participant{}, CreatedAt: g.CreatedAt,
		UpdatedAt: g.UpdatedAt, Community: &g.Community, CommunityAddress: g.CommunityAddress}
	if g.SettingsSend != nil && g.SettingsEditInfo != nil {
		out.Settings = &gen.GroupSettings{Send: gen.GroupSettingsSend(*g.SettingsSend),
			EditInfo: gen.GroupSettingsEditInfo(*g.SettingsEditInfo)}
	}
	var addresses []string
	for _, p := range g.Participants {
		addresses = append(addresses, p.Address)
	}
	owners, err := s.db.Contacts.Owners(ctx, db, g.InstanceID, addresses)
	if err != nil {
		return out, err
	}
	for _, p := range g.Participants {
		gp := gen.Participant{Address: p.Address, DisplayName: nonEmpty(p.DisplayName), Role: gen.ParticipantRole(p.Role)}
		if id, ok := owners[p.Address]; ok {
			gp.ContactId = &id
		}
		out.Participants = append(out.Participants, gp)
	}
	if c, err := s.db.Chats.ByAddress(ctx, db, g.InstanceID, g.Address); err == nil {
		out.ChatId = &c.ID
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	return out, nil
}

// ChatAPI is the API's Chat of a stored chat with its newest message, read on db.
func (s *Recorder) ChatAPI(ctx context.Context, db store.Querier, c store.Chat) (gen.Chat, error) {
	return s.chatAPI(ctx, db, c, nil)
}

// chatAPI is ChatAPI given the API shapes of messages the caller wrote and holds as stored (newest, by ID): the
// chat's newest message is taken from there when it is one of them, and read on db otherwise. A send and a run of
// inbound messages make the message they wrote the chat's newest; reading it back would cost two statements.
func (s *Recorder) chatAPI(ctx context.Context, db store.Querier, c store.Chat, newest map[string]gen.Message) (gen.Chat, error) {
	muted := c.MutedAt(time.Now())
	out := gen.Chat{Id: c.ID, Object: gen.ChatObjectChat, InstanceId: c.InstanceID, Type: gen.ChatType(c.Type),
		Address: c.Address, Name: c.Name, ContactId: c.ContactID, GroupId: c.GroupID, UnreadCount: c.UnreadCount,
		LastMessageAt: c.LastMessageAt, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Archived: &c.Archived,
		Pinned: &c.Pinned, Muted: &muted}
	if muted {
		out.MutedUntil = c.MutedUntil
	}
	if api, ok := newest[deref(c.LastMessageID)]; ok {
		out.LastMessage = &api
	} else if c.LastMessageID != nil {
		m, err := s.db.Messages.ByID(ctx, db, *c.LastMessageID)
		if err == nil {
			api, err := s.MessageAPI(ctx, db, m)
			if err != nil {
				return out, err
			}
			out.LastMessage = &api
		} else if !errors.Is(err, store.ErrNotFound) {
			return out, err
		}
	}
	return out, nil
}

// LabelledChatAPI is ChatAPI with the labels the chat carries: chat reads, lists and label changes show them; the
// chat.updated of every message does not, so that sends read no labels.
func (s *Recorder) LabelledChatAPI(ctx context.Context, db store.Querier, c store.Chat) (gen.Chat, error) {
	out, err := s.ChatAPI(ctx, db, c)
	if err != nil {
		return out, err
	}
	labels, err := s.db.Labels.OfChats(ctx, db, []string{c.ID})
	if err != nil {
		return gen.Chat{}, err
	}
	ids := labels[c.ID]
	if ids == nil {
		ids = []string{}
	}
	out.Labels = &ids
	return out, nil
}

// GetChat returns a chat of a workspace's instance. Returns a NotFound problem if it is not there.
func (s *Service) GetChat(ctx context.Context, workspaceID, instanceID, id string) (store.Chat, error) {
	c, err := s.db.Chats.Get(ctx, workspaceID, instanceID, id)
	return c, storeError(err, "chat", id)
}

// ListChats returns a page of an instance's chats and whether more follow. Returns a NotFound problem if the
// instance is not in the workspace.
func (s *Service) ListChats(ctx context.Context, workspaceID, instanceID string, f store.ChatFilter, p store.Page) ([]store.Chat, bool, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, false, err
	}
	if f.Now.IsZero() {
		f.Now = time.Now()
	}
	return s.db.Chats.List(ctx, workspaceID, instanceID, f, p)
}

// OrganizeChat archives, pins or mutes a chat: on the network first where it keeps such state (the account's
// devices show it), then on the chat, with chat.updated. A change to the state the chat has already is none: no
// call, no write, no event. Returns NotFound, CapabilityNotSupported (before anything changes), ValidationFailed
// for a mute that ends in the past, and InstanceNotConnected.
func (s *Service) OrganizeChat(ctx context.Context, workspaceID, instanceID, chatID string, o ChatOrganization) (store.Chat, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return store.Chat{}, err
	}
	for _, need := range []struct {
		set bool
		c   Capability
	}{{o.Archived != nil, CapArchive}, {o.Pinned != nil, CapPin}, {o.Muted != nil, CapMute}} {
		if need.set && !p.Info().Has(need.c) {
			return store.Chat{}, notSupported(inst.Provider, need.c)
		}
	}
	if !o.MutedUntil.IsZero() {
		if o.Muted == nil || !*o.Muted {
			return store.Chat{}, problem.Invalid("/muted_until", "a mute's end goes with muted: true")
		}
		if !o.MutedUntil.After(time.Now()) {
			return store.Chat{}, problem.Invalid("/muted_until", "a mute ends in the future")
		}
		o.MutedUntil = micro(o.MutedUntil)
	}
	if o.Archived != nil && *o.Archived && o.Pinned != nil && *o.Pinned {
		return store.Chat{}, problem.Invalid("/pinned", "an archived chat is not pinned: archiving unpins it")
	}
	c, err := s.GetChat(ctx, workspaceID, instanceID, chatID)
	if err != nil {
		return c, err
	}
	change := organized(c, o)
	if change == (ChatOrganization{}) {
		return c, nil
	}
	if _, err := call(ctx, s, inst, cmdOrganize, organizeArgs{Chat: c.Address, Org: change}); err != nil {
		return c, err
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		if c, err = s.db.Chats.Lock(ctx, tx, instanceID, chatID); err != nil {
			return err
		}
		applyOrganization(&c, change)
		if err := s.db.Chats.Save(ctx, tx, &c); err != nil {
			return err
		}
		return s.emitChat(ctx, tx, c)
	})
	return c, storeError(err, "chat", chatID)
}

// organized is the part of o that changes the chat (empty when none does).
func organized(c store.Chat, o ChatOrganization) ChatOrganization {
	var out ChatOrganization
	if o.Archived != nil && *o.Archived != c.Archived {
		out.Archived = o.Archived
		if *o.Archived && c.Pinned {
			// Archiving unpins, as WhatsApp does on every device.
			unpin := false
			out.Pinned = &unpin
		}
	}
	if o.Pinned != nil && *o.Pinned != c.Pinned {
		out.Pinned = o.Pinned
	}
	if o.Muted != nil {
		until := deref(c.MutedUntil)
		if *o.Muted != c.Muted || (*o.Muted && !until.Equal(o.MutedUntil)) {
			out.Muted, out.MutedUntil = o.Muted, o.MutedUntil
		}
	}
	return out
}

// applyOrganization records a change of how a chat is kept.
func applyOrganization(c *store.Chat, o ChatOrganization) {
	if o.Archived != nil {
		c.Archived = *o.Archived
	}
	if o.Pinned != nil {
		c.Pinned = *o.Pinned
	}
	if o.Muted != nil {
		c.Muted, c.MutedUntil = *o.Muted, nil
		if *o.Muted && !o.MutedUntil.IsZero() {
			t := o.MutedUntil
			c.MutedUntil = &t
		}
	}
}

// MarkRead marks every inbound message of a chat read, tells the network when the provider can (read receipts to
// the senders), and emits chat.updated. Returns NotFound, and InstanceNotConnected when the network must be told
// and the instance has no live session.
func (s *Service) MarkRead(ctx context.Context, workspaceID, instanceID, chatID string) (store.Chat, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return store.Chat{}, err
	}
	c, err := s.GetChat(ctx, workspaceID, instanceID, chatID)
	if err != nil {
		return c, err
	}
	if p.Info().Has(CapMarkRead) && c.LastMessageID != nil {
		// Read receipts are about what the other side wrote: the newest inbound message marks the rest read.
		last, err := s.db.Messages.LastInbound(ctx, s.db.Reader(), c.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return c, err
		}
		if err == nil {
			if _, err := call(ctx, s, inst, cmdMarkRead, markReadArgs{Chat: c.Address, UpTo: deref(last.ProviderMessageID)}); err != nil {
				return c, err
			}
		}
	}
	err = s.inTxFor(ctx, []string{instanceID}, func(ctx context.Context, tx store.Tx) error {
		if c, err = s.db.Chats.Lock(ctx, tx, instanceID, chatID); err != nil {
			return err
		}
		unread, err := s.db.Messages.MarkRead(ctx, tx, chatID)
		if err != nil {
			return err
		}
		for _, m := range unread {
			m.Status = msgRead
			m.StatusHistory = append(m.StatusHistory, store.StatusChange{Status: msgRead, At: micro(time.Now())})
			if err := s.db.Messages.Save(ctx, tx, &m); err != nil {
				return err
			}
		}
		if c.UnreadCount == 0 && len(unread) == 0 {
			return nil
		}
		c.UnreadCount = 0
		if err := s.db.Chats.Save(ctx, tx, &c); err != nil {
			return err
		}
		return s.emitChat(ctx, tx, c)
	})
	return c, storeError(err, "chat", chatID)
}

// GetGroup returns a group of a workspace's instance. Returns a NotFound problem if it is not there.
func (s *Service) GetGroup(ctx context.Context, workspaceID, instanceID, id string) (store.ChatGroup, error) {
	g, err := s.db.Groups.Get(ctx, workspaceID, instanceID, id)
	return g, storeError(err, "group", id)
}

// ListGroups returns a page of the groups an instance is in and whether more follow. Returns a NotFound problem if
// the instance is not in the workspace.
func (s *Service) ListGroups(ctx context.Context, workspaceID, instanceID string, p store.Page) ([]store.ChatGroup, bool, error) {
	if _, err := s.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, false, err
	}
	return s.db.Groups.List(ctx, workspaceID, instanceID, p)
}

// normalizeAll normalizes addresses of a request, each refused one a field of errs under pointer.
func normalizeAll(p Provider, errs *problem.Fields, pointer string, addresses []string) []string {
	out := make([]string, len(addresses))
	for i, a := range addresses {
		n, err := p.NormalizeAddress(a)
		if err != nil {
			errs.Add(problem.Pointer(pointer, itoa(i)), err.Error())
		}
		out[i] = n
	}
	return out
}

// CreateGroup creates a group on the network with the instance as owner and records it (group.created). The
// participants the network refused come back with why. Returns NotFound, CapabilityNotSupported, ValidationFailed
// and InstanceNotConnected.
func (s *Service) CreateGroup(ctx context.Context, workspaceID, instanceID, subject string, description *string, participants []string) (store.ChatGroup, []ParticipantResult, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, CapGroupsCreate)
	if err != nil {
		return store.ChatGroup{}, nil, err
	}
	var errs problem.Fields
	addresses := normalizeAll(p, &errs, "participants", participants)
	if err := errs.Err(); err != nil {
		return store.ChatGroup{}, nil, err
	}
	g, err := call(ctx, s, inst, cmdGroupCreate, groupCreateArgs{Subject: subject, Participants: addresses})
	if err != nil {
		return store.ChatGroup{}, nil, err
	}
	if description != nil && *description != "" && p.Info().Has(CapGroupsManage) {
		if updated, err := call(ctx, s, inst, cmdGroupUpdate, groupUpdateArgs{Group: g.Address, Description: description}); err == nil {
			g = updated
		}
	}
	stored, err := s.recordGroup(ctx, inst, g, GroupCreated)
	return stored, g.Rejected, err
}

// recordGroup stores a group as the network reports it, inside its own transaction, and emits the event of the
// change (group.created for a group new to the instance; changed as saveGroup takes it).
func (s *Recorder) recordGroup(ctx context.Context, inst store.Instance, g Group, change string, changed ...string) (store.ChatGroup, error) {
	var stored store.ChatGroup
	err := s.inTxFor(ctx, []string{inst.ID}, func(ctx context.Context, tx store.Tx) error {
		var err error
		stored, err = s.saveGroup(ctx, tx, inst, g, change, changed...)
		return err
	})
	return stored, err
}

// saveGroup is recordGroup inside tx. changed names the fields of a group.updated (default: subject and
// description, what the networks report changing together).
func (s *Recorder) saveGroup(ctx context.Context, tx store.Querier, inst store.Instance, g Group, change string, changed ...string) (store.ChatGroup, error) {
	row := store.ChatGroup{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Address: g.Address, Subject: g.Subject,
		Description: g.Description, Participants: []store.Participant{}, Community: g.Community}
	if g.CommunityAddress != "" {
		row.CommunityAddress = &g.CommunityAddress
	}
	if g.Settings != nil && g.Settings.Send != "" && g.Settings.EditInfo != "" {
		row.SettingsSend, row.SettingsEditInfo = &g.Settings.Send, &g.Settings.EditInfo
	}
	for _, p := range g.Participants {
		row.Participants = append(row.Participants, store.Participant{Address: p.Address, DisplayName: p.DisplayName, Role: p.Role})
		if p.Address != accountAddress(inst) {
			if _, err := s.resolve(ctx, tx, inst, Party{Address: p.Address, DisplayName: p.DisplayName}); err != nil {
				return row, err
			}
		}
	}
	if change == GroupLeft {
		t := micro(time.Now())
		row.LeftAt = &t
	}
	if change == GroupSynced || (change == GroupUpdated && len(changed) == 0) {
		old, err := s.db.Groups.ByAddress(ctx, tx, inst.ID, g.Address)
		switch {
		case err == nil && change == GroupSynced && sameGroup(old, row):
			return old, nil // nothing new: no write, no event
		case err == nil:
			change, changed = GroupUpdated, groupChanges(old, row)
		case !errors.Is(err, store.ErrNotFound):
			return row, err
		}
	}
	created, err := s.db.Groups.Upsert(ctx, tx, &row)
	if err != nil {
		return row, err
	}
	if created && change != GroupLeft {
		change = GroupCreated
	}
	api, err := s.GroupAPI(ctx, tx, row)
	if err != nil {
		return row, err
	}
	var payload any
	switch change {
	case GroupCreated:
		payload = gen.GroupCreatedEvent{Group: api, InstanceId: inst.ID}
	case GroupLeft:
		payload = gen.GroupLeftEvent{Group: api, InstanceId: inst.ID}
	case GroupParticipantsChanged:
		payload = gen.GroupParticipantsChangedEvent{Group: api, InstanceId: inst.ID}
	default:
		if len(changed) == 0 {
			changed = []string{"subject", "description"}
		}
		payload = gen.GroupUpdatedEvent{Group: api, Changed: changed, InstanceId: inst.ID}
	}
	return row, s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Payload: payload})
}

// groupChanges names the fields of a group.updated that differ between a stored group and the network's report of
// it (none: saveGroup's default).
func groupChanges(old, now store.ChatGroup) []string {
	var out []string
	if old.Subject != now.Subject {
		out = append(out, "subject")
	}
	if old.Description != now.Description {
		out = append(out, "description")
	}
	if !slices.Equal(old.Participants, now.Participants) {
		out = append(out, "participants")
	}
	if (now.SettingsSend != nil && deref(old.SettingsSend) != *now.SettingsSend) ||
		(now.SettingsEditInfo != nil && deref(old.SettingsEditInfo) != *now.SettingsEditInfo) {
		out = append(out, "settings")
	}
	return out
}

// sameGroup reports whether a stored group already says what a network's listing of it says.
func sameGroup(old, now store.ChatGroup) bool {
	return old.LeftAt == nil && old.Community == now.Community &&
		deref(old.CommunityAddress) == deref(now.CommunityAddress) && len(groupChanges(old, now)) == 0
}

// readOnly refuses a change of a community: they are listed, not managed.
func readOnly(g store.ChatGroup) error {
	if g.Community {
		return problem.Errorf(problem.Conflict, "Group %s is a community; communities are listed read-only, their groups can be managed.", g.ID)
	}
	return nil
}

func accountAddress(inst store.Instance) string {
	if inst.Account == nil {
		return ""
	}
	return inst.Account.Address
}

// UpdateGroup changes a group's subject or description (groups.participants) and its settings (groups.settings)
// on the network, with one group.updated naming the fields that changed. Every capability is checked before the
// network is asked anything. Returns NotFound, CapabilityNotSupported and InstanceNotConnected.
func (s *Service) UpdateGroup(ctx context.Context, workspaceID, instanceID, groupID string, subject, description *string, settings *GroupSettings) (store.ChatGroup, error) {
	info := subject != nil || description != nil
	inst, p, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return store.ChatGroup{}, err
	}
	if info && !p.Info().Has(CapGroupsManage) {
		return store.ChatGroup{}, notSupported(inst.Provider, CapGroupsManage)
	}
	if settings != nil && !p.Info().Has(CapGroupsSettings) {
		return store.ChatGroup{}, notSupported(inst.Provider, CapGroupsSettings)
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return g, err
	}
	if ro := readOnly(g); ro != nil {
		return g, ro
	}
	var out Group
	var changed []string
	if info {
		if out, err = call(ctx, s, inst, cmdGroupUpdate, groupUpdateArgs{Group: g.Address, Subject: subject, Description: description}); err != nil {
			return g, err
		}
		if subject != nil {
			changed = append(changed, "subject")
		}
		if description != nil {
			changed = append(changed, "description")
		}
	}
	if settings != nil {
		next, err := call(ctx, s, inst, cmdGroupSettings, groupSettingsArgs{Group: g.Address, Settings: *settings})
		if err != nil {
			if info { // the first change is made on the network: record it before answering
				_, _ = s.recordGroup(ctx, inst, out, GroupUpdated, changed...)
			}
			return g, err
		}
		out = next
		changed = append(changed, "settings")
	}
	return s.recordGroup(ctx, inst, out, GroupUpdated, changed...)
}

// ChangeParticipants adds, removes, promotes or demotes participants, one result per participant, and records the
// group as it is afterwards (group.participants_changed when any changed). Returns NotFound,
// CapabilityNotSupported, ValidationFailed and InstanceNotConnected.
func (s *Service) ChangeParticipants(ctx context.Context, workspaceID, instanceID, groupID, action string, participants []string) (store.ChatGroup, []ParticipantResult, error) {
	inst, p, err := s.capable(ctx, workspaceID, instanceID, CapGroupsManage)
	if err != nil {
		return store.ChatGroup{}, nil, err
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return g, nil, err
	}
	if ro := readOnly(g); ro != nil {
		return g, nil, ro
	}
	var errs problem.Fields
	addresses := normalizeAll(p, &errs, "participants", participants)
	if err := errs.Err(); err != nil {
		return g, nil, err
	}
	results, err := call(ctx, s, inst, cmdGroupParticipants, participantsArgs{Group: g.Address, Action: action, Participants: addresses})
	if err != nil {
		return g, nil, err
	}
	if slices.ContainsFunc(results, func(r ParticipantResult) bool { return r.OK }) {
		if now, err := call(ctx, s, inst, cmdGroupGet, groupArgs{Group: g.Address}); err == nil {
			if g, err = s.recordGroup(ctx, inst, now, GroupParticipantsChanged); err != nil {
				return g, nil, err
			}
		}
	}
	return g, results, nil
}

// GroupInvite returns a group's invite link, a new one when revoke is set. Returns NotFound,
// CapabilityNotSupported and InstanceNotConnected.
func (s *Service) GroupInvite(ctx context.Context, workspaceID, instanceID, groupID string, revoke bool) (string, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapGroupsInvite)
	if err != nil {
		return "", err
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return "", err
	}
	if ro := readOnly(g); ro != nil {
		return "", ro
	}
	out, err := call(ctx, s, inst, cmdGroupInvite, inviteArgs{Group: g.Address, Revoke: revoke})
	if err != nil {
		return "", err
	}
	return out.Invite, nil
}

// JoinGroup joins the group of an invite and records it (group.created). Returns NotFound,
// CapabilityNotSupported and InstanceNotConnected.
func (s *Service) JoinGroup(ctx context.Context, workspaceID, instanceID, invite string) (store.ChatGroup, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapGroupsInvite)
	if err != nil {
		return store.ChatGroup{}, err
	}
	g, err := call(ctx, s, inst, cmdGroupJoin, joinArgs{Invite: invite})
	if err != nil {
		return store.ChatGroup{}, err
	}
	return s.recordGroup(ctx, inst, g, GroupCreated)
}

// LeaveGroup makes the instance leave a group (group.left); the group is listed no more. Returns NotFound,
// CapabilityNotSupported and InstanceNotConnected.
func (s *Service) LeaveGroup(ctx context.Context, workspaceID, instanceID, groupID string) error {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapGroupsManage)
	if err != nil {
		return err
	}
	g, err := s.GetGroup(ctx, workspaceID, instanceID, groupID)
	if err != nil {
		return err
	}
	if ro := readOnly(g); ro != nil {
		return ro
	}
	if _, err := call(ctx, s, inst, cmdGroupLeave, groupArgs{Group: g.Address}); err != nil {
		return err
	}
	_, err = s.recordGroup(ctx, inst, Group{Address: g.Address, Subject: g.Subject, Description: g.Description,
		Participants: participantsOf(g)}, GroupLeft)
	return err
}

func participantsOf(g store.ChatGroup) []Participant {
	out := make([]Participant, len(g.Participants))
	for i, p := range g.Participants {
		out[i] = Participant{Address: p.Address, DisplayName: p.DisplayName, Role: p.Role}
	}
	return out
}
