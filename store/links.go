package store

import (
	"context"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Link is a short link. Slugs are unique per domain regardless of case: SlugKey is the lower-case slug.
type Link struct {
	bun.BaseModel `bun:"table:links,alias:l"`

	ID             string   `bun:"id,pk"`
	WorkspaceID    string   `bun:"workspace_id"`
	Domain         string   `bun:"domain"`
	Slug           string   `bun:"slug"`
	SlugKey        string   `bun:"slug_key"`
	DestinationURL string   `bun:"destination_url"`
	Title          *string  `bun:"title"`
	Tags           []string `bun:"tags,type:json"`
	ExternalID     *string  `bun:"external_id"`
	// UTM holds the query parameters redirects add to the destination, keyed by their names (utm_source,
	// utm_medium, utm_campaign, utm_term, utm_content); empty when none.
	UTM          map[string]string `bun:"utm,type:json"`
	ExpiresAt    *time.Time        `bun:"expires_at"`
	ExpiredURL   *string           `bun:"expired_url"`
	MaxClicks    *int64            `bun:"max_clicks"`
	RedirectType int               `bun:"redirect_type"`
	ForwardQuery bool              `bun:"forward_query"`
	Metadata     map[string]any    `bun:"metadata,type:json"`
	Archived     bool              `bun:"archived"`
	// Clicks and BotClicks are the clicks persisted so far; AdmittedClicks the human clicks admitted against
	// MaxClicks at redirect time (kept only for links with a cap).
	Clicks           int64      `bun:"clicks"`
	BotClicks        int64      `bun:"bot_clicks"`
	AdmittedClicks   int64      `bun:"admitted_clicks"`
	LastClickedAt    *time.Time `bun:"last_clicked_at"`
	ExpiredEventAt   *time.Time `bun:"expired_event_at"`
	MaxClicksEventAt *time.Time `bun:"max_clicks_event_at"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

var _ bun.AfterScanRowHook = (*Link)(nil)

// AfterScanRow normalises timestamps to UTC.
func (l *Link) AfterScanRow(context.Context) error {
	l.CreatedAt, l.UpdatedAt = utc(l.CreatedAt), utc(l.UpdatedAt)
	l.ExpiresAt, l.LastClickedAt = utcPtr(l.ExpiresAt), utcPtr(l.LastClickedAt)
	l.ExpiredEventAt, l.MaxClicksEventAt = utcPtr(l.ExpiredEventAt), utcPtr(l.MaxClicksEventAt)
	return nil
}

// Link statuses: whether a link sends visitors to its destination at a given time.
const (
	LinkActive           = "active"
	LinkExpired          = "expired"
	LinkMaxClicksReached = "max_clicks_reached"
)

// Status is LinkActive, LinkExpired or LinkMaxClicksReached at time t.
func (l Link) Status(t time.Time) string {
	switch {
	case l.ExpiresAt != nil && !t.Before(*l.ExpiresAt):
		return LinkExpired
	case l.MaxClicks != nil && max(l.AdmittedClicks, l.Clicks) >= *l.MaxClicks:
		return LinkMaxClicksReached
	}
	return LinkActive
}

// Key is where the link answers.
func (l Link) Key() LinkKey { return LinkKey{Domain: l.Domain, SlugKey: l.SlugKey} }

// LinkKey identifies a short URL: the domain and the lower-case slug.
type LinkKey struct {
	Domain  string
	SlugKey string
}

// SlugKey is the case-folded form of a slug that uniqueness and lookups use.
func SlugKey(slug string) string { return strings.ToLower(slug) }

// Links is the repository of short links.
type Links struct{ db *DB }
