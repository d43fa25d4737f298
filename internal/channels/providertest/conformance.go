package providertest

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Conformance runs the conformance suite on the provider h's network starts: every check, on SQLite and on
// PostgreSQL (each a database of its own, as the runtime holds every instance of it). The test binary's TestMain
// must call storetest.Main.
func Conformance(t *testing.T, h Harness) {
	t.Helper()
	for rule := range h.NotApplicable {
		if !slices.Contains(Optional, rule) {
			t.Errorf("the harness declares %q not applicable; only the Optional rules may be", rule)
		}
	}
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		s := &suite{h: h, e: start(t, db, h)}
		s.declarations(t)
		t.Run(string(RuleCapabilities), s.capabilities)
		t.Run(string(RuleSendOnce), s.sendOnce)
		t.Run(string(RuleStatusesForward), s.statuses)
		t.Run(string(RuleCredentials), s.credentials)
		t.Run(string(RuleLeaseLost), s.leaseLost)
		// The last three also judge what the checks before them recorded.
		t.Run(string(RuleSinkAfterCommit), s.sinkAfterCommit)
		t.Run(string(RuleAddresses), s.addresses)
		t.Run(string(RuleFailureCodes), s.failureCodes)
	})
}

// suite is one run of the checks over one engine.
type suite struct {
	h Harness
	e *engine
}

// declarations fails a harness whose declarations the provider's Info or the network contradicts.
func (s *suite) declarations(t *testing.T) {
	t.Helper()
	info := s.e.provider.Info()
	_, noReceipts := s.h.NotApplicable[RuleStatusesForward]
	if noReceipts && (info.Has(channels.CapDelivered) || info.Has(channels.CapRead)) {
		t.Errorf("the provider lists receipts, yet the harness declares %q not applicable", RuleStatusesForward)
	}
	_, noRevoke := s.h.NotApplicable[RuleLogoutRevokes]
	if noRevoke && (info.Has(channels.CapAuthQR) || info.Has(channels.CapAuthPairing)) {
		t.Errorf("the provider pairs, so logout can revoke what it paired, yet the harness declares %q not applicable",
			RuleLogoutRevokes)
	}
	_, noState := s.h.NotApplicable[RuleSinkAfterCommit]
	if noState != (s.e.net.Committed == nil) {
		t.Errorf("Network.Committed is set: %v; %q declared not applicable: %v (one or the other)",
			s.e.net.Committed != nil, RuleSinkAfterCommit, noState)
	}
}

// applies skips t when the harness declared the rule not applicable, with the reason it gave.
func (s *suite) applies(t *testing.T, rule Rule) {
	t.Helper()
	if reason, ok := s.h.NotApplicable[rule]; ok {
		t.Skip("not applicable: " + reason)
	}
}

// unique makes a text no other message of the run has.
func unique(prefix string) string { return prefix + " " + rand.Text()[:10] }

// bounded bounds a call to the provider or the network by the time a wait of the suite takes.
func bounded(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), await.Timeout)
	t.Cleanup(cancel)
	return c
}

// detached is a session the suite runs itself, outside the runtime (another process, or credentials the engine
// dropped), reporting to a recorder of its own and to nothing else.
type detached struct {
	id    string
	sess  channels.Session
	calls *recorder
}

// detach opens and runs a session of p for inst until the test ends; what its Run returns is observed.
func (s *suite) detach(t *testing.T, p channels.Provider, inst channels.Instance) *detached {
	t.Helper()
	d := &detached{id: inst.ID, calls: &recorder{}}
	inst.Runtime = s.e.hub // the runtime of the process it stands for reaches the suite's sessions as this one does
	sess, err := p.Open(inst, &tap{instance: inst.ID, done: d.calls.add})
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	d.sess = sess
	run, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.e.observe("the Run of a session", sess.Run(run), false)
	}()
	t.Cleanup(func() {
		cancel()
		await.Receive(t, "the session's Run to return once stopped", done)
	})
	return d
}

// connected waits until the detached session reported its account, or itself, connected.
func (d *detached) connected(t *testing.T) {
	t.Helper()
	d.calls.await(t, "the session to connect", d.id, func(c Call) bool {
		return c.Kind == "connected" || (c.Kind == "state" && c.Status == channels.StatusConnected)
	})
}
