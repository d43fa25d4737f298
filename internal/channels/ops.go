package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// The ops of the Commands the service sends to a session through Sessions.Do. Invoke runs them on the session in
// the process that holds it; their Args and results are the JSON of the types below.
const (
	OpLogout            = "session.logout"      // no args
	OpPairingCode       = "auth.pairing_code"   // pairingArgs → pairingResult
	OpMarkRead          = "chats.mark_read"     // markReadArgs
	OpGroupCreate       = "groups.create"       // groupCreateArgs → Group
	OpGroupGet          = "groups.get"          // groupArgs → Group
	OpGroupUpdate       = "groups.update"       // groupUpdateArgs → Group
	OpGroupParticipants = "groups.participants" // participantsArgs → []ParticipantResult
	OpGroupInvite       = "groups.invite"       // inviteArgs → inviteResult
	OpGroupJoin         = "groups.join"         // joinArgs → Group
	OpGroupLeave        = "groups.leave"        // groupArgs
	OpContactsLookup    = "contacts.lookup"     // lookupArgs → []LookupResult (the provider's)
	OpContactsBlock     = "contacts.block"      // blockArgs
	OpControl           = "session.control"     // Control
	OpTemplates         = "templates.list"      // no args → []TemplateInfo
)

// ErrUnsupported is the error of an op the session cannot run (it lacks the interface of the capability).
var ErrUnsupported = errors.New("channels: the session does not support this command")

type pairingArgs struct {
	Phone string `json:"phone"`
}
type pairingResult struct {
	Code string `json:"code"`
}
type markReadArgs struct {
	Chat string `json:"chat"`
	UpTo string `json:"up_to"`
}
type groupArgs struct {
	Group string `json:"group"`
}
type groupCreateArgs struct {
	Subject      string   `json:"subject"`
	Participants []string `json:"participants"`
}
type groupUpdateArgs struct {
	Group       string  `json:"group"`
	Subject     *string `json:"subject,omitempty"`
	Description *string `json:"description,omitempty"`
}
type participantsArgs struct {
	Group        string   `json:"group"`
	Action       string   `json:"action"`
	Participants []string `json:"participants"`
}
type inviteArgs struct {
	Group  string `json:"group"`
	Revoke bool   `json:"revoke"`
}
type inviteResult struct {
	Invite string `json:"invite"`
}
type joinArgs struct {
	Invite string `json:"invite"`
}
type lookupArgs struct {
	Addresses []string `json:"addresses"`
}
type blockArgs struct {
	Address string `json:"address"`
	Blocked bool   `json:"blocked"`
}

// Invoke runs a command on a session: the runtime calls it, in the process that holds the session, for every
// Command that Sessions.Do carries. Ops of the provider's own (not in the list above) go to the session's Handler.
// A session without the interface an op needs answers ErrUnsupported; a session's own failure (*Failure) is
// returned as it is.
func Invoke(ctx context.Context, sess Session, c Command) (json.RawMessage, error) {
	decode := func(v any) error {
		if len(c.Args) == 0 {
			return nil
		}
		if err := json.Unmarshal(c.Args, v); err != nil {
			return fmt.Errorf("channels: %s: arguments: %w", c.Op, err)
		}
		return nil
	}
	var (
		out any
		err error
	)
	gm, _ := sess.(GroupManager)
	cd, _ := sess.(ContactDirectory)
	switch c.Op {
	case OpLogout:
		return nil, sess.Logout(ctx)
	case OpPairingCode:
		p, ok := sess.(Pairer)
		if !ok {
			return nil, ErrUnsupported
		}
		var a pairingArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		var code string
		code, err = p.PairingCode(ctx, a.Phone)
		out = pairingResult{Code: code}
	case OpMarkRead:
		r, ok := sess.(ReadMarker)
		if !ok {
			return nil, ErrUnsupported
		}
		var a markReadArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		err = r.MarkRead(ctx, a.Chat, a.UpTo)
	case OpTemplates:
		tp, ok := sess.(Templater)
		if !ok {
			return nil, ErrUnsupported
		}
		out, err = tp.Templates(ctx)
	case OpControl:
		ctl, ok := sess.(Controller)
		if !ok {
			return nil, ErrUnsupported
		}
		var a Control
		if err := decode(&a); err != nil {
			return nil, err
		}
		err = ctl.Control(ctx, a)
	case OpGroupCreate, OpGroupGet, OpGroupUpdate, OpGroupParticipants, OpGroupInvite, OpGroupJoin, OpGroupLeave:
		if gm == nil {
			return nil, ErrUnsupported
		}
		out, err = invokeGroup(ctx, gm, c.Op, decode)
	case OpContactsLookup, OpContactsBlock:
		if cd == nil {
			return nil, ErrUnsupported
		}
		if c.Op == OpContactsLookup {
			var a lookupArgs
			if err := decode(&a); err != nil {
				return nil, err
			}
			out, err = cd.Lookup(ctx, a.Addresses)
		} else {
			var a blockArgs
			if err := decode(&a); err != nil {
				return nil, err
			}
			err = cd.Block(ctx, a.Address, a.Blocked)
		}
	default:
		h, ok := sess.(Handler)
		if !ok {
			return nil, ErrUnsupported
		}
		return h.Handle(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	if out == nil {
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(out)
}

func invokeGroup(ctx context.Context, gm GroupManager, op string, decode func(any) error) (any, error) {
	switch op {
	case OpGroupCreate:
		var a groupCreateArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return gm.CreateGroup(ctx, a.Subject, a.Participants)
	case OpGroupUpdate:
		var a groupUpdateArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return gm.UpdateGroup(ctx, a.Group, a.Subject, a.Description)
	case OpGroupParticipants:
		var a participantsArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return gm.ChangeParticipants(ctx, a.Group, a.Action, a.Participants)
	case OpGroupInvite:
		var a inviteArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		invite, err := gm.InviteLink(ctx, a.Group, a.Revoke)
		return inviteResult{Invite: invite}, err
	case OpGroupJoin:
		var a joinArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return gm.JoinGroup(ctx, a.Invite)
	}
	var a groupArgs
	if err := decode(&a); err != nil {
		return nil, err
	}
	if op == OpGroupLeave {
		return nil, gm.LeaveGroup(ctx, a.Group)
	}
	return gm.GetGroup(ctx, a.Group)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
