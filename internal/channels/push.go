package channels

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Templates lists the account's message templates, asked of the network now (messages.template).
func (s *Service) Templates(ctx context.Context, workspaceID, instanceID string) ([]TemplateInfo, error) {
	inst, _, err := s.capable(ctx, workspaceID, instanceID, CapTemplate)
	if err != nil {
		return nil, err
	}
	return call(ctx, s, inst, cmdTemplates, none{})
}

// Receive hands a network's push to the provider of the instance the hook URL names, which verifies it with the
// instance's own secret and applies it through the instance's sink. The instance is looked up by its ID alone (the
// push carries no API key); what binds the push to a workspace is the secret that verifies it. Returns a NotFound
// problem for an unknown instance, HooksNotSupported for one whose provider takes no pushes, and SignatureInvalid
// when the push does not verify.
func (s *Service) Receive(ctx context.Context, instanceID string, p Push) (PushAnswer, error) {
	inst, prov, sink, err := s.Open(ctx, instanceID)
	if errors.Is(err, store.ErrNotFound) {
		return PushAnswer{}, notFound("instance", instanceID)
	}
	if err != nil {
		return PushAnswer{}, err
	}
	rcv, ok := prov.(PushReceiver)
	if !ok {
		name := prov.Info().Name
		return PushAnswer{}, problem.New(problem.HooksNotSupported, fmt.Sprintf(
			"Instance %s is a %s instance, and %s takes no pushes: nothing is received at this URL.", instanceID,
			name, name))
	}
	ans, err := rcv.Receive(ctx, inst, sink, p)
	var f *Failure
	switch {
	case errors.Is(err, ErrPushUnverified):
		return PushAnswer{}, problem.New(problem.SignatureInvalid, fmt.Sprintf(
			"The push does not verify with instance %s's secret; nothing of it was applied.", instanceID))
	case errors.As(err, &f):
		// A verified push the provider cannot read: the network's own bug, told in its words.
		return PushAnswer{}, problem.New(problem.ValidationFailed, f.Detail)
	}
	return ans, err
}
