package providertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
)

// Call is one report of a session to its sink, as the suite records it. Kind says which method: state, qr,
// connected, inbound, receipt, group or contact; the fields of that method are set.
type Call struct {
	Instance    string
	Kind        string
	Status      channels.Status // state
	Reason      string          // state
	Party       channels.Party  // connected, contact
	Credentials []byte          // connected
	Inbound     channels.Inbound
	Receipt     channels.Receipt
	Group       channels.Group
	Change      string // group
	Presence    channels.Presence
	Vote        channels.PollVote
	Incoming    channels.IncomingCall
	// Err is what the sink answered.
	Err error
}

func (c Call) String() string {
	switch c.Kind {
	case "state":
		return fmt.Sprintf("state %s (%s)", c.Status, c.Reason)
	case "connected", "contact":
		return fmt.Sprintf("%s %s", c.Kind, c.Party.Address)
	case "inbound":
		return fmt.Sprintf("inbound %s from %s in %s: %q", c.Inbound.ProviderID, c.Inbound.From.Address, c.Inbound.Chat, c.Inbound.Text)
	case "receipt":
		return fmt.Sprintf("receipt %s %s", c.Receipt.ProviderID, c.Receipt.Status)
	case "vote":
		return fmt.Sprintf("vote of %s on %s: %v", c.Vote.Voter.Address, c.Vote.Poll, c.Vote.Options)
	case "presence":
		return fmt.Sprintf("presence %s of %s in %q", c.Presence.State, c.Presence.From.Address, c.Presence.Chat)
	case "group":
		return fmt.Sprintf("group %s %s", c.Group.Address, c.Change)
	}
	return c.Kind
}

// tap is a Sink in front of another (or of nothing: then every call is accepted): it shows each call to seen
// before it goes on, and to done with the answer.
type tap struct {
	instance string
	next     channels.Sink
	seen     func(ctx context.Context, c Call)
	done     func(c Call)
}

func (t *tap) pass(ctx context.Context, c Call, call func(channels.Sink) error) error {
	c.Instance = t.instance
	if t.seen != nil {
		t.seen(ctx, c)
	}
	if t.next != nil {
		c.Err = call(t.next)
	}
	if t.done != nil {
		t.done(c)
	}
	return c.Err
}

func (t *tap) State(ctx context.Context, s channels.Status, reason string) error {
	return t.pass(ctx, Call{Kind: "state", Status: s, Reason: reason}, func(n channels.Sink) error {
		return n.State(ctx, s, reason)
	})
}

func (t *tap) QR(ctx context.Context, code string, expires time.Time) error {
	return t.pass(ctx, Call{Kind: "qr"}, func(n channels.Sink) error { return n.QR(ctx, code, expires) })
}

func (t *tap) Connected(ctx context.Context, account channels.Party, credentials []byte) error {
	return t.pass(ctx, Call{Kind: "connected", Party: account, Credentials: credentials}, func(n channels.Sink) error {
		return n.Connected(ctx, account, credentials)
	})
}

func (t *tap) Inbound(ctx context.Context, m channels.Inbound) error {
	return t.pass(ctx, Call{Kind: "inbound", Inbound: m}, func(n channels.Sink) error { return n.Inbound(ctx, m) })
}

func (t *tap) Receipt(ctx context.Context, r channels.Receipt) error {
	return t.pass(ctx, Call{Kind: "receipt", Receipt: r}, func(n channels.Sink) error { return n.Receipt(ctx, r) })
}

func (t *tap) GroupChanged(ctx context.Context, g channels.Group, change string) error {
	return t.pass(ctx, Call{Kind: "group", Group: g, Change: change}, func(n channels.Sink) error {
		return n.GroupChanged(ctx, g, change)
	})
}

func (t *tap) ContactChanged(ctx context.Context, p channels.Party) error {
	return t.pass(ctx, Call{Kind: "contact", Party: p}, func(n channels.Sink) error { return n.ContactChanged(ctx, p) })
}

func (t *tap) Presence(ctx context.Context, p channels.Presence) error {
	return t.pass(ctx, Call{Kind: "presence", Presence: p}, func(n channels.Sink) error { return n.Presence(ctx, p) })
}

func (t *tap) PollVote(ctx context.Context, v channels.PollVote) error {
	return t.pass(ctx, Call{Kind: "vote", Vote: v}, func(n channels.Sink) error { return n.PollVote(ctx, v) })
}

func (t *tap) ChatOrganized(ctx context.Context, chat string, o channels.ChatOrganization) error {
	return t.pass(ctx, Call{Kind: "organized"}, func(n channels.Sink) error { return n.ChatOrganized(ctx, chat, o) })
}

func (t *tap) LabelChanged(ctx context.Context, l channels.NetworkLabel) error {
	return t.pass(ctx, Call{Kind: "label"}, func(n channels.Sink) error { return n.LabelChanged(ctx, l) })
}

func (t *tap) ChatLabelled(ctx context.Context, chat, label string, on bool) error {
	return t.pass(ctx, Call{Kind: "labelled"}, func(n channels.Sink) error { return n.ChatLabelled(ctx, chat, label, on) })
}

func (t *tap) Call(ctx context.Context, c channels.IncomingCall) (channels.CallAnswer, error) {
	var a channels.CallAnswer
	err := t.pass(ctx, Call{Kind: "call", Incoming: c}, func(n channels.Sink) (err error) {
		a, err = n.Call(ctx, c)
		return err
	})
	return a, err
}

var _ channels.BatchSink = (*tap)(nil)

// Record shows each report of a run as its own call, and passes the run on in one call.
func (t *tap) Record(ctx context.Context, reports []channels.Report) (int, error) {
	calls := make([]Call, len(reports))
	for i, r := range reports {
		calls[i] = Call{Instance: t.instance, Kind: "receipt"}
		if r.Inbound != nil {
			calls[i].Kind, calls[i].Inbound = "inbound", *r.Inbound
		} else if r.Receipt != nil {
			calls[i].Receipt = *r.Receipt
		}
		if t.seen != nil {
			t.seen(ctx, calls[i])
		}
	}
	n, err := len(reports), error(nil)
	if t.next != nil {
		n, err = channels.RecordEach(ctx, t.next, reports)
	}
	if t.done != nil {
		for i := range calls {
			if i == n {
				calls[i].Err = err
			}
			if i <= n && i < len(calls) {
				t.done(calls[i])
			}
		}
	}
	return n, err
}

// recorder keeps calls in the order they were made.
type recorder struct {
	mu    sync.Mutex
	calls []Call
}

func (r *recorder) add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// all returns the calls so far.
func (r *recorder) all() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// await waits until a call of the instance that match accepts was recorded, and returns it.
func (r *recorder) await(t *testing.T, what, instance string, match func(Call) bool) Call {
	t.Helper()
	var found Call
	await.Until(t, what, func() []Call { return r.of(instance) }, func(cs []Call) bool {
		for _, c := range cs {
			if match(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

// of returns the calls of an instance so far.
func (r *recorder) of(instance string) []Call {
	var out []Call
	for _, c := range r.all() {
		if c.Instance == instance {
			out = append(out, c)
		}
	}
	return out
}
