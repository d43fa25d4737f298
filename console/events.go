package console

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// The event log page: the workspace's events, newest first, filtered by type or family, each with its JSON as
// receivers get it and the endpoints it went to.

func (c *Console) registerEvents(g *echo.Group) {
	g.GET("/events", c.eventsPage)
}

// eventsData is what the event log shows.
type eventsData struct {
	Events []eventRow
	// Type is the filter: an event type or a family wildcard ("link.*"); Types and Families its choices.
	Type     string
	Types    []string
	Families []string
	Before   string
	Next     string
	TZ       string
}

type eventRow struct {
	events.Event
	JSON       string
	Deliveries []eventDelivery
}

type eventDelivery struct {
	webhook.Delivery
	URL string
}

const eventsPageSize = 25

func (c *Console) eventsPage(ec echo.Context) error {
	ses := sessionFrom(ec)
	d := eventsData{Type: ec.QueryParam("type"), Before: ec.QueryParam("before"), TZ: ec.QueryParam("tz")}
	if _, err := zone(d.TZ); err != nil || d.TZ == "" {
		d.TZ = "UTC"
	}
	if ses.Workspace != nil {
		ctx := ec.Request().Context()
		ws := ses.Workspace.ID
		types, err := c.automation.Types(ctx, ws)
		if err != nil {
			return err
		}
		for _, t := range types {
			if n := len(d.Families); n == 0 || d.Families[n-1] != t.Family+".*" {
				d.Families = append(d.Families, t.Family+".*")
			}
			d.Types = append(d.Types, t.Name)
		}
		evs, more, err := c.webhooks.Events(ctx, ws, store.EventFilter{Type: d.Type}, store.Page{Limit: eventsPageSize, Before: d.Before})
		if err != nil {
			return err
		}
		if more {
			d.Next = evs[len(evs)-1].ID
		}
		ids := make([]string, len(evs))
		for i, ev := range evs {
			ids[i] = ev.ID
		}
		byEvent, err := c.webhooks.EventDeliveries(ctx, ws, ids)
		if err != nil {
			return err
		}
		urls, err := c.endpointURLs(ec, ws)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			row := eventRow{Event: ev}
			raw, err := json.Marshal(webhook.EnvelopeOf(ev))
			if err != nil {
				return err
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, raw, "", "  "); err != nil {
				return err
			}
			row.JSON = pretty.String()
			for _, dl := range byEvent[ev.ID] {
				row.Deliveries = append(row.Deliveries, eventDelivery{Delivery: dl, URL: urls[dl.EndpointID]})
			}
			d.Events = append(d.Events, row)
		}
	}
	return c.render(ec, http.StatusOK, "events", page{Title: "Event log", Session: ses, Data: d})
}

// endpointURLs maps the workspace's endpoints to their URLs.
func (c *Console) endpointURLs(ec echo.Context, workspaceID string) (map[string]string, error) {
	urls := map[string]string{}
	p := store.Page{Limit: 100}
	for {
		es, more, err := c.webhooks.List(ec.Request().Context(), workspaceID, p)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			urls[e.ID] = e.URL
		}
		if !more {
			return urls, nil
		}
		p.Before = es[len(es)-1].ID
	}
}
