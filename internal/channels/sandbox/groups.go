package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// The roles of group participants.
const (
	roleOwner  = "owner"
	roleAdmin  = "admin"
	roleMember = "member"
	// roleEditor, as the role a change needs, is an admin's where the group keeps its info to admins and any
	// participant's otherwise.
	roleEditor = "editor"
)

const (
	maxSubject     = 100
	maxDescription = 2048
)

func checkSubject(subject string) (string, error) {
	subject = strings.TrimSpace(subject)
	if subject == "" || len([]rune(subject)) > maxSubject {
		return "", failure("invalid_subject", "a group's subject is a text of 1 to %d characters", maxSubject)
	}
	return subject, nil
}

// CreateGroup creates a group owned by the instance with the participants that can be added; the others are
// returned in Group.Rejected. Each added participant's instance is told of the group.
func (s *session) CreateGroup(ctx context.Context, subject string, participants []string) (channels.Group, error) {
	rs, number := s.live()
	if number == "" {
		return channels.Group{}, notConnected()
	}
	subject, err := checkSubject(subject)
	if err != nil {
		return channels.Group{}, err
	}
	at := now()
	g := store.SandboxGroup{Address: newGroupAddress(), Subject: subject, CreatedAt: at, AdminsOnlyEdit: true,
		Members: []store.SandboxGroupMember{{Number: number, Role: roleOwner, JoinedAt: at}}}
	var rejected []channels.ParticipantResult
	var group channels.Group
	var letters []letter
	added := map[string]string{}
	err = s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, raw := range participants {
			n, f := s.addable(ctx, tx, raw, number)
			if f == nil && (n == number || added[n] != "") {
				continue
			}
			if f != nil {
				rejected = append(rejected, channels.ParticipantResult{Address: n, Failure: f})
				continue
			}
			added[n] = channels.GroupCreated
			g.Members = append(g.Members, store.SandboxGroupMember{Number: n, Role: roleMember, JoinedAt: at})
		}
		for i := range g.Members {
			g.Members[i].GroupAddress = g.Address
		}
		if err := s.p.net.CreateGroup(ctx, tx, &g); err != nil {
			return err
		}
		group, letters, err = s.tell(ctx, tx, g.Address, number, added, "")
		return err
	})
	if err != nil {
		return channels.Group{}, err
	}
	s.wakeAll(rs, letters)
	group.Rejected = rejected
	return group, nil
}

// addable checks that a participant can be added to a group by actor: a sandbox account, not the echo service,
// not one that blocks the actor. It returns the normalized number (or raw, when it is not a number) and, when it
// cannot be added, why.
func (s *session) addable(ctx context.Context, db store.Querier, raw, actor string) (string, *channels.Failure) {
	n, err := normalizeNumber(raw)
	if err != nil {
		return raw, failure("invalid_address", "%v", err)
	}
	if n == EchoNumber {
		return n, failure("not_permitted", "the echo service does not join groups")
	}
	if n == actor {
		return n, nil
	}
	if _, err := s.p.net.Account(ctx, db, n); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return n, failure("recipient_not_on_network", "%s has no account on the sandbox network", n)
		}
		return n, &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	blocked, err := s.p.net.Blocks(ctx, db, n, actor)
	if err != nil {
		return n, &channels.Failure{Code: "network_error", Detail: err.Error(), Retryable: true}
	}
	if blocked {
		return n, failure("blocked", "%s does not accept being added by this instance", n)
	}
	return n, nil
}

// GetGroup returns a group the instance is a participant of.
func (s *session) GetGroup(ctx context.Context, group string) (channels.Group, error) {
	_, number := s.live()
	if number == "" {
		return channels.Group{}, notConnected()
	}
	g, err := s.p.net.Group(ctx, s.p.net.Reader(), group)
	if err := access(g, err, group, number, roleMember); err != nil {
		return channels.Group{}, err
	}
	return s.p.snapshot(ctx, s.p.net.Reader(), g)
}

// UpdateGroup changes a group's subject and description (nil: unchanged); only admins may, unless the group's
// settings let every participant edit its info.
func (s *session) UpdateGroup(ctx context.Context, group string, subject, description *string) (channels.Group, error) {
	if subject != nil {
		checked, err := checkSubject(*subject)
		if err != nil {
			return channels.Group{}, err
		}
		subject = &checked
	}
	if description != nil && len([]rune(*description)) > maxDescription {
		return channels.Group{}, failure("invalid_description", "a group's description is at most %d characters",
			maxDescription)
	}
	return s.changeGroup(ctx, group, roleEditor, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (map[string]string, string, error) {
		if subject != nil {
			g.Subject = *subject
		}
		if description != nil {
			g.Description = *description
		}
		return nil, channels.GroupUpdated, s.p.net.UpdateGroup(ctx, tx, *g)
	})
}

