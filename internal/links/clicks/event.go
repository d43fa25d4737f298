package clicks

import (
	"time"

	"github.com/switchboard/switchboard/store"
)

// ClickedEvent is the data of a link.clicked event (the API's LinkClickedEvent schema).
type ClickedEvent struct {
	Click ClickJSON   `json:"click"`
	Link  ClickedLink `json:"link"`
}

// ClickJSON is the API's Click: never the address prefix or the visitor hash.
type ClickJSON struct {
	ID           string    `json:"id"`
	Object       string    `json:"object"`
	LinkID       string    `json:"link_id"`
	ClickedAt    time.Time `json:"clicked_at"`
	Class        string    `json:"class"`
	ReferrerHost *string   `json:"referrer_host"`
	Country      *string   `json:"country"`
	Device       string    `json:"device"`
	OS           string    `json:"os"`
	Browser      string    `json:"browser"`
	UserAgent    string    `json:"user_agent"`
}

// ClickedLink is the link of a link.clicked event.
type ClickedLink struct {
	ID             string  `json:"id"`
	Domain         string  `json:"domain"`
	Slug           string  `json:"slug"`
	DestinationURL string  `json:"destination_url"`
	ExternalID     *string `json:"external_id"`
}

// ClickedEventData builds the data of the link.clicked event of a click.
func ClickedEventData(c store.Click, l store.ClickedLink) any {
	return ClickedEvent{
		Click: ClickJSON{ID: c.ID, Object: "click", LinkID: c.LinkID, ClickedAt: c.ClickedAt, Class: c.Class,
			ReferrerHost: c.ReferrerHost, Country: c.Country, Device: c.Device, OS: c.OS, Browser: c.Browser,
			UserAgent: c.UserAgent},
		Link: ClickedLink{ID: l.ID, Domain: l.Domain, Slug: l.Slug, DestinationURL: l.DestinationURL, ExternalID: l.ExternalID},
	}
}
