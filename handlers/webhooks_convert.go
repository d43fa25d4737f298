package handlers

import (
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/webhook"
)

// The webhook service speaks its own types; these map them to and from the API's, which only the adapters (this
// package, and the console's forms, which are checked against the same schemas) know.

// apiWebhook is an endpoint as the API shows it. Lists are never null in it, and the type is always given.
func apiWebhook(e webhook.Endpoint) gen.Webhook {
	w := gen.Webhook{Id: e.ID, Object: gen.WebhookObjectWebhook, Url: e.URL, Description: e.Description,
		Events: e.Events, HeaderNames: e.HeaderNames, RateLimit: e.RateLimit, Status: gen.WebhookStatus(e.Status),
		FailingSince: e.FailingSince, PreviousSecretExpiresAt: e.PreviousSecretExpiresAt, CreatedAt: e.CreatedAt,
		UpdatedAt: e.UpdatedAt, ExpiresAt: e.ExpiresAt}
	if w.Events == nil {
		w.Events = []string{}
	}
	if w.HeaderNames == nil {
		w.HeaderNames = []string{}
	}
	w.InstanceIds = append([]string{}, e.InstanceIDs...)
	kind := gen.WebhookKind(e.Kind)
	filters := apiFilters(e.Filters)
	typ := gen.WebhookType(e.Type)
	w.Kind, w.Filters, w.Type = &kind, &filters, &typ
	if d := e.Destination; d != nil {
		switch e.Type {
		case webhook.TypeRabbitMQ:
			w.Rabbitmq = &gen.WebhookRabbitMQ{Exchange: &d.Exchange, RoutingKey: &d.RoutingKey}
		case webhook.TypeNATS:
			w.Nats = &gen.WebhookNATS{Subject: &d.Subject}
		case webhook.TypeMQTT:
			w.Mqtt = &gen.WebhookMQTT{Topic: &d.Topic}
		}
	}
	if e.DisabledReason != nil {
		reason := gen.WebhookDisabledReason(*e.DisabledReason)
		w.DisabledReason = &reason
	}
	return w
}

// apiFilters maps an endpoint's payload filters to the API's.
func apiFilters(fs []webhook.Filter) gen.WebhookFilters {
	out := make(gen.WebhookFilters, len(fs))
	for i, f := range fs {
		out[i] = gen.WebhookFilter{Pointer: f.Pointer, Op: gen.WebhookFilterOp(f.Op), Value: f.Value}
		if f.Values != nil {
			values := f.Values
			out[i].Values = &values
		}
	}
	return out
}

// NewEndpointOf reads the API's WebhookCreate (checked against its schema) as a webhook.NewEndpoint: the one reading
// of a registration, whether it came to the API or from a console form.
func NewEndpointOf(b gen.WebhookCreate) webhook.NewEndpoint {
	n := webhook.NewEndpoint{URL: b.Url, Events: b.Events, RateLimit: b.RateLimit, ExpiresAt: b.ExpiresAt}
	if b.InstanceIds != nil {
		n.InstanceIDs = *b.InstanceIds
	}
	if b.Description != nil {
		n.Description = *b.Description
	}
	if b.Headers != nil {
		n.Headers = *b.Headers
	}
	if b.Kind != nil {
		n.Kind = string(*b.Kind)
	}
	if b.Filters != nil {
		n.Filters = filtersOf(*b.Filters)
	}
	if b.Type != nil {
		n.Type = string(*b.Type)
	}
	if r := b.Rabbitmq; r != nil {
		n.DestinationFor = append(n.DestinationFor, webhook.TypeRabbitMQ)
		n.Destination.Exchange, n.Destination.RoutingKey = deref(r.Exchange), deref(r.RoutingKey)
	}
	if b.Nats != nil {
		n.DestinationFor = append(n.DestinationFor, webhook.TypeNATS)
		n.Destination.Subject = deref(b.Nats.Subject)
	}
	if b.Mqtt != nil {
		n.DestinationFor = append(n.DestinationFor, webhook.TypeMQTT)
		n.Destination.Topic = deref(b.Mqtt.Topic)
	}
	return n
}

// EndpointChangeOf reads the API's WebhookUpdate (PATCH /api/v1/webhooks/{id}, the console's edit form) as the
// change webhook.Service.Update makes: absent fields stay, null ones clear.
func EndpointChangeOf(b gen.WebhookUpdate) webhook.EndpointChange {
	c := webhook.EndpointChange{URL: b.Url, Description: b.Description, Events: b.Events, InstanceIDs: b.InstanceIds}
	if b.Headers != nil {
		headers := map[string]string(*b.Headers)
		c.Headers = &headers
	}
	switch {
	case !b.RateLimit.IsSpecified():
	case b.RateLimit.IsNull():
		c.RateLimit = patch.Clear[int]()
	default:
		c.RateLimit = patch.Set(b.RateLimit.MustGet())
	}
	switch {
	case !b.ExpiresAt.IsSpecified():
	case b.ExpiresAt.IsNull():
		c.ExpiresAt = patch.Clear[time.Time]()
	default:
		c.ExpiresAt = patch.Set(b.ExpiresAt.MustGet())
	}
	if b.Filters != nil {
		filters := filtersOf(*b.Filters)
		c.Filters = &filters
	}
	return c
}

// filtersOf reads the API's payload filters (an endpoint's, a stream's) as the service's.
func filtersOf(fs gen.WebhookFilters) []webhook.Filter {
	out := make([]webhook.Filter, len(fs))
	for i, f := range fs {
		out[i] = webhook.Filter{Pointer: f.Pointer, Op: string(f.Op), Value: f.Value}
		if f.Values != nil {
			out[i].Values = *f.Values
		}
	}
	return out
}

// apiDelivery maps a delivery to the API's WebhookDelivery, without its attempts and event.
func apiDelivery(d webhook.Delivery) gen.WebhookDelivery {
	return gen.WebhookDelivery{Id: d.ID, Object: gen.WebhookDeliveryObjectWebhookDelivery, WebhookId: d.EndpointID,
		EventId: d.EventID, EventType: d.EventType, Status: gen.WebhookDeliveryStatus(d.Status), AttemptCount: d.Attempts,
		NextAttemptAt: d.NextAttemptAt, LastStatusCode: d.LastStatusCode, LastError: d.LastError,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, CompletedAt: d.CompletedAt}
}

// apiAttempt maps an attempt of a delivery to the API's WebhookAttempt.
func apiAttempt(a webhook.Attempt) gen.WebhookAttempt {
	out := gen.WebhookAttempt{Id: a.ID, StartedAt: a.StartedAt, DurationMs: a.DurationMS, StatusCode: a.StatusCode,
		ErrorClass: a.ErrorClass, ResponseExcerpt: a.ResponseExcerpt, Signature: a.Signature}
	if a.ResponseHeaders != nil {
		headers := a.ResponseHeaders
		out.ResponseHeaders = &headers
	}
	return out
}

// deliveryFilterOf reads a delivery log's query parameters.
func deliveryFilterOf(p gen.ListWebhookDeliveriesParams) webhook.DeliveryFilter {
	var f webhook.DeliveryFilter
	if p.Status != nil {
		f.Status = string(*p.Status)
	}
	if p.EventType != nil {
		f.EventType = *p.EventType
	}
	return f
}