// ChangeParticipants adds, removes, promotes or demotes participants; only admins may, and the owner is neither
// removed nor demoted.
func (s *session) ChangeParticipants(ctx context.Context, group, action string, participants []string) ([]channels.ParticipantResult, error) {
	switch action {
	case "add", "remove", "promote", "demote":
	default:
		return nil, failure("invalid_action", "%q is not a participant change (add, remove, promote, demote)", action)
	}
	var results []channels.ParticipantResult
	_, err := s.changeGroup(ctx, group, roleAdmin, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (map[string]string, string, error) {
		told := map[string]string{}
		roles := map[string]string{}
		for _, m := range g.Members {
			roles[m.Number] = m.Role
		}
		results = make([]channels.ParticipantResult, 0, len(participants))
		others := ""
		for _, raw := range participants {
			n, f, err := s.changeParticipant(ctx, tx, g.Address, action, raw, actor, roles, told)
			if err != nil {
				return nil, "", err
			}
			results = append(results, channels.ParticipantResult{Address: n, OK: f == nil, Failure: f})
			if f == nil {
				others = channels.GroupParticipantsChanged
			}
		}
		return told, others, nil
	})
	return results, err
}

// changeParticipant applies action to one participant, keeping roles (number → role) current and recording in
// told what the participant's instance is to be told.
func (s *session) changeParticipant(ctx context.Context, tx store.Tx, group, action, raw, actor string,
	roles, told map[string]string) (string, *channels.Failure, error) {
	if action == "add" {
		n, f := s.addable(ctx, tx, raw, actor)
		if f != nil {
			return n, f, nil
		}
		if roles[n] != "" {
			return n, failure("already_participant", "%s is a participant already", n), nil
		}
		if err := s.p.net.AddMember(ctx, tx, store.SandboxGroupMember{GroupAddress: group, Number: n,
			Role: roleMember, JoinedAt: now()}); err != nil {
			return n, nil, err
		}
		roles[n], told[n] = roleMember, channels.GroupCreated
		return n, nil, nil
	}
	n, err := normalizeNumber(raw)
	if err != nil {
		return raw, failure("invalid_address", "%v", err), nil
	}
	role := roles[n]
	switch {
	case role == "":
		return n, failure("not_a_participant", "%s is not a participant", n), nil
	case role == roleOwner && action != "promote":
		return n, failure("not_permitted", "the group's owner is neither removed nor demoted"), nil
	case action == "remove":
		if err := s.p.net.RemoveMember(ctx, tx, group, n); err != nil {
			return n, nil, err
		}
		delete(roles, n)
		told[n] = channels.GroupLeft
	case role == roleOwner: // promoting the owner changes nothing
	default:
		newRole := roleAdmin
		if action == "demote" {
			newRole = roleMember
		}
		if err := s.p.net.SetRole(ctx, tx, group, n, newRole); err != nil {
			return n, nil, err
		}
		roles[n] = newRole
	}
	return n, nil, nil
}

// InviteLink returns the group's invite link, a new one (the old one stops working) when revoke is set or none was
// issued yet; only admins may.
func (s *session) InviteLink(ctx context.Context, group string, revoke bool) (string, error) {
	var code string
	_, err := s.changeGroup(ctx, group, roleAdmin, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (map[string]string, string, error) {
		if g.InviteCode != nil && !revoke {
			code = *g.InviteCode
			return nil, "", nil
		}
		code = rand.Text()
		g.InviteCode = &code
		return nil, "", s.p.net.UpdateGroup(ctx, tx, *g)
	})
	if err != nil {
		return "", err
	}
	return inviteBase + code, nil
}

// JoinGroup joins the group an invite link (or its code) belongs to.
func (s *session) JoinGroup(ctx context.Context, invite string) (channels.Group, error) {
	if _, number := s.live(); number == "" {
		return channels.Group{}, notConnected()
	}
	invalid := failure("invalid_invite", "the invite is not one of a sandbox group, or it was revoked")
	code, err := inviteCode(invite)
	if err != nil {
		return channels.Group{}, invalid
	}
	address, err := s.p.net.GroupAddressByInvite(ctx, s.p.net.Reader(), code)
	if errors.Is(err, store.ErrNotFound) {
		return channels.Group{}, invalid
	}
	if err != nil {
		return channels.Group{}, err
	}
	return s.changeGroup(ctx, address, "", func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (map[string]string, string, error) {
		if g.InviteCode == nil || *g.InviteCode != code {
			return nil, "", invalid // revoked meanwhile
		}
		if _, ok := member(*g, actor); ok {
			return nil, "", nil
		}
		return nil, channels.GroupParticipantsChanged, s.p.net.AddMember(ctx, tx, store.SandboxGroupMember{GroupAddress: g.Address,
			Number: actor, Role: roleMember, JoinedAt: now()})
	})
}

