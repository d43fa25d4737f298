package webhook

import (
	"time"

	"github.com/switchboard/switchboard/store"
)

// Endpoint is a webhook endpoint as the service hands it out to its adapters (the API, the console): what its owner
// set and where it stands, without what only the store and the dispatcher read (the sealed secrets, static header
// values and broker credentials).
type Endpoint struct {
	ID          string
	WorkspaceID string
	// URL is the receiver's URL; for a broker, the broker's URL without its password.
	URL         string
	Description string
	// Events are the subscriptions: "*", event type names and family wildcards ("link.*").
	Events []string
	// InstanceIDs narrows the messaging events the endpoint receives to those of these instances (empty: all).
	InstanceIDs []string
	// HeaderNames are the names of the static headers, sorted; their values are never handed out.
	HeaderNames []string
	// RateLimit is the most deliveries per second; nil for no limit.
	RateLimit *int
	// Status is store.EndpointActive, store.EndpointPaused or store.EndpointDisabled; DisabledReason says why a
	// disabled one is ("gone", "failing", …).
	Status         string
	DisabledReason *string
	// FailingSince starts the current run of failures; nil while deliveries succeed.
	FailingSince *time.Time
	// PreviousSecretExpiresAt is when a rotated secret stops signing beside the current one; nil when none does.
	PreviousSecretExpiresAt *time.Time
	// Kind is store.EndpointKindEndpoint or store.EndpointKindHook.
	Kind string
	// ExpiresAt ends the subscription; nil for never.
	ExpiresAt *time.Time
	Filters   []Filter
	// Type is store.EndpointHTTPS or a broker type (TypeRabbitMQ, TypeNATS, TypeMQTT).
	Type string
	// Destination holds a broker endpoint's templates, defaults filled in, and never its URL (whose credentials
	// stay sealed); nil for an HTTPS endpoint.
	Destination *Destination
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Filter is a condition on an event's data. It is the stored filter itself: the store keeps it as JSON, and event
// matching (events.Matches) and live streams read that one shape, so a copy here would only be converted back.
type Filter = store.WebhookFilter

// Delivery is one event's delivery to one endpoint, as its log shows it.
type Delivery struct {
	ID          string
	WorkspaceID string
	EndpointID  string
	EventID     string
	EventType   string
	// Status is store.DeliveryPending, store.DeliverySucceeded, store.DeliveryFailed or store.DeliverySkipped.
	Status string
	// Attempts counts the attempts made so far.
	Attempts       int
	NextAttemptAt  *time.Time
	LastStatusCode *int
	LastError      *string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    *time.Time
}

// Attempt is one attempt of a delivery, as its log shows it.
type Attempt struct {
	ID              string
	DeliveryID      string
	StartedAt       time.Time
	DurationMS      int
	StatusCode      *int
	ErrorClass      *string
	ResponseExcerpt *string
	// ResponseHeaders are the receiver's response headers (nil when it gave no response, and for attempts logged
	// before they were kept).
	ResponseHeaders map[string]string
	// Signature is the webhook-signature header the attempt was sent with (nil for attempts logged before it was
	// kept).
	Signature *string
}

// DeliveryFilter narrows a delivery log; empty members match every delivery.
type DeliveryFilter struct {
	Status    string
	EventType string
}

func deliveryOf(d store.Delivery) Delivery {
	return Delivery{ID: d.ID, WorkspaceID: d.WorkspaceID, EndpointID: d.EndpointID, EventID: d.EventID,
		EventType: d.EventType, Status: d.Status, Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt,
		LastStatusCode: d.LastStatusCode, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		CompletedAt: d.CompletedAt}
}

func deliveriesOf(ds []store.Delivery) []Delivery {
	out := make([]Delivery, len(ds))
	for i, d := range ds {
		out[i] = deliveryOf(d)
	}
	return out
}

func attemptsOf(as []store.Attempt) []Attempt {
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = Attempt{ID: a.ID, DeliveryID: a.DeliveryID, StartedAt: a.StartedAt, DurationMS: a.DurationMS,
			StatusCode: a.StatusCode, ErrorClass: a.ErrorClass, ResponseExcerpt: a.ResponseExcerpt,
			ResponseHeaders: a.ResponseHeaders, Signature: a.Signature}
	}
	return out
}
