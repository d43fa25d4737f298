package store

import (
	"context"
	"sync"

	"github.com/uptrace/bun"
)

// LinksChannel is the PostgreSQL notification channel on which link changes are announced to every process, so
// redirect caches drop what changed. The payload is the link's domain, a space and its slug key.
const LinksChannel = "switchboard_links"

// LinkChanges tells the redirect caches of this process (and, on PostgreSQL, of every process) which short URLs
// changed: a link created (a cached "unknown slug" is now wrong), updated, re-slugged or deleted.
//
// Writers call Announce inside the changing transaction (PostgreSQL delivers the notification at commit) and
// Published after it committed (this process's subscribers hear of it at once, on either database).
type LinkChanges struct {
	db   *DB
	mu   sync.RWMutex
	subs []func(LinkKey)
}

// Subscribe registers fn to hear of every change published in this process. Other processes' changes arrive
// through LISTEN on LinksChannel (PostgreSQL); the subscriber of those calls fn itself.
func (c *LinkChanges) Subscribe(fn func(LinkKey)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, fn)
}

// Announce queues a notification for each key inside tx, in one statement (PostgreSQL only; a no-op on SQLite,
// where one process serves redirects).
func (c *LinkChanges) Announce(ctx context.Context, tx bun.IDB, keys ...LinkKey) error {
	if c.db.dialect != Postgres || len(keys) == 0 {
		return nil
	}
	payloads := make([]string, len(keys))
	for i, k := range keys {
		payloads[i] = k.Domain + " " + k.SlugKey
	}
	return c.db.notifyAtCommit(ctx, tx, LinksChannel, payloads...)
}

// Published tells this process's subscribers that keys changed; call it after the change committed.
func (c *LinkChanges) Published(keys ...LinkKey) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, k := range keys {
		for _, fn := range c.subs {
			fn(k)
		}
	}
}
