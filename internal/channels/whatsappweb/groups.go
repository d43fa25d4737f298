//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/switchboard/switchboard/internal/channels"
)

// MaxSubject is WhatsApp's longest group subject, in characters; longer ones are refused (406).
const MaxSubject = 100

// groupJID is the JID of a group address, or a group_not_found failure.
func groupJID(address string) (types.JID, error) {
	j, err := types.ParseJID(address)
	if err != nil || j.Server != types.GroupServer {
		return types.EmptyJID, &channels.Failure{Code: "group_not_found", Detail: fmt.Sprintf("%q is not a WhatsApp group", address)}
	}
	return j, nil
}

// people are the JIDs of person addresses; an address that is no person's fails with invalid_address.
func people(addresses []string) ([]types.JID, error) {
	out := make([]types.JID, len(addresses))
	for i, a := range addresses {
		j, err := jidOf(a)
		if err != nil || j.Server == types.GroupServer {
			return nil, &channels.Failure{Code: "invalid_address", Detail: fmt.Sprintf("%q is not a person's WhatsApp address", a)}
		}
		out[i] = j
	}
	return out, nil
}

// groupClient is the connected client and the JID of a group address.
func (s *session) groupClient(group string) (Client, types.JID, error) {
	c, err := s.client()
	if err != nil {
		return nil, types.EmptyJID, err
	}
	j, err := groupJID(group)
	return c, j, err
}

func (s *session) CreateGroup(ctx context.Context, subject string, participants []string) (channels.Group, error) {
	c, err := s.client()
	if err != nil {
		return channels.Group{}, err
	}
	if strings.TrimSpace(subject) == "" || len([]rune(subject)) > MaxSubject {
		return channels.Group{}, &channels.Failure{Code: "invalid_subject",
			Detail: fmt.Sprintf("a WhatsApp group's subject has 1 to %d characters", MaxSubject)}
	}
	who, err := people(participants)
	if err != nil {
		return channels.Group{}, err
	}
	info, err := c.CreateGroup(ctx, subject, who)
	if err != nil {
		return channels.Group{}, failureOf(err)
	}
	g := s.group(ctx, info)
	// Participants WhatsApp could not add come back with an error code instead of being members.
	var kept []channels.Participant
	for i, p := range info.Participants {
		if p.Error == 0 {
			kept = append(kept, g.Participants[i])
			continue
		}
		g.Rejected = append(g.Rejected, channels.ParticipantResult{Address: g.Participants[i].Address,
			Failure: participantFailure(p.Error)})
	}
	g.Participants = kept
	return g, nil
}

func (s *session) GetGroup(ctx context.Context, group string) (channels.Group, error) {
	c, j, err := s.groupClient(group)
	if err != nil {
		return channels.Group{}, err
	}
	info, err := c.GroupInfo(ctx, j)
	if err != nil {
		return channels.Group{}, groupFailure(err)
	}
	return s.group(ctx, info), nil
}

func (s *session) UpdateGroup(ctx context.Context, group string, subject, description *string) (channels.Group, error) {
	c, j, err := s.groupClient(group)
	if err != nil {
		return channels.Group{}, err
	}
	if subject != nil {
		if strings.TrimSpace(*subject) == "" || len([]rune(*subject)) > MaxSubject {
			return channels.Group{}, &channels.Failure{Code: "invalid_subject",
				Detail: fmt.Sprintf("a WhatsApp group's subject has 1 to %d characters", MaxSubject)}
		}
		if err := c.SetGroupName(ctx, j, *subject); err != nil {
			return channels.Group{}, groupFailure(err)
		}
	}
	if description != nil {
		if err := c.SetGroupDescription(ctx, j, *description); err != nil {
			return channels.Group{}, groupFailure(err)
		}
	}
	return s.GetGroup(ctx, group)
}

func (s *session) ChangeParticipants(ctx context.Context, group, action string, participants []string) ([]channels.ParticipantResult, error) {
	var change whatsmeow.ParticipantChange
	switch action {
	case "add":
		change = whatsmeow.ParticipantChangeAdd
	case "remove":
		change = whatsmeow.ParticipantChangeRemove
	case "promote":
		change = whatsmeow.ParticipantChangePromote
	case "demote":
		change = whatsmeow.ParticipantChangeDemote
	default:
		return nil, &channels.Failure{Code: "invalid_action", Detail: fmt.Sprintf("%q is not add, remove, promote or demote", action)}
	}
	c, j, err := s.groupClient(group)
	if err != nil {
		return nil, err
	}
	who, err := people(participants)
	if err != nil {
		return nil, err
	}
	got, err := c.UpdateGroupParticipants(ctx, j, who, change)
	if err != nil {
		return nil, groupFailure(err)
	}
	// WhatsApp answers per participant, by JID (phone number or LID): each asked participant gets its answer.
	byUser := map[string]types.GroupParticipant{}
	for _, p := range got {
		for _, k := range []types.JID{p.JID, p.PhoneNumber, p.LID} {
			if !k.IsEmpty() {
				byUser[k.User] = p
			}
		}
	}
	out := make([]channels.ParticipantResult, len(participants))
	for i, a := range participants {
		out[i].Address = a
		p, ok := byUser[who[i].User]
		switch {
		case !ok:
			out[i].Failure = &channels.Failure{Code: "rejected", Detail: "WhatsApp did not answer for this participant"}
		case p.Error != 0:
			out[i].Failure = participantFailure(p.Error)
		default:
			out[i].OK = true
		}
	}
	return out, nil
}

