package store

import (
	"context"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// Endpoint kinds.
const (
	EndpointKindEndpoint = "endpoint"
	EndpointKindHook     = "hook"
)

// WebhookFilter is a condition on an event's data at a JSON pointer (see events.Matches).
type WebhookFilter struct {
	Pointer string `json:"pointer"`
	// Op is "equals", "in", "exists" or "prefix".
	Op     string `json:"op"`
	Value  any    `json:"value,omitempty"`
	Values []any  `json:"values,omitempty"`
}

// Endpoint statuses.
const (
	EndpointActive   = "active"
	EndpointPaused   = "paused"
	EndpointDisabled = "disabled"
)

// WebhookEndpoint is a receiver of a workspace's events. Secrets are stored sealed (see package webhook); the store
// never sees them in clear.
type WebhookEndpoint struct {
	bun.BaseModel `bun:"table:webhook_endpoints,alias:e"`

	ID          string   `bun:"id,pk"`
	WorkspaceID string   `bun:"workspace_id"`
	URL         string   `bun:"url"`
	Description string   `bun:"description"`
	Events      []string `bun:"events,type:json"`
	// InstanceIDs narrows the messaging events it receives to those of these instances (nil or empty: all).
	InstanceIDs []string `bun:"instance_ids,type:json"`
	// SealedHeaders is the JSON object of static delivery headers, sealed like the secret; nil when there are none.
	SealedHeaders       *string    `bun:"sealed_headers"`
	RateLimit           *int       `bun:"rate_limit"`
	Status              string     `bun:"status"`
	DisabledReason      *string    `bun:"disabled_reason"`
	Secret              string     `bun:"secret"`
	PreviousSecret      *string    `bun:"previous_secret"`
	PreviousSecretUntil *time.Time `bun:"previous_secret_until"`
	FailingSince        *time.Time `bun:"failing_since"`
	// Kind is EndpointKindEndpoint or EndpointKindHook (a workflow tool's subscription, deleted on 410).
	Kind string `bun:"kind"`
	// ExpiresAt ends the subscription: it receives nothing afterwards and is deleted.
	ExpiresAt *time.Time `bun:"expires_at"`
	// Filters are conditions on the payload that must all hold; nil for none.
	Filters []WebhookFilter `bun:"filters,type:json"`
	// Type is where deliveries go: EndpointHTTPS, or a message broker ("rabbitmq", "nats", "mqtt").
	Type string `bun:"type"`
	// Destination is a broker endpoint's sealed destination (its URL with credentials and where it publishes); nil
	// for https.
	Destination *string   `bun:"destination"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// NewWebhookEndpoint is what WebhookEndpoints.Create needs. SealSecret seals the endpoint's secret for its ID,
// which is only known inside Create (the ID is the associated data of the encryption).
type NewWebhookEndpoint struct {
	WorkspaceID string
	URL         string
	Description string
	Events      []string
	InstanceIDs []string
	RateLimit   *int
	// Kind is EndpointKindEndpoint ("" too) or EndpointKindHook.
	Kind      string
	ExpiresAt *time.Time
	Filters   []WebhookFilter
	// Type is EndpointHTTPS ("" too) or a broker type; SealDestination seals a broker's destination for the ID.
	Type            string
	SealDestination func(endpointID string) *string
	SealSecret      func(endpointID string) string
	// SealHeaders, when set, returns the sealed static headers for the endpoint's ID (nil for none).
	SealHeaders func(endpointID string) *string
}

// EndpointHTTPS is the type of endpoints that receive signed POST requests.
const EndpointHTTPS = "https"

// WebhookEndpoints is the repository of webhook endpoints.
type WebhookEndpoints struct {
	workspaceScoped[WebhookEndpoint]
}

// Create stores a new active endpoint. Returns ErrNotFound if the workspace does not exist.
func (s *WebhookEndpoints) Create(ctx context.Context, n NewWebhookEndpoint) (WebhookEndpoint, error) {
	t := now()
	e := WebhookEndpoint{
		ID: NewID("whk"), WorkspaceID: n.WorkspaceID, URL: n.URL, Description: n.Description, Events: n.Events,
		InstanceIDs: n.InstanceIDs, RateLimit: n.RateLimit, Status: EndpointActive, Kind: n.Kind, ExpiresAt: n.ExpiresAt,
		Filters: n.Filters, CreatedAt: t, UpdatedAt: t,
	}
	if e.Kind == "" {
		e.Kind = EndpointKindEndpoint
	}
	if e.Type = n.Type; e.Type == "" {
		e.Type = EndpointHTTPS
	}
	if n.SealDestination != nil {
		e.Destination = n.SealDestination(e.ID)
	}
	e.Secret = n.SealSecret(e.ID)
	if n.SealHeaders != nil {
		e.SealedHeaders = n.SealHeaders(e.ID)
	}
	if err := s.create(ctx, s.db.w, &e); err != nil {
		return WebhookEndpoint{}, err
	}
	return e, nil
}

// Get returns an endpoint of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *WebhookEndpoints) Get(ctx context.Context, workspaceID, id string) (WebhookEndpoint, error) {
	return s.get(ctx, workspaceID, id)
}

// ByID returns an endpoint whatever its workspace (for the dispatcher). Returns ErrNotFound if there is none.
func (s *WebhookEndpoints) ByID(ctx context.Context, id string) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.r.NewSelect().Model(&e).Where("e.id = ?", id).Scan(ctx)
	return e, mapErr(err)
}

// List returns a page of a workspace's endpoints and whether more follow. It returns no sentinel errors.
func (s *WebhookEndpoints) List(ctx context.Context, workspaceID string, p Page) ([]WebhookEndpoint, bool, error) {
	return s.list(ctx, workspaceID, p, nil)
}

// SetStatus changes an endpoint's status (and why it is disabled, for EndpointDisabled). Returns ErrNotFound if the
// endpoint is not in the workspace.
func (s *WebhookEndpoints) SetStatus(ctx context.Context, workspaceID, id, status string, reason *string) error {
	q := s.db.w.NewUpdate().Table("webhook_endpoints").Set("status = ?", status).Set("disabled_reason = ?", reason).
		Set("updated_at = ?", now()).Where("id = ? AND workspace_id = ?", id, workspaceID)
	if status == EndpointActive {
		q = q.Set("failing_since = NULL")
	}
	res, err := q.Exec(ctx)
	return expectOneRow(res, err)
}

// Delete removes an endpoint with its deliveries and attempts. Returns ErrNotFound if it is not in the workspace.
func (s *WebhookEndpoints) Delete(ctx context.Context, workspaceID, id string) error {
	_, err := s.delete(ctx, s.db.w, workspaceID, id)
	return err
}

// WebhookEndpointChange lists what Update changes; nil fields (and false Set… flags) leave a field as it is.
type WebhookEndpointChange struct {
	URL         *string
	Description *string
	Events      []string
	// InstanceIDs, when not nil, replaces the instance filter (empty: every instance).
	InstanceIDs []string
	// SetHeaders replaces the static headers with SealedHeaders (nil: none).
	SetHeaders    bool
	SealedHeaders *string
	// SetRateLimit replaces the rate limit with RateLimit (nil: no limit).
	SetRateLimit bool
	RateLimit    *int
	// SetExpiresAt replaces the end of the subscription with ExpiresAt (nil: none).
	SetExpiresAt bool
	ExpiresAt    *time.Time
	// Filters, when not nil, replace the filters (empty: none).
	Filters *[]WebhookFilter
}

// Update changes an endpoint of a workspace and returns it. Deliveries already queued go to its new URL, with its new
// headers. Returns ErrNotFound if the endpoint is not in the workspace.
func (s *WebhookEndpoints) Update(ctx context.Context, workspaceID, id string, c WebhookEndpointChange) (WebhookEndpoint, error) {
	return s.change(ctx, workspaceID, id, func(_ context.Context, _ bun.Tx, e *WebhookEndpoint) ([]string, error) {
		var cols []string
		if c.URL != nil {
			e.URL, cols = *c.URL, append(cols, "url")
		}
		if c.Description != nil {
			e.Description, cols = *c.Description, append(cols, "description")
		}
		if c.Events != nil {
			e.Events, cols = c.Events, append(cols, "events")
		}
		if c.InstanceIDs != nil {
			e.InstanceIDs, cols = c.InstanceIDs, append(cols, "instance_ids")
		}
		if c.SetHeaders {
			e.SealedHeaders, cols = c.SealedHeaders, append(cols, "sealed_headers")
		}
		if c.SetRateLimit {
			e.RateLimit, cols = c.RateLimit, append(cols, "rate_limit")
		}
		if c.SetExpiresAt {
			e.ExpiresAt, cols = c.ExpiresAt, append(cols, "expires_at")
		}
		if c.Filters != nil {
			e.Filters, cols = *c.Filters, append(cols, "filters")
			if len(e.Filters) == 0 {
				e.Filters = nil
			}
		}
		return cols, nil
	})
}

// EndpointDisabledError is the conflict of a change that needs an endpoint Switchboard disabled (pause, resume,
// redeliver, recover): the endpoint must be enabled first. It wraps ErrConflict.
type EndpointDisabledError struct {
	EndpointID string
	// Reason is the endpoint's disabled_reason: "gone", "failing", or "" when none was recorded.
	Reason string
}

func (e *EndpointDisabledError) Error() string {
	return "store: webhook endpoint " + e.EndpointID + " is disabled"
}

// Unwrap makes the error an ErrConflict.
func (e *EndpointDisabledError) Unwrap() error { return ErrConflict }

// disabledError returns the EndpointDisabledError of e.
func disabledError(e WebhookEndpoint) error {
	reason := ""
	if e.DisabledReason != nil {
		reason = *e.DisabledReason
	}
	return &EndpointDisabledError{EndpointID: e.ID, Reason: reason}
}

// Pause makes an active endpoint paused (its deliveries queue until it resumes) and returns it; a paused endpoint is
// returned unchanged. Returns ErrNotFound if the endpoint is not in the workspace, and an EndpointDisabledError
// (ErrConflict) if it is disabled.
func (s *WebhookEndpoints) Pause(ctx context.Context, workspaceID, id string) (WebhookEndpoint, error) {
	return s.move(ctx, workspaceID, id, EndpointActive, EndpointPaused)
}

// Resume makes a paused endpoint active and returns it; an active endpoint is returned unchanged. Returns
// ErrNotFound if the endpoint is not in the workspace, and an EndpointDisabledError (ErrConflict) if it is disabled:
// its events were recorded as skipped, so only Enable (with a recovery) brings them back.
func (s *WebhookEndpoints) Resume(ctx context.Context, workspaceID, id string) (WebhookEndpoint, error) {
	return s.move(ctx, workspaceID, id, EndpointPaused, EndpointActive)
}

// move changes an endpoint's status from one status to another; an endpoint in the target status already is left
// as it is. Returns ErrNotFound, or an EndpointDisabledError when the endpoint is disabled.
func (s *WebhookEndpoints) move(ctx context.Context, workspaceID, id, from, to string) (WebhookEndpoint, error) {
	return s.change(ctx, workspaceID, id, func(_ context.Context, _ bun.Tx, e *WebhookEndpoint) ([]string, error) {
		switch e.Status {
		case EndpointDisabled:
			return nil, disabledError(*e)
		case from:
			e.Status = to
			return []string{"status"}, nil
		}
		return nil, nil
	})
}

// Enable makes an endpoint active whatever its status, forgetting why it was disabled and its run of failures, and
// returns it. When recoverSince is set it also queues again, in the same transaction, the endpoint's deliveries
// created from then until now that failed or were skipped (as Deliveries.Recover does), and reports how many.
// Returns ErrNotFound if the endpoint is not in the workspace.
func (s *WebhookEndpoints) Enable(ctx context.Context, workspaceID, id string, recoverSince *time.Time) (WebhookEndpoint, int, error) {
	queued := 0
	e, err := s.change(ctx, workspaceID, id, func(ctx context.Context, tx bun.Tx, e *WebhookEndpoint) ([]string, error) {
		e.Status, e.DisabledReason, e.FailingSince = EndpointActive, nil, nil
		if recoverSince != nil {
			n, err := s.db.Deliveries.requeueWindow(ctx, tx, e.ID, *recoverSince, now())
			if err != nil {
				return nil, err
			}
			queued = n
		}
		return []string{"status", "disabled_reason", "failing_since"}, nil
	})
	return e, queued, err
}

// RotateSecret makes sealed the endpoint's signing secret and returns the endpoint. With a grace period the current
// secret becomes the previous one and keeps signing deliveries beside the new one until now+grace (rotating again
// meanwhile ends the older one at once); a grace of zero drops the current secret at once. Returns ErrNotFound if
// the endpoint is not in the workspace.
func (s *WebhookEndpoints) RotateSecret(ctx context.Context, workspaceID, id, sealed string, grace time.Duration) (WebhookEndpoint, error) {
	return s.change(ctx, workspaceID, id, func(_ context.Context, _ bun.Tx, e *WebhookEndpoint) ([]string, error) {
		e.PreviousSecret, e.PreviousSecretUntil = nil, nil
		if grace > 0 {
			previous, until := e.Secret, now().Add(grace)
			e.PreviousSecret, e.PreviousSecretUntil = &previous, &until
		}
		e.Secret = sealed
		return []string{"secret", "previous_secret", "previous_secret_until"}, nil
	})
}

// change runs edit on an endpoint of a workspace inside a transaction that holds the row against concurrent
// changes (the dispatcher disabling it), and stores the columns edit names, with updated_at. Returns ErrNotFound if
// the endpoint is not in the workspace, or edit's error.
func (s *WebhookEndpoints) change(ctx context.Context, workspaceID, id string,
	edit func(ctx context.Context, tx bun.Tx, e *WebhookEndpoint) ([]string, error)) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if e, err = s.lock(ctx, tx, workspaceID, id); err != nil {
			return err
		}
		cols, err := edit(ctx, tx, &e)
		if err != nil || len(cols) == 0 {
			return err
		}
		e.UpdatedAt = now()
		_, err = tx.NewUpdate().Model(&e).WherePK().Column(append(cols, "updated_at")...).Exec(ctx)
		return err
	})
	if err != nil {
		return WebhookEndpoint{}, mapErr(err)
	}
	return e, nil
}

// Subscriptions reads what routing events needs of the endpoints of the workspaces (duplicates allowed) — ID,
// workspace, subscribed patterns, filters and status — by workspace, in one statement on db (a transaction that
// emits, so that its view is consistent with the change). Expired subscriptions are left out. It returns no
// sentinel errors.
func (s *WebhookEndpoints) Subscriptions(ctx context.Context, db bun.IDB, workspaceIDs []string) (map[string][]WebhookEndpoint, error) {
	ids := slices.Clone(workspaceIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// With parameters (see execParams): every transaction that records events reads them.
	cond, arg := s.db.oneOfParam("e.workspace_id", ids)
	endpoints, err := selectParams[WebhookEndpoint](ctx, s.db, db, "SELECT e.id, e.workspace_id, e.events, e.instance_ids, "+
		"e.filters, e.status FROM webhook_endpoints AS e WHERE "+cond+" AND (e.expires_at IS NULL OR e.expires_at > ?)", arg, now())
	if err != nil {
		return nil, err
	}
	out := make(map[string][]WebhookEndpoint, len(ids))
	for _, e := range endpoints {
		out[e.WorkspaceID] = append(out[e.WorkspaceID], e)
	}
	return out, nil
}

// FailureRuns reads, inside tx, what judging failed attempts needs of the endpoints among ids that still exist: ID,
// URL, status and the start of their run of failures. It returns no sentinel errors.
func (s *WebhookEndpoints) FailureRuns(ctx context.Context, tx bun.IDB, ids []string) ([]WebhookEndpoint, error) {
	var es []WebhookEndpoint
	err := s.db.whereOneOf(tx.NewSelect().Model(&es).Column("id", "url", "status", "failing_since"), "e.id", ids).Scan(ctx)
	return es, err
}

// EndFailureRuns ends, inside tx and in one statement, the runs of failures of endpoints (a delivery to each
// succeeded); endpoints without one are not written. It returns no sentinel errors.
func (s *WebhookEndpoints) EndFailureRuns(ctx context.Context, tx bun.IDB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// Several deliveries of a batch often went to one endpoint: each is named once.
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	cond, arg := s.db.oneOf("id", ids)
	_, err := tx.NewUpdate().Table("webhook_endpoints").Set("failing_since = NULL").
		Where(cond+" AND failing_since IS NOT NULL", arg).Exec(ctx)
	return err
}

// FailureChange is what failed attempts changed of an endpoint. A nil field is not written: the statement must not
// put back a status that changed since it was read (an endpoint paused meanwhile).
type FailureChange struct {
	EndpointID string
	// FailingSince starts the endpoint's run of failures.
	FailingSince *time.Time
	// DisabledReason disables the endpoint for this reason.
	DisabledReason *string
}

// ApplyFailureChanges writes failure changes inside tx, one statement per endpoint, in their order; disabling an
// endpoint sets its updated_at to t. It returns no sentinel errors.
func (s *WebhookEndpoints) ApplyFailureChanges(ctx context.Context, tx bun.IDB, cs []FailureChange, t time.Time) error {
	for _, c := range cs {
		if c.FailingSince == nil && c.DisabledReason == nil {
			continue
		}
		q := tx.NewUpdate().Table("webhook_endpoints").Where("id = ?", c.EndpointID)
		if c.FailingSince != nil {
			q = q.Set("failing_since = ?", *c.FailingSince)
		}
		if c.DisabledReason != nil {
			q = q.Set("status = ?", EndpointDisabled).Set("disabled_reason = ?", *c.DisabledReason).Set("updated_at = ?", t)
		}
		if _, err := q.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// DeleteGoneHooks deletes, inside tx, the endpoints among ids that are hook subscriptions (their receiver answered
// 410 Gone, which for a REST hook means "unsubscribe"), with their deliveries. It returns no sentinel errors.
func (s *WebhookEndpoints) DeleteGoneHooks(ctx context.Context, tx bun.IDB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.NewDelete().Table("webhook_endpoints").Where("id IN (?) AND kind = ?", bun.In(ids), EndpointKindHook).
		Exec(ctx)
	return err
}

// DeleteExpired deletes at most batch subscriptions whose expires_at has passed, with their deliveries, and returns
// how many. It returns no sentinel errors.
func (s *WebhookEndpoints) DeleteExpired(ctx context.Context, batch int) (int, error) {
	res, err := s.db.w.NewRaw(`DELETE FROM webhook_endpoints WHERE id IN (
		SELECT id FROM webhook_endpoints WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)`, now(), batch).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
