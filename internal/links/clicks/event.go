package clicks

import (
	"context"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// emitClicked emits link.clicked, in the batch's transaction, for the clicks of workspaces where an endpoint
// receives it (it is opt-in): no event data is built or written for the other workspaces, so clicks cost nothing
// more while nobody listens.
func (r *Recorder) emitClicked(ctx context.Context, tx store.Tx, inserted []store.Click, links map[string]store.ClickedLink) error {
	workspaces := make([]string, len(inserted))
	for i, c := range inserted {
		workspaces[i] = c.WorkspaceID
	}
	subscribed, err := r.cfg.Events.Subscribers(ctx, tx, gen.LinkClickedEvent{}, workspaces...)
	if err != nil || len(subscribed) == 0 {
		return err
	}
	var ps []events.Pending
	for _, c := range inserted {
		if subscribed[c.WorkspaceID] {
			ps = append(ps, events.Pending{WorkspaceID: c.WorkspaceID, Payload: clickedEvent(c, links[c.LinkID])})
		}
	}
	_, err = r.cfg.Events.EmitMany(ctx, tx, ps)
	return err
}

// clickedEvent is the data of the link.clicked event of a click: the API's Click and the link it belongs to.
func clickedEvent(c store.Click, l store.ClickedLink) gen.LinkClickedEvent {
	return gen.LinkClickedEvent{
		Click: API(c),
		Link: gen.ClickedLink{Id: l.ID, Domain: l.Domain, Slug: l.Slug, DestinationUrl: l.DestinationURL,
			ExternalId: l.ExternalID},
	}
}

// API is the API's Click of a recorded click (never its address prefix or visitor hash): the one shape of a click
// in answers and in event payloads.
func API(c store.Click) gen.Click {
	return gen.Click{Id: c.ID, Object: gen.ClickObjectClick, LinkId: c.LinkID, ClickedAt: c.ClickedAt,
		Class: gen.ClickClass(c.Class), ReferrerHost: c.ReferrerHost, Country: c.Country,
		Device: gen.ClickDevice(c.Device), Os: c.OS, Browser: c.Browser, UserAgent: c.UserAgent}
}