func (s *session) InviteLink(ctx context.Context, group string, revoke bool) (string, error) {
	c, j, err := s.groupClient(group)
	if err != nil {
		return "", err
	}
	link, err := c.GroupInviteLink(ctx, j, revoke)
	if err != nil {
		return "", groupFailure(err)
	}
	return link, nil
}

// invitePrefix is how WhatsApp's invite links begin; JoinGroup takes a link or its code alone.
const invitePrefix = "https://chat.whatsapp.com/"

func (s *session) JoinGroup(ctx context.Context, invite string) (channels.Group, error) {
	c, err := s.client()
	if err != nil {
		return channels.Group{}, err
	}
	code := strings.TrimPrefix(strings.TrimSpace(invite), invitePrefix)
	if code == "" || strings.ContainsAny(code, " /:?") {
		return channels.Group{}, &channels.Failure{Code: "invalid_invite", Detail: "not a WhatsApp invite link or code"}
	}
	j, err := c.JoinGroupWithLink(ctx, code)
	if err != nil {
		return channels.Group{}, groupFailure(err)
	}
	info, err := c.GroupInfo(ctx, j)
	if err != nil {
		return channels.Group{Address: j.ToNonAD().String()}, nil
	}
	return s.group(ctx, info), nil
}

func (s *session) LeaveGroup(ctx context.Context, group string) error {
	c, j, err := s.groupClient(group)
	if err != nil {
		return err
	}
	if err := c.LeaveGroup(ctx, j); err != nil {
		return groupFailure(err)
	}
	return nil
}

// groupFailure is failureOf where WhatsApp's 404 means the group.
func groupFailure(err error) error {
	f := failureOf(err).(*channels.Failure)
	if f.Code == "not_found" {
		f.Code = "group_not_found"
	}
	return f
}

// participantFailure maps WhatsApp's per-participant codes.
func participantFailure(code int) *channels.Failure {
	switch code {
	case 403:
		return &channels.Failure{Code: "not_permitted", Detail: "the person's privacy settings do not let the account add them"}
	case 404:
		return &channels.Failure{Code: "recipient_not_on_network", Detail: "the number is not on WhatsApp"}
	case 409:
		return &channels.Failure{Code: "already_participant", Detail: "the person is a participant already"}
	case 401:
		return &channels.Failure{Code: "not_group_admin", Detail: "only the group's admins may do this"}
	}
	return &channels.Failure{Code: "rejected", Detail: fmt.Sprintf("WhatsApp refused the participant (code %d)", code)}
}

// MaxLookup is how many numbers one lookup asks WhatsApp about.
const MaxLookup = 100

// Lookup asks WhatsApp which numbers have an account; a number that has one comes back with its LID, so that
// the person's later messages under either address are one contact.
func (s *session) Lookup(ctx context.Context, addresses []string) ([]channels.LookupResult, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	if len(addresses) > MaxLookup {
		return nil, &channels.Failure{Code: "invalid_argument", Detail: fmt.Sprintf("at most %d numbers a lookup", MaxLookup)}
	}
	out := make([]channels.LookupResult, len(addresses))
	var phones []string
	for i, a := range addresses {
		out[i].Address = a
		norm, err := s.p.NormalizeAddress(a)
		if err != nil || norm[0] != '+' {
			return nil, &channels.Failure{Code: "invalid_address", Detail: fmt.Sprintf("%q is not a phone number", a)}
		}
		out[i].Normalized = norm
		phones = append(phones, norm)
	}
	if len(phones) == 0 {
		return out, nil
	}
	got, err := c.IsOnWhatsApp(ctx, phones)
	if err != nil {
		return nil, failureOf(err)
	}
	byNumber := map[string]types.IsOnWhatsAppResponse{}
	for _, r := range got {
		digits := strings.TrimPrefix(r.Query, "+")
		byNumber[digits] = r
		if !r.JID.IsEmpty() {
			byNumber[r.JID.User] = r
		}
	}
	for i := range out {
		r, ok := byNumber[out[i].Normalized[1:]]
		if !ok || !r.IsIn {
			continue
		}
		out[i].OnNetwork = true
		if r.VerifiedName != nil && r.VerifiedName.Details != nil {
			out[i].DisplayName = r.VerifiedName.Details.GetVerifiedName()
		}
		if r.JID.Server == types.HiddenUserServer {
			out[i].IDs = []string{r.JID.User + "@" + types.HiddenUserServer}
		}
	}
	return out, nil
}

// Block blocks or unblocks a person.
func (s *session) Block(ctx context.Context, address string, blocked bool) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	norm, err := s.p.NormalizeAddress(address)
	if err != nil {
		return &channels.Failure{Code: "invalid_address", Detail: err.Error()}
	}
	who, err := people([]string{norm})
	if err != nil {
		return err
	}
	action := events.BlocklistChangeActionUnblock
	if blocked {
		action = events.BlocklistChangeActionBlock
	}
	if err := c.UpdateBlocklist(ctx, who[0], action); err != nil {
		return failureOf(err)
	}
	return nil
}
