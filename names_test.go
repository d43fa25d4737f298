package main

import (
	"bytes"
	"context"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
)

// The name rule of workspaces and keys is the workspaces service's, and every way in — the service itself, the
// console's forms, the CLI's commands — agrees on it: names are counted in characters, not bytes, after surrounding
// white space is dropped.
func TestNameRuleAgreesEverywhere(t *testing.T) {
	names := []struct {
		what string
		name string
		ok   bool
	}{
		{"100 three-byte characters", strings.Repeat("€", 100), true},
		{"101 three-byte characters", strings.Repeat("€", 101), false},
		{"white space only", " \t  ", false},
		{"surrounded by white space", "  Acme €  ", true},
	}
	databases(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := openDB(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		svc := workspaces.New(db, workspaces.Config{})
		home, err := svc.CreateWorkspace(ctx, "Home", "")
		if err != nil {
			t.Fatal(err)
		}
		b := newConsoleBrowser(t, db, svc)

		entryPoints := []struct {
			name   string
			accept func(t *testing.T, name string) bool
		}{
			{"service: workspace", func(t *testing.T, name string) bool {
				_, err := svc.CreateWorkspace(ctx, name, "")
				return accepted(t, err)
			}},
			{"service: key", func(t *testing.T, name string) bool {
				_, _, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: home.ID, Name: name, Preset: "read"})
				return accepted(t, err)
			}},
			{"console: workspace form", func(t *testing.T, name string) bool {
				return b.submit(t, "/user/workspaces", "/user/workspaces", url.Values{"name": {name}}, http.StatusSeeOther)
			}},
			{"console: key form", func(t *testing.T, name string) bool {
				return b.submit(t, "/user/api", "/user/api/keys",
					url.Values{"name": {name}, "preset": {"read"}, "expiry": {"30d"}}, http.StatusCreated)
			}},
			{"CLI: workspace create", func(t *testing.T, name string) bool {
				return runCLI(t, "workspace", "create", "--database-url", dbURL, "--name", name)
			}},
			{"CLI: key create", func(t *testing.T, name string) bool {
				return runCLI(t, "key", "create", "--database-url", dbURL, "--workspace", home.ID, "--name", name,
					"--scopes", "models:read")
			}},
		}
		for _, n := range names {
			for _, ep := range entryPoints {
				if got := ep.accept(t, n.name); got != n.ok {
					t.Errorf("%s: %s accepted = %v, want %v", n.what, ep.name, got, n.ok)
				}
			}
		}
		// What was accepted is stored trimmed, the same from every entry point (the console's keys are in the
		// workspaces its form created, which it switched to).
		stored := map[string]int{}
		all, err := svc.Workspaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range all {
			stored[w.Name]++
			keys, err := svc.Keys(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				stored[k.Name]++
			}
		}
		for _, n := range names {
			if want := strings.TrimSpace(n.name); n.ok && stored[want] != len(entryPoints) {
				t.Errorf("%s: stored %d times as %q, want once per entry point (%d)", n.what, stored[want], want, len(entryPoints))
			}
		}
	})
}

// accepted tells a success from a refusal of the name; any other failure ends the test.
func accepted(t *testing.T, err error) bool {
	t.Helper()
	var p *problem.Error
	if err == nil {
		return true
	}
	if !errors.As(err, &p) || p.Code != problem.ValidationFailed || p.Fields[0].Pointer != workspaces.FieldName {
		t.Fatalf("not a refusal of the name: %v", err)
	}
	return false
}

// runCLI runs a command in this process: true when it succeeds, false when it is refused as a usage error (exit 2).
func runCLI(t *testing.T, args ...string) bool {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if err == nil {
		return true
	}
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("%q: %v, want success or a usage error about --name", args, err)
	}
	return false
}

// consoleBrowser is a signed-in user of a console served in this process, as serve wires it.
type consoleBrowser struct {
	url    string
	client *http.Client
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="(csrf_token|nonce)" value="([^"]*)">`)

// newConsoleBrowser serves handlers and the console over db with svc, signs a new user up and gives them a
// workspace.
func newConsoleBrowser(t *testing.T, db *store.DB, svc *workspaces.Service) *consoleBrowser {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := apptest.New(t, db, app.Config{Logger: quiet})
	srv, err := handlers.New(handlers.Config{Logger: quiet, Verifier: a.Verifier, Box: a.Box, Events: a.Events,
		Links: a.Links, Webhooks: a.Webhooks, Channels: a.Messaging, Automation: a.Automation, LLM: a.LLM, Bots: a.Bots}, db)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Logger: quiet, Workspaces: svc}, db)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(con.Register)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
	})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &consoleBrowser{url: hs.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	signUp := url.Values{"email": {"names@example.com"}, "password": {"correct horse battery staple"}}
	if !b.submit(t, "/user/sign-up", "/user/sign-up", signUp, http.StatusSeeOther) {
		t.Fatal("sign-up refused")
	}
	if !b.submit(t, "/user/workspaces", "/user/workspaces", url.Values{"name": {"Console home"}}, http.StatusSeeOther) {
		t.Fatal("the first workspace was refused")
	}
	return b
}

// submit loads page, posts form (with the page's CSRF token and nonce) to action and reports whether the answer is
// the success status; a 422 is a refusal, anything else ends the test.
func (b *consoleBrowser) submit(t *testing.T, page, action string, form url.Values, success int) bool {
	t.Helper()
	fields := b.fields(t, page)
	for name, value := range fields {
		form.Set(name, value)
	}
	res, err := b.client.PostForm(b.url+action, form)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	switch res.StatusCode {
	case success:
		return true
	case http.StatusUnprocessableEntity:
		return false
	}
	t.Fatalf("POST %s: %d", action, res.StatusCode)
	return false
}

// fields are the hidden form fields of a page.
func (b *consoleBrowser) fields(t *testing.T, page string) map[string]string {
	t.Helper()
	res, err := b.client.Get(b.url + page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	out := map[string]string{}
	for _, m := range hiddenField.FindAllStringSubmatch(string(body), -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}
