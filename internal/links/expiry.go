package links

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
)

// expiryBatch is how many expired links one transaction announces.
const expiryBatch = 100

// Run announces expiries until ctx ends: every ExpiryCheck it emits link.expired, once per link, for the links
// whose expires_at has passed. Several processes may run it (PostgreSQL claims skip each other's rows). A failed
// check is logged and retried at the next one; Run returns nil after ctx ended and the check in progress stopped.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.expiryCheck)
	defer t.Stop()
	for {
		if err := s.announceExpired(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("link.expired notifier failed; retrying at the next check", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// announceExpired emits link.expired for every link that expired at now and was not announced yet, in batches.
func (s *Service) announceExpired(ctx context.Context, now time.Time) error {
	for {
		n, err := s.db.Links.AnnounceExpired(ctx, now, expiryBatch, func(ctx context.Context, tx store.Tx, l store.Link) error {
			return s.emit(ctx, tx, l.WorkspaceID, gen.LinkExpiredEvent{Link: s.API(linkOf(l))})
		})
		if err != nil || n < expiryBatch {
			return err
		}
	}
}
