package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

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
	// SealedHeaders is the JSON object of static delivery headers, sealed like the secret; nil when there are none.
	SealedHeaders       *string    `bun:"sealed_headers"`
	RateLimit           *int       `bun:"rate_limit"`
	Status              string     `bun:"status"`
	DisabledReason      *string    `bun:"disabled_reason"`
	Secret              string     `bun:"secret"`
	PreviousSecret      *string    `bun:"previous_secret"`
	PreviousSecretUntil *time.Time `bun:"previous_secret_until"`
	FailingSince        *time.Time `bun:"failing_since"`
	CreatedAt           time.Time  `bun:"created_at"`
	UpdatedAt           time.Time  `bun:"updated_at"`
}

var _ bun.AfterScanRowHook = (*WebhookEndpoint)(nil)

// AfterScanRow normalises timestamps to UTC.
func (e *WebhookEndpoint) AfterScanRow(context.Context) error {
	e.CreatedAt, e.UpdatedAt = utc(e.CreatedAt), utc(e.UpdatedAt)
	e.PreviousSecretUntil, e.FailingSince = utcPtr(e.PreviousSecretUntil), utcPtr(e.FailingSince)
	return nil
}

// NewWebhookEndpoint is what WebhookEndpoints.Create needs. SealSecret seals the endpoint's secret for its ID,
// which is only known inside Create (the ID is the associated data of the encryption).
type NewWebhookEndpoint struct {
	WorkspaceID string
	URL         string
	Description string
	Events      []string
	RateLimit   *int
	SealSecret  func(endpointID string) string
	// SealHeaders, when set, returns the sealed static headers for the endpoint's ID (nil for none).
	SealHeaders func(endpointID string) *string
}

// WebhookEndpoints is the repository of webhook endpoints.
type WebhookEndpoints struct{ db *DB }

// Create stores a new active endpoint. Returns ErrNotFound if the workspace does not exist.
func (s *WebhookEndpoints) Create(ctx context.Context, n NewWebhookEndpoint) (WebhookEndpoint, error) {
	t := now()
	e := WebhookEndpoint{
		ID: NewID("whk"), WorkspaceID: n.WorkspaceID, URL: n.URL, Description: n.Description, Events: n.Events,
		RateLimit: n.RateLimit, Status: EndpointActive, CreatedAt: t, UpdatedAt: t,
	}
	e.Secret = n.SealSecret(e.ID)
	if n.SealHeaders != nil {
		e.SealedHeaders = n.SealHeaders(e.ID)
	}
	err := s.db.w.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		exists, err := tx.NewSelect().Table("workspaces").Where("id = ?", n.WorkspaceID).Exists(ctx)
		if err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		_, err = tx.NewInsert().Model(&e).Exec(ctx)
		return err
	})
	if err != nil {
		return WebhookEndpoint{}, mapErr(err)
	}
	return e, nil
}

// Get returns an endpoint of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *WebhookEndpoints) Get(ctx context.Context, workspaceID, id string) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.r.NewSelect().Model(&e).Where("e.id = ? AND e.workspace_id = ?", id, workspaceID).Scan(ctx)
	return e, mapErr(err)
}

// ByID returns an endpoint whatever its workspace (for the dispatcher). Returns ErrNotFound if there is none.
func (s *WebhookEndpoints) ByID(ctx context.Context, id string) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.r.NewSelect().Model(&e).Where("e.id = ?", id).Scan(ctx)
	return e, mapErr(err)
}

// Page is a keyset page of a list, newest first.
type Page struct {
	// Limit is 1–100; Before, when set, is the ID after which (older than which) the page starts.
	Limit  int
	Before string
}

// List returns a page of a workspace's endpoints, newest first, and whether more follow.
func (s *WebhookEndpoints) List(ctx context.Context, workspaceID string, p Page) ([]WebhookEndpoint, bool, error) {
	var es []WebhookEndpoint
	q := s.db.r.NewSelect().Model(&es).Where("e.workspace_id = ?", workspaceID).Order("e.id DESC").Limit(int64(p.Limit) + 1)
	if p.Before != "" {
		q = q.Where("e.id < ?", p.Before)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, false, err
	}
	more := len(es) > p.Limit
	if more {
		es = es[:p.Limit]
	}
	return es, more, nil
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
	res, err := s.db.w.NewDelete().Table("webhook_endpoints").Where("id = ? AND workspace_id = ?", id, workspaceID).Exec(ctx)
	return expectOneRow(res, err)
}

// RotateSecret makes sealed the endpoint's secret and keeps the old one valid until graceUntil (deliveries carry both
// signatures meanwhile). Returns ErrNotFound if the endpoint is not in the workspace.
func (s *WebhookEndpoints) RotateSecret(ctx context.Context, workspaceID, id, sealed string, graceUntil time.Time) error {
	res, err := s.db.w.NewUpdate().Table("webhook_endpoints").
		Set("previous_secret = secret").Set("previous_secret_until = ?", graceUntil.UTC().Truncate(time.Microsecond)).
		Set("secret = ?", sealed).Set("updated_at = ?", now()).
		Where("id = ? AND workspace_id = ?", id, workspaceID).Exec(ctx)
	return expectOneRow(res, err)
}
