package channels

import (
	"context"

	"github.com/switchboard/switchboard/internal/problem"
)

// PairingCode asks the network for a code to type into the account's app. Returns NotFound,
// CapabilityNotSupported, Conflict when the instance is not awaiting auth, and InstanceNotConnected.
func (s *Service) PairingCode(ctx context.Context, workspaceID, instanceID, phone string) (string, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapAuthPairing)
	if err != nil {
		return "", err
	}
	if Status(inst.Status) != StatusAwaitingAuth && Status(inst.Status) != StatusConnecting {
		return "", problem.Errorf(problem.Conflict, "Instance %s is %s; a pairing code is only issued while it is awaiting_auth.", instanceID, inst.Status)
	}
	out, err := call(ctx, s, inst, cmdPairingCode, pairingArgs{Phone: phone})
	if err != nil {
		return "", err
	}
	return out.Code, nil
}

// Control applies a test control of a simulated network to an instance's session. A receipt control names the
// message by its msg_ ID; the network knows it by its own. Returns NotFound, CapabilityNotSupported for an instance
// whose network takes no test controls, and InstanceNotConnected.
func (s *Service) Control(ctx context.Context, workspaceID, instanceID string, c Control) error {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, "")
	if err != nil {
		return err
	}
	if c.Kind == "receipt" {
		m, err := s.GetMessage(ctx, workspaceID, instanceID, c.MessageID)
		if err != nil {
			return err
		}
		if m.ProviderMessageID == nil {
			return problem.Errorf(problem.Conflict, "Message %s is %s and has no network ID yet; a receipt can only follow a sent message.", m.ID, m.Status)
		}
		c.MessageID = *m.ProviderMessageID
	}
	if c.Kind == "poll_vote" {
		if err := s.pollVoteControl(ctx, workspaceID, instanceID, &c); err != nil {
			return err
		}
	}
	_, err = call(ctx, s, inst, cmdControl, c)
	if p, ok := err.(*problem.Error); ok && p.Code == problem.CapabilityNotSupported {
		return problem.Errorf(problem.CapabilityNotSupported, "The %s provider takes no test controls; they are for sandbox instances.", inst.Provider)
	}
	return err
}
