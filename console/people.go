package console

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

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

// personView is a person with each contact's instance by name.
type personView struct {
	channels.Person
	Addresses []string
	Contacts  []personContact
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
	ses := sessionFrom(ec)
	if ses.Workspace == nil {
		return problem.New(problem.NotFound, "There is no such person in this workspace.")
	}
	p, err := c.channels.GetPerson(ec.Request().Context(), ses.Workspace.ID, ec.Param("id"), nil)
	if err != nil {
		return err
	}
	names, err := c.instanceNames(ec, ses.Workspace.ID)
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "person", page{Title: "Person", Session: ses, Data: viewPerson(p, names)})
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
	api := channels.PersonAPI(p)
	v := personView{Person: p, Addresses: api.Addresses}
	for _, pc := range p.Contacts {
		v.Contacts = append(v.Contacts, personContact{PersonContact: pc, InstanceName: names[pc.InstanceID]})
	}
	return v
}
