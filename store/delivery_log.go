package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// ErrDeliveryInFlight means a dispatcher holds the delivery for an attempt right now; it wraps ErrConflict.
var ErrDeliveryInFlight = fmt.Errorf("%w: the delivery is being attempted", ErrConflict)

// DeliveryFilter narrows a delivery log; empty fields do not filter.
type DeliveryFilter struct {
	Status    string
	EventType string
}

// List returns a page of the delivery log of an endpoint of a workspace and whether more follow. Returns ErrNotFound
// if the endpoint is not in the workspace.
func (s *Deliveries) List(ctx context.Context, workspaceID, endpointID string, f DeliveryFilter, p Page) ([]Delivery, bool, error) {
	exists, err := s.db.Webhooks.exists(ctx, workspaceID, endpointID)
	if err != nil {
		return nil, false, err
	}
	if !exists {
		return nil, false, ErrNotFound
	}
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		q = q.Where("d.endpoint_id = ?", endpointID)
		if f.Status != "" {
			q = q.Where("d.status = ?", f.Status)
		}
		if f.EventType != "" {
			q = q.Where("d.event_type = ?", f.EventType)
		}
		return q
	})
}

// Redeliver queues a delivery of a workspace for an attempt now, whatever its status, and returns it. It keeps its
// ID (so its webhook-id) and its attempt log, and starts the retry schedule afresh. Returns ErrNotFound if the
// delivery is not in the workspace, ErrDeliveryInFlight (ErrConflict) if a dispatcher holds it for an attempt, and
// an EndpointDisabledError (ErrConflict) if its endpoint is disabled.
func (s *Deliveries) Redeliver(ctx context.Context, workspaceID, id string) (Delivery, error) {
	var d Delivery
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		// On PostgreSQL the lock waits for a claim in progress, whose lease it then sees.
		if d, err = s.lock(ctx, tx, workspaceID, id); err != nil {
			return err
		}
		var e WebhookEndpoint
		if err := tx.NewSelect().Model(&e).Column("id", "status", "disabled_reason").Where("e.id = ?", d.EndpointID).
			Scan(ctx); err != nil {
			return err
		}
		t := now()
		switch {
		case e.Status == EndpointDisabled:
			return disabledError(e)
		case d.Status == DeliveryPending && d.LeaseUntil != nil && d.LeaseUntil.After(t):
			return ErrDeliveryInFlight
		}
		if _, err := requeue(tx.NewUpdate().Table("webhook_deliveries").Where("id = ?", d.ID), t).Exec(ctx); err != nil {
			return err
		}
		d = Delivery{ID: d.ID} // a fresh row: scanning NULL into a set pointer would leave a zero time
		if err := tx.NewSelect().Model(&d).WherePK().Scan(ctx); err != nil {
			return err
		}
		return s.db.notifyQueued(ctx, tx)
	})
	if err != nil {
		return Delivery{}, mapErr(err)
	}
	return d, nil
}

// Recover queues again the deliveries of an endpoint of a workspace created in [since, until) that failed for good
// or were skipped while it was disabled, each as Redeliver does, in one transaction; it never touches pending or
// succeeded ones. It returns how many it queued (on a paused endpoint they wait until it resumes). Returns
// ErrNotFound if the endpoint is not in the workspace and an EndpointDisabledError (ErrConflict) if it is disabled
// (Enable recovers as it enables).
func (s *Deliveries) Recover(ctx context.Context, workspaceID, endpointID string, since, until time.Time) (int, error) {
	queued := 0
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var e WebhookEndpoint
		q := tx.NewSelect().Model(&e).Column("id", "status", "disabled_reason").
			Where("e.id = ? AND e.workspace_id = ?", endpointID, workspaceID)
		if s.db.dialect == Postgres {
			q = q.For("SHARE") // the endpoint cannot be disabled meanwhile
		}
		if err := q.Scan(ctx); err != nil {
			return err
		}
		if e.Status == EndpointDisabled {
			return disabledError(e)
		}
		var err error
		queued, err = s.requeueWindow(ctx, tx, endpointID, since, until)
		return err
	})
	return queued, mapErr(err)
}

// requeueWindow queues again, inside tx, the failed and skipped deliveries of an endpoint created in [since, until),
// and returns how many.
func (s *Deliveries) requeueWindow(ctx context.Context, tx bun.IDB, endpointID string, since, until time.Time) (int, error) {
	q := tx.NewUpdate().Table("webhook_deliveries").Where("endpoint_id = ?", endpointID).
		Where("status IN (?)", bun.In([]string{DeliveryFailed, DeliverySkipped})).
		Where("created_at >= ? AND created_at < ?", since.UTC().Truncate(time.Microsecond), until.UTC().Truncate(time.Microsecond))
	res, err := requeue(q, now()).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return int(n), err
	}
	return int(n), s.db.notifyQueued(ctx, tx)
}

// requeue makes the deliveries q selects due at t with a fresh retry schedule: pending, unleased, not completed,
// the schedule restarting at the attempts made so far (the attempt log and the ID stay).
func requeue(q *bun.UpdateQuery, t time.Time) *bun.UpdateQuery {
	return q.Set("status = ?", DeliveryPending).Set("next_attempt_at = ?", t).Set("lease_until = NULL").
		Set("completed_at = NULL").Set("schedule_start = attempts").Set("updated_at = ?", t)
}
