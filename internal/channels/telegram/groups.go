package telegram

import (
	"context"
	"strconv"

	"github.com/go-telegram/bot"

	"github.com/switchboard/switchboard/internal/channels"
)

// Groups are the chats the bot was added to. Bots cannot create them, add people or join by invite; they can read a
// group, rename it, manage its invite link, remove (ban, then unban: a kick) and promote members, and leave.

func errCannot(what string) *channels.Failure {
	return &channels.Failure{Code: "capability_not_supported", Detail: "Telegram bots cannot " + what}
}

// CreateGroup is refused: Telegram bots cannot create groups.
func (s *session) CreateGroup(context.Context, string, []string) (channels.Group, error) {
	return channels.Group{}, errCannot("create groups")
}

// JoinGroup is refused: a bot is added to a group by a person.
func (s *session) JoinGroup(context.Context, string) (channels.Group, error) {
	return channels.Group{}, errCannot("join groups by invite; add the bot to the group instead")
}

// GetGroup reads a group: title, description and its administrators (bots cannot list every member).
func (s *session) GetGroup(ctx context.Context, group string) (channels.Group, error) {
	c, err := s.b.GetChat(ctx, &bot.GetChatParams{ChatID: chatID(group)})
	if err != nil {
		return channels.Group{}, s.failure(err, channels.Outbound{})
	}
	g := channels.Group{Address: strconv.FormatInt(c.ID, 10), Subject: c.Title, Description: c.Description,
		Settings: settingsOf(c.Permissions)}
	admins, err := s.b.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: chatID(group)})
	if err != nil {
		return channels.Group{}, s.failure(err, channels.Outbound{})
	}
	for _, a := range admins {
		switch {
		case a.Owner != nil && a.Owner.User != nil:
			p := userParty(*a.Owner.User)
			g.Participants = append(g.Participants, channels.Participant{Address: p.Address, DisplayName: p.DisplayName, Role: "owner"})
		case a.Administrator != nil:
			p := userParty(a.Administrator.User)
			g.Participants = append(g.Participants, channels.Participant{Address: p.Address, DisplayName: p.DisplayName, Role: "admin"})
		}
	}
	return g, nil
}

// UpdateGroup sets a group's title and description.
func (s *session) UpdateGroup(ctx context.Context, group string, subject, description *string) (channels.Group, error) {
	if subject != nil {
		if _, err := s.b.SetChatTitle(ctx, &bot.SetChatTitleParams{ChatID: chatID(group), Title: *subject}); err != nil {
			return channels.Group{}, s.failure(err, channels.Outbound{})
		}
	}
	if description != nil {
		if _, err := s.b.SetChatDescription(ctx, &bot.SetChatDescriptionParams{ChatID: chatID(group), Description: *description}); err != nil {
			return channels.Group{}, s.failure(err, channels.Outbound{})
		}
	}
	return s.GetGroup(ctx, group)
}

// ChangeParticipants removes (a kick: ban then unban, so the person may come back by invite), promotes and demotes
// members; adding is refused for each participant.
func (s *session) ChangeParticipants(ctx context.Context, group, action string, participants []string) ([]channels.ParticipantResult, error) {
	out := make([]channels.ParticipantResult, len(participants))
	for i, who := range participants {
		out[i] = channels.ParticipantResult{Address: who}
		user, err := strconv.ParseInt(who, 10, 64)
		if err != nil {
			out[i].Failure = &channels.Failure{Code: "invalid_address", Detail: "Telegram members are named by their numeric user ID"}
			continue
		}
		chat := chatID(group)
		switch action {
		case "remove":
			if _, err = s.b.BanChatMember(ctx, &bot.BanChatMemberParams{ChatID: chat, UserID: user}); err == nil {
				_, err = s.b.UnbanChatMember(ctx, &bot.UnbanChatMemberParams{ChatID: chat, UserID: user, OnlyIfBanned: true})
			}
		case "promote", "demote":
			on := action == "promote"
			_, err = s.b.PromoteChatMember(ctx, &bot.PromoteChatMemberParams{ChatID: chat, UserID: user,
				CanManageChat: on, CanDeleteMessages: on, CanRestrictMembers: on, CanInviteUsers: on, CanPinMessages: on})
		default:
			out[i].Failure = errCannot(action + " members")
			continue
		}
		if err != nil {
			f, _ := s.failure(err, channels.Outbound{}).(*channels.Failure)
			if f == nil {
				return nil, err
			}
			out[i].Failure = f
			continue
		}
		out[i].OK = true
	}
	return out, nil
}

// InviteLink returns the group's primary invite link; revoke makes a new one (the old stops working).
func (s *session) InviteLink(ctx context.Context, group string, revoke bool) (string, error) {
	if !revoke {
		c, err := s.b.GetChat(ctx, &bot.GetChatParams{ChatID: chatID(group)})
		if err != nil {
			return "", s.failure(err, channels.Outbound{})
		}
		if c.InviteLink != "" {
			return c.InviteLink, nil
		}
	}
	link, err := s.b.ExportChatInviteLink(ctx, &bot.ExportChatInviteLinkParams{ChatID: chatID(group)})
	if err != nil {
		return "", s.failure(err, channels.Outbound{})
	}
	return link, nil
}

// LeaveGroup makes the bot leave a group.
func (s *session) LeaveGroup(ctx context.Context, group string) error {
	if _, err := s.b.LeaveChat(ctx, &bot.LeaveChatParams{ChatID: chatID(group)}); err != nil {
		return s.failure(err, channels.Outbound{})
	}
	return nil
}
