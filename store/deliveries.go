package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Attempt is one HTTP attempt of a delivery, as the delivery log shows it.
type Attempt struct {
	bun.BaseModel `bun:"table:webhook_attempts,alias:a"`

	ID              string    `bun:"id,pk"`
	DeliveryID      string    `bun:"delivery_id"`
	StartedAt       time.Time `bun:"started_at"`
	DurationMS      int       `bun:"duration_ms"`
	StatusCode      *int      `bun:"status_code"`
	ErrorClass      *string   `bun:"error_class"`
	ResponseExcerpt *string   `bun:"response_excerpt"`
}

var _ bun.AfterScanRowHook = (*Attempt)(nil)

// AfterScanRow normalises timestamps to UTC.
func (a *Attempt) AfterScanRow(context.Context) error {
	a.StartedAt = utc(a.StartedAt)
	return nil
}

// Deliveries is the queue and log of webhook deliveries.
type Deliveries struct{ db *DB }

// Claim leases up to limit due deliveries of active endpoints until now+lease, oldest due first, leaving out the
// endpoints in exclude (those at their in-flight cap). On PostgreSQL, FOR UPDATE SKIP LOCKED lets any number of
// dispatchers claim concurrently without taking the same delivery; on SQLite the single writer serialises claims.
// A delivery whose lease ran out (its dispatcher died) is due again and keeps its ID, so the receiver sees the same
// webhook-id.
func (s *Deliveries) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]Delivery, error) {
	now = now.UTC().Truncate(time.Microsecond)
	sub := s.db.w.NewSelect().TableExpr("webhook_deliveries AS d2").Column("d2.id").
		Join("JOIN webhook_endpoints AS e ON e.id = d2.endpoint_id").
		Where("d2.status = ?", DeliveryPending).Where("d2.next_attempt_at <= ?", now).
		Where("(d2.lease_until IS NULL OR d2.lease_until <= ?)", now).Where("e.status = ?", EndpointActive).
		OrderExpr("d2.next_attempt_at").Limit(int64(limit))
	if len(exclude) > 0 {
		sub = sub.Where("d2.endpoint_id NOT IN (?)", bun.In(exclude))
	}
	if s.db.dialect == Postgres {
		sub = sub.For("UPDATE OF d2 SKIP LOCKED")
	}
	var out []Delivery
	_, err := s.db.w.NewUpdate().Model(&out).ModelTableExpr("webhook_deliveries AS d").
		Set("lease_until = ?", now.Add(lease)).Set("updated_at = ?", now).
		Where("d.id IN (?)", sub).Returning("*").Exec(ctx, &out)
	if err != nil {
		return nil, err
	}
	for i := range out {
		_ = out[i].AfterScanRow(ctx)
	}
	return out, nil
}

// AttemptResult is what a dispatcher learned from one attempt of a leased delivery, and what follows from it.
type AttemptResult struct {
	DeliveryID string
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode *int
	ErrorClass *string
	Excerpt    *string
	Succeeded  bool
	// Gone disables the endpoint (the receiver answered 410).
	Gone bool
	// NextAttemptAt schedules a retry of a failed attempt; nil means the schedule is exhausted (failed for good).
	NextAttemptAt *time.Time
	// DisableAfter disables the endpoint when its failures have lasted this long (zero: never).
	DisableAfter time.Duration
}

// AttemptEffects tells the caller what RecordAttempt changed beyond the delivery.
type AttemptEffects struct {
	Delivery Delivery
	// EndpointDisabled is set to the reason ("gone", "failing") when this attempt disabled the endpoint.
	EndpointDisabled string
	// Exhausted is set when the delivery failed for good.
	Exhausted bool
}

