package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
)

// switchboard key origins changes a key's origins while a server runs, on both databases: the server's next
// requests follow the change (the store announces it to every process). A browser key keeps at least one origin; a
// secret key may lose them all; an unknown key is named.
func TestKeyOriginsCLI(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		srv := runServer(t, dbURL, "")
		out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
		if code != 0 {
			t.Fatalf("workspace create: %s", stderr)
		}
		var ws struct{ ID string }
		mustJSON(t, out, &ws)
		out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "share", "--kind", "browser",
			"--origins", "https://old.example.com", "--browser-scope", "links:create", "--json")
		if code != 0 {
			t.Fatalf("key create: %s", stderr)
		}
		var key struct{ ID, Secret string }
		mustJSON(t, out, &key)
		fromPage := func(origin string) func() int {
			return func() int {
				req, _ := http.NewRequest(http.MethodGet, srv.url+"/api/v1/me", nil)
				req.Header.Set("Authorization", "Bearer "+key.Secret)
				req.Header.Set("Origin", origin)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
		}
		await.Equal(t, "the key from its origin", fromPage("https://old.example.com"), http.StatusOK)

		out, stderr, code = cli(t, dbURL, "key", "origins", key.ID, "--origins", "https://*.example.com", "--json")
		var changed struct{ Origins []string }
		if code != 0 {
			t.Fatalf("key origins: %s", stderr)
		}
		mustJSON(t, out, &changed)
		if !slices.Equal(changed.Origins, []string{"https://*.example.com"}) {
			t.Errorf("origins %q", changed.Origins)
		}
		await.Equal(t, "the key from a newly allowed origin", fromPage("https://shop.example.com"), http.StatusOK)
		await.Equal(t, "the key from an origin no longer allowed", fromPage("https://old.example.org"), http.StatusForbidden)

		for _, tt := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"key", "origins", key.ID, "--origins", ""}, 1, "keeps at least one"},
			{[]string{"key", "origins", key.ID}, 2, "--origins is required"},
			{[]string{"key", "origins", key.ID, "--origins", "null"}, 2, "null"},
			{[]string{"key", "origins", "key_nope", "--origins", "https://a.example.com"}, 1, "no API key key_nope"},
		} {
			if _, stderr, code := cli(t, dbURL, tt.args...); code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("%v: exit %d, %q; want %d and %q", tt.args[2:], code, stderr, tt.code, tt.msg)
			}
		}

		out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "server", "--scopes", "models:read",
			"--origins", "https://old.example.com", "--json")
		if code != 0 {
			t.Fatalf("key create: %s", stderr)
		}
		mustJSON(t, out, &key)
		if out, stderr, code = cli(t, dbURL, "key", "origins", "--origins", "", key.ID); code != 0 ||
			!strings.Contains(out, "now answers these origins: none") {
			t.Errorf("a secret key without origins: exit %d, %q %q", code, out, stderr)
		}
	})
}

// switchboard key create --instances and key instances limit a key to some instances while a server runs, on both
// databases: another instance of the workspace answers 404 from the key's next request, and lifting the limit
// brings it back; an instance not in the workspace is refused.
func TestKeyInstancesCLI(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		srv := runServer(t, dbURL, "")
		out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", "Acme", "--json")
		if code != 0 {
			t.Fatalf("workspace create: %s", stderr)
		}
		var ws struct{ ID string }
		mustJSON(t, out, &ws)
		out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "ops", "--scopes",
			"messaging:write", "--json")
		if code != 0 {
			t.Fatalf("key create: %s", stderr)
		}
		var key struct {
			ID, Secret  string
			InstanceIDs []string `json:"instance_ids"`
		}
		mustJSON(t, out, &key)
		if len(key.InstanceIDs) != 0 {
			t.Fatalf("a new key is limited to %v", key.InstanceIDs)
		}
		call := func(method, path, body string) (int, string) {
			req, _ := http.NewRequest(method, srv.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key.Secret)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var v struct{ ID string }
			_ = json.NewDecoder(res.Body).Decode(&v)
			return res.StatusCode, v.ID
		}
		var ids []string
		for _, name := range []string{"a", "b"} {
			st, id := call(http.MethodPost, "/api/v1/instances", `{"name":"`+name+`","provider":"sandbox"}`)
			if st != http.StatusCreated {
				t.Fatalf("create instance: %d", st)
			}
			ids = append(ids, id)
		}
		get := func(id string) func() int {
			return func() int { st, _ := call(http.MethodGet, "/api/v1/instances/"+id, ""); return st }
		}

		out, stderr, code = cli(t, dbURL, "key", "instances", key.ID, "--instances", ids[0], "--json")
		if code != 0 {
			t.Fatalf("key instances: %s", stderr)
		}
		mustJSON(t, out, &key)
		if !slices.Equal(key.InstanceIDs, ids[:1]) {
			t.Errorf("instance_ids %v", key.InstanceIDs)
		}
		await.Equal(t, "another instance to the limited key", get(ids[1]), http.StatusNotFound)
		await.Equal(t, "its own instance", get(ids[0]), http.StatusOK)

		if out, stderr, code = cli(t, dbURL, "key", "instances", "--instances", "", key.ID); code != 0 ||
			!strings.Contains(out, "now reaches these instances: all") {
			t.Errorf("lifting the limit: exit %d, %q %q", code, out, stderr)
		}
		await.Equal(t, "the other instance once the limit is lifted", get(ids[1]), http.StatusOK)

		if out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "one", "--scopes",
			"messaging:read", "--instances", ids[1]); code != 0 || !strings.Contains(out, "Instances: "+ids[1]) {
			t.Errorf("key create --instances: exit %d, %q %q", code, out, stderr)
		}
		for _, tt := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"key", "instances", key.ID}, 2, "--instances is required"},
			{[]string{"key", "instances", key.ID, "--instances", "ins_01JDAD0A1B2C3D4E5F6G7H8J9K"}, 2, "no instance of the workspace"},
			{[]string{"key", "instances", "key_nope", "--instances", ids[0]}, 1, "no API key key_nope"},
		} {
			if _, stderr, code := cli(t, dbURL, tt.args...); code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("%v: exit %d, %q; want %d and %q", tt.args[2:], code, stderr, tt.code, tt.msg)
			}
		}
	})
}
