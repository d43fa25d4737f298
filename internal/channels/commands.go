package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// A command is a call of a session's method that can cross processes: the runtime carries it (Sessions.Do) to the
// process holding the session, where Invoke runs it. Each is defined once, with defineCommand, beside the optional
// interface whose method it calls (provider.go): its op on the wire, its argument and result types and how it calls
// the method. A new capability is an interface and its commands; nothing else changes.
type command[A, R any] struct{ op string }

// Op is the command's name on the wire (instance_commands.op).
func (c command[A, R]) Op() string { return c.op }

// none is the argument or the result of a command that has none.
type none struct{}

// runner decodes a command's arguments, runs it on a session and returns its result.
type runner func(ctx context.Context, sess Session, args json.RawMessage) (any, error)

// commands are the runners by op, filled by defineCommand when the package is initialised.
var commands = map[string]runner{}

// defineCommand registers the command op that runs call on sessions implementing I (others answer
// ErrUnsupported). Defining an op twice is a programming error.
func defineCommand[I, A, R any](op string, call func(ctx context.Context, impl I, args A) (R, error)) command[A, R] {
	if _, dup := commands[op]; dup {
		panic("channels: the command " + op + " is defined twice")
	}
	commands[op] = func(ctx context.Context, sess Session, raw json.RawMessage) (any, error) {
		impl, ok := sess.(I)
		if !ok {
			return nil, ErrUnsupported
		}
		var args A
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, fmt.Errorf("channels: %s: arguments: %w", op, err)
			}
		}
		return call(ctx, impl, args)
	}
	return command[A, R]{op: op}
}

// ErrUnsupported is the error of a command the session cannot run (it lacks the interface of the capability).
var ErrUnsupported = errors.New("channels: the session does not support this command")

// Invoke runs a command on a session: the runtime calls it, in the process that holds the session, for every
// Command that Sessions.Do carries. Ops of the provider's own (none defined here) go to the session's Handler. A
// session without the interface an op needs answers ErrUnsupported; a session's own failure (*Failure) is returned
// as it is.
func Invoke(ctx context.Context, sess Session, c Command) (json.RawMessage, error) {
	run, ok := commands[c.Op]
	if !ok {
		h, ok := sess.(Handler)
		if !ok {
			return nil, ErrUnsupported
		}
		return h.Handle(ctx, c)
	}
	out, err := run(ctx, sess, c.Args)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// call runs a command on an instance's live session through the runtime and decodes its result. The session's
// failures become problems: no live session is InstanceNotConnected, a network refusal keeps its code where the
// table has it (recipient_not_on_network) and is a Conflict with the network's words otherwise.
func call[A, R any](ctx context.Context, s *Service, inst store.Instance, c command[A, R], args A) (R, error) {
	var out R
	if offline(Status(inst.Status)) {
		return out, problem.Errorf(problem.InstanceNotConnected, "Instance %s is %s; connect it first.", inst.ID, inst.Status)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return out, err
	}
	res, err := s.sessions.Do(ctx, inst.ID, Command{Op: c.op, Args: raw})
	if err != nil {
		return out, sessionError(inst, err)
	}
	if len(res) > 0 {
		err = json.Unmarshal(res, &out)
	}
	return out, err
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
