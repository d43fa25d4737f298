package channels

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// groupsOnly is a session that manages groups and nothing else.
type groupsOnly struct {
	Session
	created []string
}

func (g *groupsOnly) CreateGroup(_ context.Context, subject string, participants []string) (Group, error) {
	g.created = append(g.created, subject)
	return Group{Address: "g1", Subject: subject, Participants: []Participant{{Address: participants[0]}}}, nil
}
func (g *groupsOnly) GetGroup(context.Context, string) (Group, error) { return Group{}, nil }
func (g *groupsOnly) UpdateGroup(context.Context, string, *string, *string) (Group, error) {
	return Group{}, nil
}
func (g *groupsOnly) ChangeParticipants(context.Context, string, string, []string) ([]ParticipantResult, error) {
	return nil, nil
}
func (g *groupsOnly) InviteLink(context.Context, string, bool) (string, error) {
	return "", &Failure{Code: "not_permitted", Detail: "not an admin"}
}
func (g *groupsOnly) JoinGroup(context.Context, string) (Group, error) { return Group{}, nil }
func (g *groupsOnly) LeaveGroup(context.Context, string) error         { return nil }

// withHandler also runs commands of its provider's own.
type withHandler struct{ groupsOnly }

func (h *withHandler) Handle(_ context.Context, c Command) (json.RawMessage, error) {
	return json.RawMessage(`{"handled":"` + c.Op + `"}`), nil
}

// Invoke runs a defined command on a session with its interface (arguments and result as JSON), answers
// ErrUnsupported for a session without it, keeps a session's *Failure, refuses arguments that do not decode, and
// hands ops of the provider's own to its Handler.
func TestInvoke(t *testing.T) {
	ctx := context.Background()
	g := &groupsOnly{}
	args, _ := json.Marshal(groupCreateArgs{Subject: "Team", Participants: []string{"+9995550101"}})
	res, err := Invoke(ctx, g, Command{Op: cmdGroupCreate.Op(), Args: args})
	var group Group
	if err != nil || json.Unmarshal(res, &group) != nil || group.Subject != "Team" || !slices.Equal(g.created, []string{"Team"}) {
		t.Fatalf("groups.create: %s, %v", res, err)
	}
	if _, err := Invoke(ctx, g, Command{Op: cmdMarkRead.Op(), Args: json.RawMessage(`{}`)}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a command of an interface the session lacks: %v", err)
	}
	var f *Failure
	if _, err := Invoke(ctx, g, Command{Op: cmdGroupInvite.Op(), Args: json.RawMessage(`{"group":"g1"}`)}); !errors.As(err, &f) || f.Code != "not_permitted" {
		t.Errorf("a session's failure: %v", err)
	}
	if _, err := Invoke(ctx, g, Command{Op: cmdGroupCreate.Op(), Args: json.RawMessage(`[`)}); err == nil {
		t.Error("arguments that do not decode were run")
	}
	if res, err := Invoke(ctx, g, Command{Op: cmdGroupLeave.Op()}); err != nil || string(res) != "{}" {
		t.Errorf("a command without result: %s, %v", res, err)
	}
	if _, err := Invoke(ctx, g, Command{Op: "sandbox.deliver"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("an op of the provider's own without a Handler: %v", err)
	}
	if res, err := Invoke(ctx, &withHandler{}, Command{Op: "sandbox.deliver"}); err != nil || string(res) != `{"handled":"sandbox.deliver"}` {
		t.Errorf("an op of the provider's own: %s, %v", res, err)
	}
}

// Every command the service sends is defined once, under the op the runtime stores in instance_commands.
func TestCommandOps(t *testing.T) {
	want := []string{"auth.pairing_code", "chats.mark_read", "chats.organize", "chats.typing", "contacts.block", "contacts.lookup", "contacts.picture", "groups.create",
		"groups.get", "groups.invite", "groups.join", "groups.leave", "groups.participants", "groups.settings", "groups.update", "labels.chat", "labels.save",
		"pictures.set", "presence.send", "profile.get", "profile.set", "session.control", "session.logout", "templates.list"}
	var got []string
	for op := range commands {
		got = append(got, op)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("commands %v, want %v (an op renamed breaks commands queued by a process of the previous version)", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second definition of an op was accepted")
		}
	}()
	defineCommand("groups.create", func(context.Context, GroupManager, none) (none, error) { return none{}, nil })
}
