package store

import (
	"context"
	"time"
)

// PruneBatch is how many events one statement of Prune deletes. Each batch is its own short transaction, so a large
// prune never holds the SQLite writer for long: API requests and the dispatcher get their turn between batches.
const PruneBatch = 1000

// Prune deletes the events created before cutoff together with their deliveries and attempts (by cascade), batch by
// batch, and returns how many events it deleted. An event that still has a pending delivery is kept whatever its
// age: nothing accepted for delivery is ever dropped unsent. Prune stops at the first error or when ctx ends,
// keeping what it deleted so far.
func (s *Events) Prune(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
	cutoff = cutoff.UTC().Truncate(time.Microsecond)
	var total int64
	for {
		old := s.db.w.NewSelect().TableExpr("events AS ev").Column("ev.id").
			Where("ev.created_at < ?", cutoff).
			Where("NOT EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.event_id = ev.id AND d.status = ?)", DeliveryPending).
			OrderExpr("ev.created_at").Limit(int64(batch))
		res, err := s.db.w.NewDelete().TableExpr("events").Where("id IN (?)", old).Exec(ctx)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
