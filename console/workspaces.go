package console

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/workspaces"
)

func (c *Console) workspacesPage(ec echo.Context) error {
	return c.render(ec, http.StatusOK, "workspaces", page{Title: "Workspaces", Session: sessionFrom(ec)})
}

// createWorkspace makes the user the owner of a new workspace and switches the console to it.
func (c *Console) createWorkspace(ec echo.Context) error {
	ses := sessionFrom(ec)
	ctx := ec.Request().Context()
	w, err := c.workspaces.CreateWorkspace(ctx, ec.FormValue("name"), ses.UserID)
	var p *problem.Error
	if errors.As(err, &p) && p.Code == problem.ValidationFailed {
		return c.render(ec, http.StatusUnprocessableEntity, "workspaces", page{Title: "Workspaces", Session: ses,
			Error: fmt.Sprintf("Give the workspace a name of 1 to %d characters.", workspaces.MaxNameLength)})
	}
	if err != nil {
		return err
	}
	if err := c.accounts.ShowWorkspace(ctx, ses.ID, w.ID); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/api?workspace-created=1")
}

// switchWorkspace changes the workspace the console shows, to one the user belongs to.
func (c *Console) switchWorkspace(ec echo.Context) error {
	ses := sessionFrom(ec)
	id := ec.FormValue("workspace_id")
	for _, w := range ses.Workspaces {
		if w.ID == id {
			if err := c.accounts.ShowWorkspace(ec.Request().Context(), ses.ID, id); err != nil {
				return err
			}
			return ec.Redirect(http.StatusSeeOther, localPath(ec.FormValue("next"), "/user/api"))
		}
	}
	return c.render(ec, http.StatusNotFound, "error", page{Title: "Workspace not found", Session: ses,
		Error: "You are not a member of that workspace."})
}
