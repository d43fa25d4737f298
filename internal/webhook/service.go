package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

// ServiceConfig is what the webhook service needs from the engine of its process.
type ServiceConfig struct {
	// Box seals endpoint secrets and static headers with the server key.
	Box *sealbox.Box
	// Guard checks target URLs at registration (the Sender checks again at dial time).
	Guard *egress.Guard
	// Sender posts test pings; build it with the same Box and Guard as the dispatcher.
	Sender *Sender
	// Wake tells the process's dispatcher that deliveries were queued (redeliver, recover, enable, resume); nil when
	// none runs.
	Wake func()
	// Logger reports endpoints whose static headers do not open with the server key (default slog.Default()).
	Logger *slog.Logger
}

// Service is the webhooks capability: a workspace's endpoints (registration, secrets, pause, resume, enable,
// recovery, test pings), its delivery log and its event log. Its
// failures that a client can be told about are *problem.Error values.
type Service struct {
	db     *store.DB
	types  *events.Registry
	box    *sealbox.Box
	guard  *egress.Guard
	sender *Sender
	wake   func()
	log    *slog.Logger
}

// NewService returns the webhook service over db, whose catalogue is the registry of outbox. Returns an error if
// cfg lacks its Box, Guard or Sender.
func NewService(db *store.DB, outbox *events.Outbox, cfg ServiceConfig) (*Service, error) {
	if cfg.Box == nil || cfg.Guard == nil || cfg.Sender == nil {
		return nil, errors.New("webhook: the service needs a Box, a Guard and a Sender")
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{db: db, types: outbox.Types(), box: cfg.Box, guard: cfg.Guard, sender: cfg.Sender, wake: cfg.Wake,
		log: cfg.Logger}, nil
}

// endpointOf is a stored endpoint as the service hands it out: the names of its static headers, never their values,
// a broker's templates with their defaults, never its credentials, and when a rotated secret still signs. The
// signing secret is never part of it: only Create and RotateSecret return it, once.
func (s *Service) endpointOf(e store.WebhookEndpoint) Endpoint {
	headers, err := OpenHeaders(s.box, e.SealedHeaders, e.ID)
	if err != nil {
		// The server key changed (an operator mistake the dispatcher reports on every attempt): show the endpoint
		// rather than fail every list that contains it.
		s.log.Error("webhook endpoint's static headers do not open with the server key", "webhook_id", e.ID, "error", err)
	}
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	out := Endpoint{ID: e.ID, WorkspaceID: e.WorkspaceID, URL: e.URL, Description: e.Description, Events: e.Events,
		InstanceIDs: e.InstanceIDs, HeaderNames: names, RateLimit: e.RateLimit, Status: e.Status,
		DisabledReason: e.DisabledReason, FailingSince: e.FailingSince, Kind: e.Kind, ExpiresAt: e.ExpiresAt,
		Filters: e.Filters, Type: e.Type, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if out.Type == "" {
		out.Type = store.EndpointHTTPS
	}
	if IsBroker(e.Type) {
		d, err := OpenDestination(s.box, e)
		if err != nil {
			s.log.Error("webhook endpoint's destination does not open with the server key", "webhook_id", e.ID, "error", err)
		}
		var shown Destination
		switch e.Type {
		case TypeRabbitMQ:
			shown.Exchange, shown.RoutingKey = d.Exchange, orDefault(d.RoutingKey, defaultRoutingKey)
		case TypeNATS:
			shown.Subject = orDefault(d.Subject, defaultSubject)
		case TypeMQTT:
			shown.Topic = orDefault(d.Topic, defaultTopic)
		}
		out.Destination = &shown
	}
	if e.PreviousSecret != nil && e.PreviousSecretUntil != nil && e.PreviousSecretUntil.After(time.Now()) {
		out.PreviousSecretExpiresAt = e.PreviousSecretUntil
	}
	return out
}

// endpointResult converts what a store call about endpoint id returned, its error as a client is told it.
func (s *Service) endpointResult(e store.WebhookEndpoint, err error, id string) (Endpoint, error) {
	if err != nil {
		return Endpoint{}, clientError(err, "webhook endpoint", id)
	}
	return s.endpointOf(e), nil
}

// orDefault is a template as the API shows it: the default when none was given.
func orDefault(template, fallback string) string {
	if template == "" {
		return fallback
	}
	return template
}

// clientError turns the store's errors into the problems a client is told; what and id name the object a not-found
// error is about. Other errors are internal and returned as they are.
func clientError(err error, what, id string) error {
	var disabled *store.EndpointDisabledError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &disabled):
		why := "Switchboard disabled this endpoint"
		switch disabled.Reason {
		case "gone":
			why = "This endpoint was disabled because its receiver answered 410 Gone"
		case "failing":
			why = "This endpoint was disabled because its deliveries kept failing without a success"
		}
		return problem.New(problem.WebhookDisabled, fmt.Sprintf("%s. Enable it with POST /api/v1/webhooks/%s/enable "+
			"(with recover_since to send what it missed).", why, disabled.EndpointID))
	case errors.Is(err, store.ErrDeliveryInFlight):
		return problem.New(problem.DeliveryInFlight, "The delivery is being attempted right now; retry when the attempt is recorded (GET the delivery to see it).")
	case errors.Is(err, store.ErrNotFound):
		return problem.Errorf(problem.NotFound, "There is no %s %s in this workspace.", what, id)
	case errors.Is(err, store.ErrConflict):
		return problem.New(problem.Conflict, "The request conflicts with the current state of the object.")
	}
	return err
}
