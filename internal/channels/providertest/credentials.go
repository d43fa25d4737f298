package providertest

import (
	"bytes"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
)

// credentials disconnects and reconnects an instance through the service and the runtime, then logs it out.
func (s *suite) credentials(t *testing.T) {
	i := s.e.connect(t)
	before := i.state(t)
	if before.Account == "" {
		t.Fatal("the connected instance has no account: the session reported none through Sink.Connected")
	}
	i.disconnect(t)
	after := i.state(t)
	if !bytes.Equal(after.Credentials, before.Credentials) {
		t.Errorf("disconnect changed the credentials (%d bytes, then %d)", len(before.Credentials), len(after.Credentials))
	}
	if after.Account != before.Account {
		t.Errorf("disconnect changed the account from %q to %q", before.Account, after.Account)
	}
	mark := len(s.e.calls.of(i.id))
	i.connect(t)
	if again := i.state(t); again.Account != before.Account {
		t.Errorf("reconnecting with the kept credentials connected %q, not %q", again.Account, before.Account)
	}
	for _, c := range s.e.calls.of(i.id)[mark:] {
		if c.Kind == "qr" || (c.Kind == "state" && c.Status == channels.StatusAwaitingAuth) {
			t.Errorf("reconnecting with the kept credentials asked to pair again: %s", c)
		}
	}
	i.logout(t)
	if out := i.state(t); out.Credentials != nil || out.Account != "" {
		t.Errorf("logout kept the credentials (%d bytes) or the account (%q)", len(out.Credentials), out.Account)
	}
	t.Run(string(RuleLogoutRevokes), func(t *testing.T) {
		s.applies(t, RuleLogoutRevokes)
		if before.Credentials == nil {
			t.Fatal("the provider pairs, yet its session saved no credentials to restore from")
		}
		inst := i.raw(t)
		inst.Credentials = before.Credentials
		d := s.detach(t, s.e.net.Provider(), inst)
		c := d.calls.await(t, "a session with the dropped credentials to connect or be refused", d.id, func(c Call) bool {
			switch c.Kind {
			case "connected", "qr":
				return true
			case "state":
				switch c.Status {
				case channels.StatusLoggedOut, channels.StatusAwaitingAuth, channels.StatusFailed,
					channels.StatusDisconnected:
					return true
				}
			}
			return false
		})
		if c.Kind == "connected" {
			t.Errorf("the network still accepts the credentials logout dropped: the session reported %s", c)
		}
	})
}
