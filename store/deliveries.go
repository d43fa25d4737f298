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