// LeaveGroup leaves a group; an owner who leaves hands the group to the longest-serving admin, or participant.
func (s *session) LeaveGroup(ctx context.Context, group string) error {
	_, err := s.changeGroup(ctx, group, roleMember, func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (map[string]string, string, error) {
		const changed = channels.GroupParticipantsChanged
		if err := s.p.net.RemoveMember(ctx, tx, g.Address, actor); err != nil {
			return nil, "", err
		}
		if m, _ := member(*g, actor); m.Role != roleOwner {
			return nil, changed, nil
		}
		var heir *store.SandboxGroupMember
		for i, m := range g.Members {
			if m.Number != actor && (heir == nil || (m.Role == roleAdmin && heir.Role != roleAdmin)) {
				heir = &g.Members[i]
			}
		}
		if heir == nil {
			return nil, changed, nil
		}
		return nil, changed, s.p.net.SetRole(ctx, tx, g.Address, heir.Number, roleOwner)
	})
	return err
}

// access checks that a group was found and that number may act on it with the role needed ("" for anyone,
// roleMember for participants, roleAdmin for admins and the owner).
func access(g store.SandboxGroup, err error, group, number, needed string) error {
	if errors.Is(err, store.ErrNotFound) {
		return failure("group_not_found", "the sandbox network has no group %s", group)
	}
	if err != nil || needed == "" {
		return err
	}
	m, ok := member(g, number)
	if !ok {
		return failure("not_a_participant", "the instance is not a participant of %s", group)
	}
	if (needed == roleAdmin || needed == roleEditor && g.AdminsOnlyEdit) && m.Role == roleMember {
		return failure("not_group_admin", "only the group's admins may do that")
	}
	return nil
}

// changeGroup runs change on a group, locked, in a transaction, once the instance is found to hold the role
// needed. change returns what to tell whom (number → change) and what to tell the other participants but the
// instance ("" nothing); they are told in the same transaction, with the group as it is after the change.
func (s *session) changeGroup(ctx context.Context, group, needed string,
	change func(ctx context.Context, tx store.Tx, g *store.SandboxGroup, actor string) (told map[string]string, others string, err error)) (channels.Group, error) {
	rs, number := s.live()
	if number == "" {
		return channels.Group{}, notConnected()
	}
	var after channels.Group
	var letters []letter
	err := s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		g, err := s.p.net.Group(ctx, tx, group)
		if err := access(g, err, group, number, needed); err != nil {
			return err
		}
		told, others, err := change(ctx, tx, &g, number)
		if err != nil {
			return err
		}
		after, letters, err = s.tell(ctx, tx, group, number, told, others)
		return err
	})
	if err != nil {
		return channels.Group{}, err
	}
	s.wakeAll(rs, letters)
	return after, nil
}

// tell posts a group's change, in tx, to the participants named in told (number → change) and, with others
// (unless ""), to the other participants but actor. It returns the group as it is now and the letters posted.
func (s *session) tell(ctx context.Context, tx store.Tx, group, actor string, told map[string]string, others string) (channels.Group, []letter, error) {
	g, err := s.p.net.Group(ctx, tx, group)
	if err != nil {
		return channels.Group{}, nil, err
	}
	after, err := s.p.snapshot(ctx, tx, g)
	if err != nil {
		return channels.Group{}, nil, err
	}
	changes := map[string]string{}
	for n, change := range told {
		changes[n] = change
	}
	if others != "" {
		for _, m := range g.Members {
			if _, named := changes[m.Number]; !named && m.Number != actor {
				changes[m.Number] = others
			}
		}
	}
	numbers := make([]string, 0, len(changes))
	for n := range changes {
		numbers = append(numbers, n)
	}
	accounts, err := s.p.net.Accounts(ctx, tx, numbers)
	if err != nil {
		return channels.Group{}, nil, err
	}
	at := now()
	letters := make([]letter, 0, len(accounts))
	for _, a := range accounts {
		letters = append(letters, letter{to: a.Number, instance: a.InstanceID, due: at,
			env: envelope{Group: &mailGroup{Group: after, Change: changes[a.Number]}}})
	}
	return after, letters, s.p.post(ctx, tx, letters)
}

// snapshot is a group as the network reports it, its participants with their display names.
func (p *Provider) snapshot(ctx context.Context, db store.Querier, g store.SandboxGroup) (channels.Group, error) {
	numbers := make([]string, len(g.Members))
	for i, m := range g.Members {
		numbers[i] = m.Number
	}
	accounts, err := p.net.Accounts(ctx, db, numbers)
	if err != nil {
		return channels.Group{}, err
	}
	names := map[string]string{}
	for _, a := range accounts {
		names[a.Number] = a.DisplayName
	}
	out := channels.Group{Address: g.Address, Subject: g.Subject, Description: g.Description, CreatedAt: g.CreatedAt,
		Participants: make([]channels.Participant, len(g.Members)), Settings: channels.AdminsOnly(g.AdminsOnlySend, g.AdminsOnlyEdit)}
	for i, m := range g.Members {
		out.Participants[i] = channels.Participant{Address: m.Number, DisplayName: names[m.Number], Role: m.Role}
	}
	return out, nil
}
