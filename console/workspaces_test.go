package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestCreateWorkspace(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "ws")

		for _, name := range []string{"", "   ", strings.Repeat("n", 101)} {
			r := b.postCSRF(t, "/user/workspaces", url.Values{"name": {name}})
			r.wantStatus(t, http.StatusUnprocessableEntity)
			if got := r.alert(); !strings.Contains(got, "name of 1 to 100 characters") {
				t.Errorf("name %q: alert = %q", name, got)
			}
		}
		// Without the CSRF token nothing is created either.
		b.post(t, "/user/workspaces", url.Values{"name": {"Sneaky"}}).wantStatus(t, http.StatusForbidden)
		if ws, _ := db.Workspaces.ForUser(ctx, u.id); len(ws) != 0 {
			t.Fatalf("refused forms created workspaces: %+v", ws)
		}

		acme := b.newWorkspace(t, "  Acme <Production>  ")
		if acme.Name != "Acme <Production>" || acme.Role != store.RoleOwner {
			t.Errorf("workspace = %+v, want the trimmed name with the user as owner", acme)
		}
		p := b.get(t, "/user/api?workspace-created=1")
		p.wantStatus(t, http.StatusOK)
		if got := p.notice(); !strings.Contains(got, "workspace is ready") {
			t.Errorf("notice = %q", got)
		}
		if strings.Contains(p.body, "Acme <Production>") || !strings.Contains(p.body, "Acme &lt;Production&gt;") {
			t.Error("the workspace name is not HTML-escaped")
		}
		p.wantText(t, acme.ID)

		beta := b.newWorkspace(t, "Beta")
		if beta.ID == acme.ID {
			t.Fatal("the console did not switch to the new workspace")
		}
		p = b.get(t, "/user/workspaces")
		p.wantStatus(t, http.StatusOK)
		for _, w := range []store.MemberWorkspace{acme, beta} {
			p.wantText(t, w.ID)
			p.wantText(t, w.Name)
		}
		p.wantText(t, "owner")
		p.wantText(t, "Open Acme <Production>") // only the workspace that is not current has an open button
		p.wantNoText(t, "Open Beta")
	})
}

func TestWorkspaceListAndSwitchAreTenantIsolated(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		alice, bob := e.browser(), e.browser()
		alice.newUser(t, "alice")
		bob.newUser(t, "bob")
		a1 := alice.newWorkspace(t, "Alice One")
		a2 := alice.newWorkspace(t, "Alice Two")
		b1 := bob.newWorkspace(t, "Bob Secret Plans")

		for _, path := range []string{"/user/workspaces", "/user/api", "/user/account"} {
			p := alice.get(t, path)
			p.wantStatus(t, http.StatusOK)
			p.wantNoText(t, b1.ID)
			p.wantNoText(t, b1.Name)
			p = bob.get(t, path)
			p.wantNoText(t, a1.ID)
			p.wantNoText(t, a2.ID)
		}

		for _, id := range []string{b1.ID, "ws_does_not_exist", ""} {
			r := alice.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {id}})
			r.wantStatus(t, http.StatusNotFound)
			if got := r.alert(); !strings.Contains(got, "not a member") {
				t.Errorf("alert = %q", got)
			}
			r.wantNoText(t, b1.Name)
			if cur := alice.currentWorkspace(t); cur.ID != a2.ID {
				t.Fatalf("switching to %q changed the workspace to %s", id, cur.ID)
			}
		}
		// Without the CSRF token the switch does not happen.
		alice.post(t, "/user/workspaces/switch", url.Values{"workspace_id": {a1.ID}}).wantStatus(t, http.StatusForbidden)
		if cur := alice.currentWorkspace(t); cur.ID != a2.ID {
			t.Fatal("a switch without CSRF token happened")
		}

		r := alice.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {a1.ID}})
		r.wantRedirect(t, "/user/api")
		if cur := alice.currentWorkspace(t); cur.ID != a1.ID {
			t.Fatalf("current workspace = %s, want %s", cur.ID, a1.ID)
		}
		alice.get(t, "/user/api").wantText(t, "Keys of Alice One")

		r = alice.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {a2.ID}, "next": {"/user/workspaces"}})
		r.wantRedirect(t, "/user/workspaces")
		r = alice.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {a1.ID}, "next": {"//evil.example"}})
		r.wantRedirect(t, "/user/api")
	})
}

// `switchboard workspace add-member` makes a workspace created with the CLI appear in the console.
func TestWorkspaceAddedByCLI(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		u := b.newUser(t, "ops")
		ws, err := db.Workspaces.Create(ctx, "Created by the CLI")
		if err != nil {
			t.Fatal(err)
		}
		p := b.get(t, "/user/workspaces")
		p.wantNoText(t, ws.ID)
		b.get(t, "/user/api").wantText(t, "You have no workspace yet")

		if err := db.Workspaces.AddMember(ctx, ws.ID, u.id, store.RoleOwner); err != nil {
			t.Fatal(err)
		}
		p = b.get(t, "/user/workspaces")
		p.wantStatus(t, http.StatusOK)
		p.wantText(t, ws.ID)
		p.wantText(t, "Created by the CLI")
		// The user's only workspace is the one the console shows.
		p = b.get(t, "/user/api")
		p.wantText(t, "Keys of Created by the CLI")
		p.wantNoText(t, "You have no workspace yet")
		r := b.postCSRF(t, "/user/workspaces/switch", url.Values{"workspace_id": {ws.ID}})
		r.wantRedirect(t, "/user/api")
		if cur := b.currentWorkspace(t); cur.ID != ws.ID {
			t.Fatalf("current workspace = %s", cur.ID)
		}
	})
}
