package providertest

import (
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
)

// sinkAfterCommit drives the reports a session makes — its account connected, a message in, a send and its
// receipt — while Network.Committed checks, inside each sink call, that the provider's own records of it are
// committed already. It judges every sink call of the run so far, those of the other checks too.
func (s *suite) sinkAfterCommit(t *testing.T) {
	s.applies(t, RuleSinkAfterCommit)
	i := s.e.connect(t)
	id := i.send(t, unique("committed before it is told"))
	m := i.awaitMessage(t, id, func(m message) bool { return m.ProviderID != "" })
	info := s.e.provider.Info()
	for _, status := range []string{"delivered", "read"} {
		if !info.Has(channels.Capability("receipts." + status)) {
			continue
		}
		if err := i.acct.Peer.Receipt(bounded(t), m.ProviderID, status); err != nil {
			t.Fatalf("the peer's %s receipt: %v", status, err)
		}
		i.awaitMessage(t, id, func(m message) bool { return m.Status == status })
	}
	if len(s.e.calls.of(i.id)) == 0 {
		t.Fatal("the instance's session reported nothing to judge")
	}
	for _, u := range s.e.refusedCommits() {
		t.Errorf("the sink was told before the provider committed: %s", u)
	}
}
