//go:build whatsapp_web

package whatsappweb

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wastore "go.mau.fi/whatsmeow/store"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// call is one report of a session to its sink.
type call struct {
	kind     string // state, qr, connected, inbound, receipt, group, contact
	status   channels.Status
	reason   string
	code     string
	party    channels.Party
	creds    []byte
	in       channels.Inbound
	receipt  channels.Receipt
	group    channels.Group
	change   string
	presence channels.Presence
	vote     channels.PollVote
	incoming channels.IncomingCall
	org      channels.ChatOrganization
	label    channels.NetworkLabel
	on       bool
}

// recorder is a Sink that keeps every report.
type recorder struct {
	mu    sync.Mutex
	calls []call
	// reject is the answer to calls.
	reject bool
}

func (r *recorder) add(c call) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return nil
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) State(_ context.Context, s channels.Status, reason string) error {
	return r.add(call{kind: "state", status: s, reason: reason})
}
func (r *recorder) QR(_ context.Context, code string, _ time.Time) error {
	return r.add(call{kind: "qr", code: code})
}
func (r *recorder) Connected(_ context.Context, p channels.Party, creds []byte) error {
	return r.add(call{kind: "connected", party: p, creds: creds})
}
func (r *recorder) Inbound(_ context.Context, m channels.Inbound) error {
	return r.add(call{kind: "inbound", in: m})
}
func (r *recorder) Receipt(_ context.Context, rc channels.Receipt) error {
	return r.add(call{kind: "receipt", receipt: rc})
}
func (r *recorder) GroupChanged(_ context.Context, g channels.Group, change string) error {
	return r.add(call{kind: "group", group: g, change: change})
}
func (r *recorder) Presence(_ context.Context, p channels.Presence) error {
	return r.add(call{kind: "presence", presence: p})
}

func (r *recorder) PollVote(_ context.Context, v channels.PollVote) error {
	return r.add(call{kind: "vote", vote: v})
}

func (r *recorder) ChatOrganized(_ context.Context, chat string, o channels.ChatOrganization) error {
	return r.add(call{kind: "organized", reason: chat, org: o})
}

func (r *recorder) LabelChanged(_ context.Context, l channels.NetworkLabel) error {
	return r.add(call{kind: "label", label: l})
}

func (r *recorder) ChatLabelled(_ context.Context, chat, label string, on bool) error {
	return r.add(call{kind: "labelled", reason: chat, label: channels.NetworkLabel{ID: label}, on: on})
}

func (r *recorder) Call(_ context.Context, c channels.IncomingCall) (channels.CallAnswer, error) {
	r.mu.Lock()
	reject := r.reject
	r.mu.Unlock()
	return channels.CallAnswer{Reject: reject}, r.add(call{kind: "call", incoming: c})
}

func (r *recorder) ContactChanged(_ context.Context, p channels.Party) error {
	return r.add(call{kind: "contact", party: p})
}

// rig is one instance's session on the fake network, its account and a peer account.
type rig struct {
	t      *testing.T
	db     *store.DB
	n      *network
	p      *Provider
	sink   *recorder
	sess   *session
	me     *account
	peer   *account
	client atomic.Pointer[fakeClient]
	// instance is the ID of the instance the sessions are of, config its config.
	instance string
	config   map[string]any
	done     chan struct{}
	err      error
}

// newRig opens a session of an instance on a fresh fake network; paired has the account's phone scan its first
// QR code, as a user does. The session runs until the test ends.
func newRig(t *testing.T, db *store.DB, paired bool) *rig {
	t.Helper()
	return newRigConfig(t, db, paired, map[string]any{})
}

// newRigConfig is newRig with the instance's config.
func newRigConfig(t *testing.T, db *store.DB, paired bool, config map[string]any) *rig {
	t.Helper()
	r := &rig{t: t, db: db, n: newNetwork(), sink: &recorder{}, done: make(chan struct{}), config: config}
	r.me = r.n.add("15550100001", "Me")
	r.peer = r.n.add("4915112345678", "Peer")
	if paired {
		r.n.scanning = append(r.n.scanning, r.me)
	}
	r.p = New(db, Options{NewClient: func(dev *wastore.Device) Client {
		c := r.n.NewClient(dev).(*fakeClient)
		r.client.Store(c)
		return c
	}})
	r.open(nil)
	if paired {
		r.await("the session to connect", func(c call) bool { return c.kind == "connected" })
	}
	return r
}

// open starts the session of the rig's instance with credentials creds.
func (r *rig) open(creds []byte) {
	if r.instance == "" {
		// The instance exists, as every instance a provider opens does: the device store deletes the devices of
		// instances that are gone.
		ctx := context.Background()
		ws, err := r.db.Workspaces.Create(ctx, "whatsapp")
		if err != nil {
			r.t.Fatal(err)
		}
		inst := &store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "wa", Provider: Name, Status: "connecting"}
		if err := r.db.Instances.Create(ctx, r.db.Bun(), inst); err != nil {
			r.t.Fatal(err)
		}
		r.instance = inst.ID
	}
	s, err := r.p.Open(channels.Instance{ID: r.instance, Credentials: creds, Config: r.config}, r.sink)
	if err != nil {
		r.t.Fatal(err)
	}
	r.sess = s.(*session)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.done = done
	go func() {
		defer close(done)
		r.err = r.sess.Run(ctx)
	}()
	r.t.Cleanup(func() {
		cancel()
		await.Receive(r.t, "the session's Run to return", done)
	})
}

// emit hands an event to the session as whatsmeow's dispatcher does.
func (r *rig) emit(evt any) { r.client.Load().emit(evt) }

// await waits for a report that match accepts and returns it.
func (r *rig) await(what string, match func(call) bool) call {
	r.t.Helper()
	var found call
	await.Until(r.t, what, r.sink.all, func(cs []call) bool {
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

// ended waits for Run to return and returns what it returned.
func (r *rig) ended() error {
	r.t.Helper()
	await.Receive(r.t, "the session's Run to return", r.done)
	return r.err
}

// since are the reports after the first n.
func (r *rig) since(n int) []call { return r.sink.all()[n:] }

func (c call) String() string { return fmt.Sprintf("%s %s %q", c.kind, c.status, c.reason) }

// db is an SQLite database for tests of one session (the device store needs one; both dialects are tested by the
// device store's own tests and the conformance suite).
func sqlite(t *testing.T) *store.DB { return storetest.SQLite(t) }
