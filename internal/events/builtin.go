package events

import (
	"fmt"

	"github.com/switchboard/switchboard/gen"
)

// builtinPayloads are the generated data types of every built-in event type. A new event type is a component
// schema marked x-event-type in api/openapi.yaml (plus `make generate`) and its generated type here; FromSpec
// refuses either without the other.
var builtinPayloads = []any{
	gen.WebhookPingEvent{},
	gen.WebhookEndpointDisabledEvent{},
	gen.WebhookDeliveryExhaustedEvent{},
	gen.LinkCreatedEvent{},
	gen.LinkUpdatedEvent{},
	gen.LinkDeletedEvent{},
	gen.LinkClickedEvent{},
	gen.LinkExpiredEvent{},
	gen.LinkMaxClicksReachedEvent{},
	gen.LinkListedEvent{},
	gen.InstanceCreatedEvent{},
	gen.InstanceUpdatedEvent{},
	gen.InstanceDeletedEvent{},
	gen.InstanceStatusChangedEvent{},
	gen.InstanceQrUpdatedEvent{},
	gen.MessageReceivedEvent{},
	gen.MessageSentEvent{},
	gen.MessageStatusUpdatedEvent{},
	gen.MessageFailedEvent{},
	gen.ChatUpdatedEvent{},
	gen.GroupCreatedEvent{},
	gen.GroupUpdatedEvent{},
	gen.GroupParticipantsChangedEvent{},
	gen.GroupLeftEvent{},
	gen.ContactUpdatedEvent{},
	gen.PresenceUpdatedEvent{},
	gen.CallReceivedEvent{},
	gen.PollVotedEvent{},
	gen.RouteCompletedEvent{},
	gen.RouteFailedEvent{},
	gen.BotRepliedEvent{},
	gen.BotHandoffEvent{},
	gen.BotFailedEvent{},
}

// Builtin returns a new registry of the built-in event types of the embedded spec. The embedded spec and the
// payload list are compiled in, so a mismatch is a programming error that the package's tests catch: Builtin
// panics on it.
func Builtin() *Registry {
	spec, err := gen.GetSwagger()
	if err != nil {
		panic(fmt.Sprintf("events: load the embedded spec: %v", err))
	}
	r, err := FromSpec(spec, builtinPayloads...)
	if err != nil {
		panic(err)
	}
	return r
}
