package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Resolve returns the link that answers at key, for the public redirect. Returns ErrNotFound if none does.
func (s *Links) Resolve(ctx context.Context, key LinkKey) (Link, error) {
	var l Link
	err := s.db.r.NewSelect().Model(&l).Where("l.domain = ? AND l.slug_key = ?", key.Domain, key.SlugKey).Scan(ctx)
	return l, mapErr(err)
}

// AdmitClick spends one of a capped link's max_clicks on a human click, atomically: of any number of concurrent
// calls (in any number of processes) exactly max_clicks minus the clicks already admitted succeed. It reports
// whether the click was admitted. The admission that reaches the cap also records max_clicks_event_at and calls
// reached with the link in the same transaction (to emit link.max_clicks_reached exactly once). Returns
// ErrNotFound if the link does not exist or has no cap (it was changed meanwhile).
//
// The counter is links.admitted_clicks; persisted human clicks (links.clicks) count too, so that a cap set on a
// link that was already clicked holds.
func (s *Links) AdmitClick(ctx context.Context, id string, reached func(ctx context.Context, tx bun.Tx, l Link) error) (bool, error) {
	greatest := "MAX"
	if s.db.dialect == Postgres {
		greatest = "GREATEST"
	}
	admitted := false
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		admitted = false
		var l Link
		err := tx.NewUpdate().Model((*Link)(nil)).
			Set("admitted_clicks = "+greatest+"(admitted_clicks, clicks) + 1").
			Where("id = ? AND max_clicks IS NOT NULL AND "+greatest+"(admitted_clicks, clicks) < max_clicks", id).
			Returning("*").Scan(ctx, &l)
		if err != nil {
			err = mapErr(err)
			if errors.Is(err, ErrNotFound) {
				exists, xerr := tx.NewSelect().Model((*Link)(nil)).Where("id = ? AND max_clicks IS NOT NULL", id).Exists(ctx)
				if xerr != nil {
					return xerr
				}
				if exists {
					return nil // the cap is reached: not admitted
				}
			}
			return err
		}
		admitted = true
		if l.AdmittedClicks < *l.MaxClicks || l.MaxClicksEventAt != nil {
			return nil
		}
		t := now()
		l.MaxClicksEventAt = &t
		if _, err := tx.NewUpdate().Model((*Link)(nil)).Set("max_clicks_event_at = ?", t).Where("id = ?", id).Exec(ctx); err != nil {
			return err
		}
		return reached(ctx, tx, l)
	})
	return admitted, err
}

// AnnounceExpired claims up to limit links whose expires_at has passed at now and whose expiry was not announced
// yet, records expired_event_at and calls announce for each, in one transaction (so the event is emitted exactly
// once). On PostgreSQL claims skip rows another process holds, so several processes may run it at once. Returns how
// many links were announced.
func (s *Links) AnnounceExpired(ctx context.Context, now time.Time, limit int,
	announce func(ctx context.Context, tx bun.Tx, l Link) error) (int, error) {
	n := 0
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		n = 0
		sub := tx.NewSelect().Model((*Link)(nil)).Column("l.id").
			Where("l.expires_at IS NOT NULL AND l.expires_at <= ? AND l.expired_event_at IS NULL", now).
			Order("l.expires_at").Limit(int64(limit))
		if s.db.dialect == Postgres {
			sub = sub.For("UPDATE SKIP LOCKED")
		}
		var links []Link
		if err := tx.NewUpdate().Model((*Link)(nil)).Set("expired_event_at = ?", now.UTC().Truncate(time.Microsecond)).
			Where("id IN (?) AND expired_event_at IS NULL", sub).Returning("*").Scan(ctx, &links); err != nil {
			return err
		}
		for _, l := range links {
			if err := announce(ctx, tx, l); err != nil {
				return err
			}
		}
		n = len(links)
		return nil
	})
	return n, err
}

// LinkWatch hears of link changes made by other processes (PostgreSQL): Changed for every short URL announced,
// Connected when the listener (re)connected — notifications may have been missed while it was down, so everything
// cached is suspect — and Disconnected when it lost its connection: until the next Connected, changes can go
// unheard.
type LinkWatch struct {
	Changed      func(LinkKey)
	Connected    func()
	Disconnected func()
}

// Watch LISTENs on LinksChannel on a connection of its own until ctx ends, reconnecting with backoff (see Listen),
// and reports to w. It reports nothing on SQLite, where one process serves redirects and this process's own changes
// arrive through Subscribe; it returns at once there (and reports Connected, since no change can go unheard).
func (c *LinkChanges) Watch(ctx context.Context, w LinkWatch) {
	if c.db.dialect != Postgres {
		w.Connected()
		return
	}
	c.db.Listen(ctx, Listener{
		Channel:      LinksChannel,
		Connected:    w.Connected,
		Disconnected: w.Disconnected,
		Notified: func(payload string) {
			if domain, slugKey, ok := strings.Cut(payload, " "); ok {
				w.Changed(LinkKey{Domain: domain, SlugKey: slugKey})
			}
		},
	})
}