// RecordAttempt stores an attempt and its consequences in one transaction: the delivery's state (succeeded,
// scheduled again or failed), the lease released, the endpoint's run of failures, and the endpoint disabled when
// it is gone or has failed for too long. then runs inside the same transaction with the effects, so operational
// events (endpoint disabled, delivery exhausted) are emitted atomically with the change. Returns ErrNotFound if the
// delivery no longer exists (its endpoint was deleted meanwhile).
func (s *Deliveries) RecordAttempt(ctx context.Context, r AttemptResult, then func(ctx context.Context, tx bun.Tx, fx AttemptEffects) error) (AttemptEffects, error) {
	var fx AttemptEffects
	err := s.db.w.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		d := &fx.Delivery
		if err := tx.NewSelect().Model(d).Where("d.id = ?", r.DeliveryID).Scan(ctx); err != nil {
			return err
		}
		t := now()
		a := Attempt{ID: NewID("att"), DeliveryID: d.ID, StartedAt: r.StartedAt.UTC().Truncate(time.Microsecond),
			DurationMS: int(r.Duration.Milliseconds()), StatusCode: r.StatusCode, ErrorClass: r.ErrorClass, ResponseExcerpt: r.Excerpt}
		if _, err := tx.NewInsert().Model(&a).Exec(ctx); err != nil {
			return err
		}
		d.Attempts++
		d.LastStatusCode, d.LastError, d.LeaseUntil, d.UpdatedAt = r.StatusCode, r.ErrorClass, nil, t
		switch {
		case r.Succeeded:
			d.Status, d.NextAttemptAt, d.CompletedAt = DeliverySucceeded, nil, &t
		case r.NextAttemptAt != nil && !r.Gone:
			next := r.NextAttemptAt.UTC().Truncate(time.Microsecond)
			d.Status, d.NextAttemptAt = DeliveryPending, &next
		default:
			d.Status, d.NextAttemptAt, d.CompletedAt = DeliveryFailed, nil, &t
			fx.Exhausted = true
		}
		if _, err := tx.NewUpdate().Model(d).WherePK().Column("status", "attempts", "next_attempt_at", "lease_until",
			"last_status_code", "last_error", "updated_at", "completed_at").Exec(ctx); err != nil {
			return err
		}
		reason, err := s.updateEndpointHealth(ctx, tx, d.EndpointID, r, t)
		if err != nil {
			return err
		}
		fx.EndpointDisabled = reason
		if then != nil {
			return then(ctx, tx, fx)
		}
		return nil
	})
	return fx, mapErr(err)
}

// updateEndpointHealth tracks the endpoint's run of failures and disables it when it is gone or failing for too
// long; it returns the reason when it disabled the endpoint now.
func (s *Deliveries) updateEndpointHealth(ctx context.Context, tx bun.Tx, endpointID string, r AttemptResult, t time.Time) (string, error) {
	if r.Succeeded {
		_, err := tx.NewUpdate().Table("webhook_endpoints").Set("failing_since = NULL").
			Where("id = ? AND failing_since IS NOT NULL", endpointID).Exec(ctx)
		return "", err
	}
	var e WebhookEndpoint
	if err := tx.NewSelect().Model(&e).Column("id", "status", "failing_since").Where("e.id = ?", endpointID).Scan(ctx); err != nil {
		return "", err
	}
	since := r.StartedAt.UTC().Truncate(time.Microsecond)
	if e.FailingSince != nil {
		since = *e.FailingSince
	}
	reason := ""
	switch {
	case e.Status == EndpointDisabled:
	case r.Gone:
		reason = "gone"
	case r.DisableAfter > 0 && t.Sub(since) >= r.DisableAfter:
		reason = "failing"
	}
	q := tx.NewUpdate().Table("webhook_endpoints").Set("failing_since = ?", since).Where("id = ?", endpointID)
	if reason != "" {
		q = q.Set("status = ?", EndpointDisabled).Set("disabled_reason = ?", reason).Set("updated_at = ?", t)
	}
	_, err := q.Exec(ctx)
	return reason, err
}

// Attempts returns a delivery's attempts, oldest first.
func (s *Deliveries) Attempts(ctx context.Context, deliveryID string) ([]Attempt, error) {
	as := []Attempt{}
	err := s.db.r.NewSelect().Model(&as).Where("a.delivery_id = ?", deliveryID).Order("a.id").Scan(ctx)
	return as, err
}

// Get returns a delivery of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Deliveries) Get(ctx context.Context, workspaceID, id string) (Delivery, error) {
	var d Delivery
	err := s.db.r.NewSelect().Model(&d).Where("d.id = ? AND d.workspace_id = ?", id, workspaceID).Scan(ctx)
	return d, mapErr(err)
}

// Release gives back leased deliveries without an attempt (a dispatcher claimed more of one endpoint than its
// in-flight cap allows); they are due again at once.
func (s *Deliveries) Release(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.db.w.NewUpdate().Table("webhook_deliveries").Set("lease_until = NULL").
		Where("id IN (?) AND status = ?", bun.In(ids), DeliveryPending).Exec(ctx)
	return err
}
