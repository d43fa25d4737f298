package links

import (
	"time"

	"github.com/switchboard/switchboard/store"
)

// Link is a short link as the capability hands it out to its adapters (the API, the console): what its owner set
// and what its visitors did, without the store's bookkeeping (the case-folded slug key, when each one-time event was
// announced).
type Link struct {
	ID             string
	WorkspaceID    string
	Domain         string
	Slug           string
	DestinationURL string
	Title          *string
	Tags           []string
	ExternalID     *string
	// UTM holds the query parameters redirects add to the destination, keyed by their names (utm_source, …).
	UTM          map[string]string
	ExpiresAt    *time.Time
	ExpiredURL   *string
	MaxClicks    *int64
	RedirectType int
	ForwardQuery bool
	Metadata     map[string]any
	Archived     bool
	// Clicks and BotClicks are the clicks recorded so far; AdmittedClicks the human clicks admitted against
	// MaxClicks at redirect time (kept only for links with a cap, ahead of Clicks while clicks are being written).
	Clicks         int64
	BotClicks      int64
	AdmittedClicks int64
	LastClickedAt  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Link statuses: whether a link sends visitors to its destination at a given time.
const (
	StatusActive           = "active"
	StatusExpired          = "expired"
	StatusMaxClicksReached = "max_clicks_reached"
)

// Status is StatusActive, StatusExpired or StatusMaxClicksReached at time t.
func (l Link) Status(t time.Time) string {
	switch {
	case l.ExpiresAt != nil && !t.Before(*l.ExpiresAt):
		return StatusExpired
	case l.MaxClicks != nil && max(l.AdmittedClicks, l.Clicks) >= *l.MaxClicks:
		return StatusMaxClicksReached
	}
	return StatusActive
}

func linkOf(l store.Link) Link {
	return Link{ID: l.ID, WorkspaceID: l.WorkspaceID, Domain: l.Domain, Slug: l.Slug, DestinationURL: l.DestinationURL,
		Title: l.Title, Tags: l.Tags, ExternalID: l.ExternalID, UTM: l.UTM, ExpiresAt: l.ExpiresAt, ExpiredURL: l.ExpiredURL,
		MaxClicks: l.MaxClicks, RedirectType: l.RedirectType, ForwardQuery: l.ForwardQuery, Metadata: l.Metadata,
		Archived: l.Archived, Clicks: l.Clicks, BotClicks: l.BotClicks, AdmittedClicks: l.AdmittedClicks,
		LastClickedAt: l.LastClickedAt, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// linkResult converts what a store call returned, passing its error through.
func linkResult(l store.Link, err error) (Link, error) {
	if err != nil {
		return Link{}, err
	}
	return linkOf(l), nil
}

// linksOf converts a list the store returned.
func linksOf(ls []store.Link) []Link {
	out := make([]Link, len(ls))
	for i, l := range ls {
		out[i] = linkOf(l)
	}
	return out
}
