package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// peopleData is what the people page shows: the workspace's people, newest first, or the one holding Address.
type peopleData struct {
	Address string
	People  []personView
	More    bool
}

// personView is a person with each contact's instance by name, and (on its page) its latest routes.
type personView struct {
	channels.Person
	Addresses []string
	Contacts  []personContact
	Routes    []gen.Route
	// Until and Within are the send form's condition, kept when it is refused.
	Until  string
	Within int
	Text   string
}

// personContact is a contact of a person on one instance.
type personContact struct {
	store.PersonContact
	InstanceName string
}

func (c *Console) peoplePage(ec echo.Context) error {
	ses := sessionFrom(ec)
	d := peopleData{Address: strings.TrimSpace(ec.QueryParam("address"))}
	if ses.Workspace != nil {
		ps, more, err := c.channels.ListPeople(ec.Request().Context(), ses.Workspace.ID, d.Address, nil, store.Page{Limit: 50})
		if err != nil {
			return err
		}
		names, err := c.instanceNames(ec, ses.Workspace.ID)
		if err != nil {
			return err
		}
		for _, p := range ps {
			d.People = append(d.People, viewPerson(p, names))
		}
		d.More = more
	}
	return c.render(ec, http.StatusOK, "people", page{Title: "People", Session: ses, Data: d})
}

func (c *Console) personPage(ec echo.Context) error {
	notice := ""
	if ec.QueryParam("done") == "sent" {
		notice = "The message is on its way: the route below tries each channel in turn."
	}
	return c.renderPerson(ec, http.StatusOK, notice, "", personView{Until: "delivered", Within: 60})
}

func (c *Console) renderPerson(ec echo.Context, status int, notice, errMsg string, form personView) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return problem.New(problem.NotFound, "There is no such person in this workspace.")
	}
	ctx := ec.Request().Context()
	p, err := c.channels.GetPerson(ctx, ses.Workspace.ID, ec.Param("id"), nil)
	if err != nil {
		return err
	}
	names, err := c.instanceNames(ec, ses.Workspace.ID)
	if err != nil {
		return err
	}
	v := viewPerson(p, names)
	v.Until, v.Within, v.Text = form.Until, form.Within, form.Text
	rs, _, err := c.channels.ListRoutes(ctx, ses.Workspace.ID, store.RouteFilter{PersonID: p.ID}, nil, store.Page{Limit: 10})
	if err != nil {
		return err
	}
	for _, r := range rs {
		v.Routes = append(v.Routes, channels.RouteAPI(r))
	}
	return c.render(ec, status, "person", page{Title: "Person", Session: ses, Notice: notice, Error: errMsg, Data: v})
}

// sendToPerson sends the form's text to the person through the channels checked, in the page's order, each with
// the form's condition (the last one only needs to be sent).
func (c *Console) sendToPerson(ec echo.Context) error {
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return problem.New(problem.NotFound, "There is no such person in this workspace.")
	}
	form := personView{Until: ec.FormValue("until"), Text: strings.TrimSpace(ec.FormValue("text"))}
	form.Within, _ = strconv.Atoi(ec.FormValue("within"))
	fail := func(msg string) error { return c.renderPerson(ec, http.StatusUnprocessableEntity, "", msg, form) }
	params, err := ec.FormParams()
	if err != nil {
		return err
	}
	channelIDs := params["channel"]
	switch {
	case form.Text == "":
		return fail("Write the message to send.")
	case len(channelIDs) == 0:
		return fail("Check at least one channel to try.")
	case form.Within < 1 || form.Within > 86400:
		return fail("Wait from 1 to 86400 seconds for each channel.")
	}
	in := channels.RouteDraft{Message: store.RouteMessage{Type: string(channels.TypeText), Text: &form.Text}}
	for i, id := range channelIDs {
		until := form.Until
		if i == len(channelIDs)-1 {
			until = string(gen.RouteConditionSent)
		}
		in.Steps = append(in.Steps, channels.RouteStepDraft{InstanceID: &id, Until: until, WithinSeconds: form.Within})
	}
	_, err = c.channels.SendToPerson(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"), nil, in)
	if p := problemOf(err); p != nil && p.Status() < 500 && p.Status() != http.StatusNotFound {
		msg := p.Detail
		for _, f := range p.Fields {
			msg += " " + f.Detail + "."
		}
		return fail(msg)
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/people/"+ec.Param("id")+"?done=sent")
}

// instanceNames maps the workspace's instances to their names.
func (c *Console) instanceNames(ec echo.Context, workspaceID string) (map[string]string, error) {
	names := map[string]string{}
	p := store.Page{Limit: 100}
	for {
		is, more, err := c.channels.List(ec.Request().Context(), workspaceID, store.InstanceFilter{}, p)
		if err != nil {
			return nil, err
		}
		for _, i := range is {
			names[i.ID] = i.Name
		}
		if !more || len(is) == 0 {
			return names, nil
		}
		p.After = is[len(is)-1].ID
	}
}

func viewPerson(p channels.Person, names map[string]string) personView {
	v := personView{Person: p, Addresses: p.Addresses()}
	for _, pc := range p.Contacts {
		v.Contacts = append(v.Contacts, personContact{PersonContact: pc, InstanceName: names[pc.InstanceID]})
	}
	return v
}
