package providertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/api"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// failureCodes provokes the refusals every network has — a send to a stranger, a message without what its type
// needs, a reference to a message that does not exist, every optional call with arguments the network cannot
// take, a push that does not verify — and the harness's Faults, then judges every error the provider returned
// in the whole run.
func (s *suite) failureCodes(t *testing.T) {
	i := s.e.connect(t)
	sess := i.session(t)
	c := bounded(t)
	stranger, peer := s.e.net.Stranger, i.acct.Peer.Address()
	command := func(where string, err error) { s.e.observe(where, err, true) }
	results := func(where string, rs []channels.ParticipantResult) {
		for _, r := range rs {
			if r.Failure != nil {
				command(where+" (for "+r.Address+")", r.Failure)
			}
		}
	}

	snd := i.sender(t)
	info := s.e.provider.Info()
	for _, m := range []struct {
		where string
		out   channels.Outbound
	}{
		{"a send to an address with no account", channels.Outbound{Chat: stranger, Type: channels.TypeText, Text: "hello?"}},
		{"a send of a text without text", channels.Outbound{Chat: peer, Type: channels.TypeText}},
		{"an edit of a message that does not exist", channels.Outbound{Chat: peer, Type: channels.TypeEdit,
			Target: "no-such-message", Text: "edited"}},
		{"a reaction to a message that does not exist", channels.Outbound{Chat: peer, Type: channels.TypeReaction,
			Target: "no-such-message", Emoji: "👍"}},
		{"a reply to a message that does not exist", channels.Outbound{Chat: peer, Type: channels.TypeText,
			ReplyTo: "no-such-message", Text: "a reply"}},
		{"a template without a name", channels.Outbound{Chat: peer, Type: channels.TypeTemplate,
			Template: &channels.Template{}}},
	} {
		if m.out.Type == channels.TypeTemplate && !info.Has(channels.CapTemplate) {
			continue // the service refuses it before it is queued: no provider sees a message it does not list
		}
		m.out.MessageID = store.NewID("msg")
		_, err := snd.Send(c, m.out)
		s.e.observe(m.where, err, false)
	}
	if r, ok := sess.(channels.ReadMarker); ok {
		command("marking a stranger's chat read", r.MarkRead(c, stranger, "no-such-message"))
	}
	if g, ok := sess.(channels.GroupManager); ok {
		_, err := g.GetGroup(c, stranger)
		command("reading a group that does not exist", err)
		gr, err := g.CreateGroup(c, "", []string{stranger})
		command("creating a group without a subject", err)
		results("creating a group with a stranger", gr.Rejected)
		rs, err := g.ChangeParticipants(c, stranger, "promote", []string{stranger})
		command("changing the participants of a group that does not exist", err)
		results("changing the participants of a group that does not exist", rs)
		_, err = g.InviteLink(c, stranger, false)
		command("the invite of a group that does not exist", err)
		_, err = g.JoinGroup(c, "not an invite")
		command("joining with something that is no invite", err)
		command("leaving a group that does not exist", g.LeaveGroup(c, stranger))
	}
	if d, ok := sess.(channels.ContactDirectory); ok {
		_, err := d.Lookup(c, []string{stranger, "not an address"})
		command("looking up a stranger and something that is no address", err)
		command("blocking something that is no address", d.Block(c, "not an address", true))
	}
	if p, ok := sess.(channels.Pairer); ok {
		_, err := p.PairingCode(c, "not a phone")
		command("a pairing code for a connected instance", err)
	}
	if tp, ok := sess.(channels.Templater); ok {
		_, err := tp.Templates(c)
		command("listing the templates", err)
	}
	if r, ok := s.e.provider.(channels.PushReceiver); ok {
		_, err := r.Receive(c, i.raw(t), &tap{instance: i.id}, channels.Push{Method: http.MethodPost,
			Header: map[string][]string{}, Body: []byte(`{"forged":true}`)})
		if !errors.Is(err, channels.ErrPushUnverified) {
			t.Errorf("a push without the instance's secret was not refused as unverified: %v", err)
		}
	}
	for _, f := range i.acct.Faults {
		s.e.observe("the fault "+f.Name, f.Run(c, sess), false)
	}

	codes := documentedCodes(t)
	seen := map[string]int{}
	judge := func(where string, err error, command bool) {
		var f *channels.Failure
		switch {
		case errors.As(err, &f):
			seen[f.Code]++
			if !codes[f.Code] {
				t.Errorf("%s: the failure code %q is neither a code of the problem table nor one of the spec's "+
					"MessageFailure codes (%v)", where, f.Code, err)
			}
		case errors.Is(err, channels.ErrUnsupported), errors.Is(err, channels.ErrNotConnected),
			errors.Is(err, channels.ErrPushUnverified), errors.Is(err, context.Canceled):
		case command:
			t.Errorf("%s: %v is no *channels.Failure: the API would answer it 500 internal_error", where, err)
		}
	}
	for _, o := range s.e.errors() {
		judge(o.where, o.err, o.command)
	}
	for _, call := range s.e.calls.all() {
		if call.Kind == "receipt" && call.Receipt.Failure != nil {
			judge(fmt.Sprintf("the failure receipt of %s", call.Receipt.ProviderID), call.Receipt.Failure, true)
		}
	}
	for id, code := range s.e.failedMessages(t) {
		judge("message "+id, &channels.Failure{Code: code}, true)
	}
	t.Logf("failure codes judged (how often): %v", seen)
}

var documented struct {
	once  sync.Once
	codes map[string]bool
	err   error
}

// documentedCodes are the codes a provider's failure may have: the problem table's, and those the spec's
// MessageFailure schema lists in its table of codes.
func documentedCodes(t *testing.T) map[string]bool {
	t.Helper()
	documented.once.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
		if err != nil {
			documented.err = err
			return
		}
		schema := doc.Components.Schemas["MessageFailure"]
		if schema == nil || schema.Value == nil {
			documented.err = errors.New("the spec has no MessageFailure schema")
			return
		}
		codes := map[string]bool{}
		for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(schema.Value.Description, -1) {
			codes[m[1]] = true
		}
		if len(codes) == 0 {
			documented.err = errors.New("the spec's MessageFailure schema lists no codes")
			return
		}
		for _, p := range problem.All() {
			codes[string(p.Code)] = true
		}
		documented.codes = codes
	})
	if documented.err != nil {
		t.Fatal(documented.err)
	}
	return documented.codes
}
