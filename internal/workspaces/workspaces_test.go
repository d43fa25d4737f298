package workspaces_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/problem/problemtest"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

var ctx = context.Background()

func TestMain(m *testing.M) { storetest.Main(m) }

func TestName(t *testing.T) {
	tests := []struct {
		raw, want string
	}{
		{"Acme", "Acme"},
		{"  Acme <Production>\t", "Acme <Production>"},
		{strings.Repeat("€", 100), strings.Repeat("€", 100)}, // 300 bytes, 100 characters
		{" " + strings.Repeat("n", 100) + " ", strings.Repeat("n", 100)},
		{"", ""},
		{" \t\n ", ""},
		{strings.Repeat("€", 101), ""},
		{strings.Repeat("n", 101), ""},
	}
	for _, tt := range tests {
		got, err := workspaces.Name(tt.raw)
		if tt.want == "" {
			problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldName)
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Name(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
	}
}

func TestCreateWorkspace(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := workspaces.New(db, workspaces.Config{})
		u, err := db.Users.Create(ctx, "owner@example.com", "hash")
		if err != nil {
			t.Fatal(err)
		}
		owned, err := svc.CreateWorkspace(ctx, "  Owned  ", u.ID)
		if err != nil || owned.Name != "Owned" {
			t.Fatalf("CreateWorkspace = %+v, %v", owned, err)
		}
		if role, err := db.Workspaces.Role(ctx, owned.ID, u.ID); err != nil || role != store.RoleOwner {
			t.Errorf("the creator's role = %q, %v; want owner", role, err)
		}
		operators, err := svc.CreateWorkspace(ctx, "Operator's", "")
		if err != nil {
			t.Fatal(err)
		}
		all, err := svc.Workspaces(ctx)
		if err != nil || len(all) != 2 || all[0].ID != operators.ID {
			t.Errorf("Workspaces = %+v, %v; want both, newest first", all, err)
		}

		_, err = svc.CreateWorkspace(ctx, "Orphan", "usr_gone")
		problemtest.Want(t, err, problem.NotFound)
		_, err = svc.CreateWorkspace(ctx, "   ", u.ID)
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldName)
		if all, _ := svc.Workspaces(ctx); len(all) != 2 {
			t.Errorf("refused creations stored workspaces: %d", len(all))
		}
	})
}

func TestSetEnabledModels(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := workspaces.New(db, workspaces.Config{})
		w, err := svc.CreateWorkspace(ctx, "Models", "")
		if err != nil {
			t.Fatal(err)
		}
		some := []string{modelcatalog.Default().All()[0].ID}
		got, err := svc.SetEnabledModels(ctx, w.ID, some)
		if err != nil || !slices.Equal(got.EnabledModels, some) {
			t.Fatalf("SetEnabledModels = %v, %v", got.EnabledModels, err)
		}
		_, err = svc.SetEnabledModels(ctx, w.ID, []string{some[0], "gpt-9", "gpt-10"})
		p := problemtest.Want(t, err, problem.ValidationFailed, "/enabled_models/1", "/enabled_models/2")
		if !strings.Contains(p.Fields[0].Detail, `"gpt-9" is not in the model catalogue`) {
			t.Errorf("detail = %q", p.Fields[0].Detail)
		}
		if got, err = svc.SetEnabledModels(ctx, w.ID, nil); err != nil || got.EnabledModels != nil {
			t.Errorf("enabling every model = %v, %v", got.EnabledModels, err)
		}
		_, err = svc.SetEnabledModels(ctx, "ws_nope", nil)
		problemtest.Want(t, err, problem.NotFound)

		// The operator's own catalogue is the one checked.
		own, err := modelcatalog.New([]modelcatalog.Model{{ID: "local-llama", OwnedBy: "ops"}})
		if err != nil {
			t.Fatal(err)
		}
		operator := workspaces.New(db, workspaces.Config{Models: own})
		if _, err := operator.SetEnabledModels(ctx, w.ID, []string{"local-llama"}); err != nil {
			t.Errorf("the operator's model: %v", err)
		}
		_, err = operator.SetEnabledModels(ctx, w.ID, some)
		problemtest.Want(t, err, problem.ValidationFailed, "/enabled_models/0")
	})
}

func TestAddMember(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := workspaces.New(db, workspaces.Config{})
		w, err := svc.CreateWorkspace(ctx, "Members", "")
		if err != nil {
			t.Fatal(err)
		}
		u, err := db.Users.Create(ctx, "them@example.com", "hash")
		if err != nil {
			t.Fatal(err)
		}
		m, err := svc.AddMember(ctx, w.ID, "  Them@Example.com ")
		if err != nil || m != (workspaces.Member{WorkspaceID: w.ID, UserID: u.ID, Email: u.Email, Role: store.RoleOwner}) {
			t.Fatalf("AddMember = %+v, %v", m, err)
		}
		_, err = svc.AddMember(ctx, w.ID, "them@example.com")
		problemtest.Want(t, err, problem.Conflict)
		_, err = svc.AddMember(ctx, w.ID, "nobody@example.com")
		if p := problemtest.Want(t, err, problem.NotFound); !strings.Contains(p.Detail, "sign up in the console first") {
			t.Errorf("detail = %q", p.Detail)
		}
		_, err = svc.AddMember(ctx, "ws_nope", "them@example.com")
		problemtest.Want(t, err, problem.NotFound)
		_, err = svc.AddMember(ctx, w.ID, " ")
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldEmail)
	})
}

func TestCreateKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := workspaces.New(db, workspaces.Config{})
		w, err := svc.CreateWorkspace(ctx, "Keys", "")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		k, secret, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: " Billing ", Preset: "automation",
			ExpiresIn: 720 * time.Hour, CreatedBy: "usr_1"})
		if err != nil {
			t.Fatal(err)
		}
		// The key handed out carries no hash of its secret; the stored one is the secret's.
		stored, err := db.APIKeys.ByID(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if apikey.Check(secret) != nil || apikey.Hash(secret) != stored.SecretHash || !strings.HasPrefix(secret, k.DisplayPrefix) ||
			!strings.HasSuffix(secret, k.Last4) {
			t.Errorf("the secret %q does not match the stored key %+v", secret, k)
		}
		if k.Name != "Billing" || !slices.Equal(k.Scopes, []string{"webhooks:write", "automation:write"}) || k.CreatedBy != "usr_1" {
			t.Errorf("key = %+v", k)
		}
		if k.ExpiresAt == nil || k.ExpiresAt.Before(start.Add(720*time.Hour)) || k.ExpiresAt.After(time.Now().Add(720*time.Hour)) {
			t.Errorf("expires at %v, want in 720h", k.ExpiresAt)
		}

		custom, _, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "custom",
			Scopes: []string{"links:write", "models:read", "links:write"}, CreatedBy: workspaces.CreatedByCLI})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(custom.Scopes, []string{"models:read", "links:write"}) || custom.ExpiresAt != nil {
			t.Errorf("custom key = %+v, want catalogue order and no expiry", custom)
		}

		// Every invalid field is reported at once, and nothing is stored.
		_, secret, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "", Preset: "root", ExpiresIn: -time.Hour})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldName, workspaces.FieldPreset, workspaces.FieldExpiresIn)
		if secret != "" {
			t.Error("a refused key has a secret")
		}
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "unknown scope", Scopes: []string{"billing:write"}})
		problemtest.Want(t, err, problem.ValidationFailed, "/scopes/0")
		// Origins are stored normalized, without duplicates, and read back; every invalid one is reported.
		bound, _, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "site", Preset: "links",
			Origins: []string{"HTTPS://www.acme.example:443/", "", "https://*.acme.dev", "https://www.acme.example"}})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"https://www.acme.example", "https://*.acme.dev"}
		if got, err := svc.Key(ctx, w.ID, bound.ID); err != nil || !slices.Equal(got.Origins, want) || !slices.Equal(bound.Origins, want) {
			t.Errorf("origins %v, read back %v (%v); want %v", bound.Origins, got.Origins, err, want)
		}
		if got, err := svc.Key(ctx, w.ID, custom.ID); err != nil || got.Origins == nil || len(got.Origins) != 0 {
			t.Errorf("a key without origins reads back %#v (%v)", got.Origins, err)
		}
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Preset: "links",
			Origins: []string{"https://ok.example", "null", "https://*.com/path"}})
		problemtest.Want(t, err, problem.ValidationFailed, "/origins/1", "/origins/2")
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: "ws_nope", Name: "k", Preset: "read"})
		problemtest.Want(t, err, problem.NotFound)

		keys, err := svc.Keys(ctx, w.ID)
		if err != nil || len(keys) != 3 || keys[0].ID != bound.ID {
			t.Errorf("Keys = %d keys, %v; want the three created, newest first", len(keys), err)
		}
		_, err = svc.Keys(ctx, "ws_nope")
		problemtest.Want(t, err, problem.NotFound)
	})
}

// A browser key has an sb_pk_ secret, origins, and one browser scope aimed at a target of its own workspace.
func TestCreateBrowserKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		svc := workspaces.New(db, workspaces.Config{})
		w, err := svc.CreateWorkspace(ctx, "Browser", "")
		if err != nil {
			t.Fatal(err)
		}
		other, err := svc.CreateWorkspace(ctx, "Other", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.EventTypes.Create(ctx, nil, &store.EventTypeDef{WorkspaceID: other.ID, Name: "custom.signup",
			Description: "d", Schema: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		k, secret, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "embed", Kind: apikey.KindBrowser,
			BrowserScope: "links:create", Origins: []string{"https://www.acme.example"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, apikey.BrowserPrefix) || k.Kind != apikey.KindBrowser ||
			!slices.Equal(k.Scopes, []string{"links:create"}) || k.DailyQuota != workspaces.DefaultDailyQuota || k.ScopeTarget != "" {
			t.Errorf("browser key %+v (%s)", k, secret[:6])
		}
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Kind: apikey.KindBrowser,
			BrowserScope: "links:create", DailyQuota: -1})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldDailyQuota, workspaces.FieldOrigins)
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Kind: apikey.KindBrowser,
			BrowserScope: "links:write", Origins: []string{"https://www.acme.example"}})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldBrowserScope)
		// The event type of another workspace is no target.
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Kind: apikey.KindBrowser,
			BrowserScope: "events:publish", Target: "custom.signup", Origins: []string{"https://www.acme.example"}})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldTarget)
		// The link of another workspace is no target either: a stats key reads a link of its own workspace.
		theirs := &store.Link{WorkspaceID: other.ID, Domain: "sb.example", Slug: "theirs", DestinationURL: "https://example.com",
			RedirectType: 302}
		if refused, err := db.Links.CreateMany(ctx, db.Bun(), []*store.Link{theirs}); err != nil || refused[0] != nil {
			t.Fatal(err, refused)
		}
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Kind: apikey.KindBrowser,
			BrowserScope: "links:read_stats", Target: theirs.ID, Origins: []string{"https://www.acme.example"}})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldTarget)
		k, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: other.ID, Name: "counter", Kind: apikey.KindBrowser,
			BrowserScope: "links:read_stats", Target: theirs.ID, Origins: []string{"https://www.acme.example"}})
		if err != nil || k.ScopeTarget != theirs.ID || k.DailyQuota != 0 {
			t.Fatalf("a stats key of the link's workspace: %+v %v", k, err)
		}
		_, _, err = svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "bad", Kind: "public", Preset: "full"})
		problemtest.Want(t, err, problem.ValidationFailed, workspaces.FieldKind)
	})
}

func TestRevokeKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		var forgotten []string
		svc := workspaces.New(db, workspaces.Config{ForgetKey: func(hash string) { forgotten = append(forgotten, hash) }})
		a, err := svc.CreateWorkspace(ctx, "A", "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := svc.CreateWorkspace(ctx, "B", "")
		if err != nil {
			t.Fatal(err)
		}
		newKey := func(w workspaces.Workspace) workspaces.Key {
			k, _, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: w.ID, Name: "k", Preset: "read"})
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		ka, kb := newKey(a), newKey(b)

		// A member's revoke reaches the keys of their workspace only.
		_, err = svc.RevokeWorkspaceKey(ctx, a.ID, kb.ID)
		problemtest.Want(t, err, problem.NotFound)
		if got, _ := svc.Key(ctx, b.ID, kb.ID); got.RevokedAt != nil || len(forgotten) != 0 {
			t.Fatal("a key of another workspace was revoked")
		}
		revoked, err := svc.RevokeWorkspaceKey(ctx, a.ID, ka.ID)
		if err != nil || revoked.RevokedAt == nil {
			t.Fatalf("RevokeWorkspaceKey = %+v, %v", revoked, err)
		}
		// Revoking again changes nothing.
		again, err := svc.RevokeWorkspaceKey(ctx, a.ID, ka.ID)
		if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
			t.Errorf("revoking twice = %v, %v; want the first revocation's time %v", again.RevokedAt, err, revoked.RevokedAt)
		}

		// The operator's revoke reaches any workspace.
		if _, err := svc.RevokeKey(ctx, kb.ID); err != nil {
			t.Fatal(err)
		}
		_, err = svc.RevokeKey(ctx, "key_nope")
		problemtest.Want(t, err, problem.NotFound)
		_, err = svc.Key(ctx, a.ID, kb.ID)
		problemtest.Want(t, err, problem.NotFound)

		hash := func(k workspaces.Key) string {
			stored, err := db.APIKeys.ByID(ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			return stored.SecretHash
		}
		if !slices.Equal(forgotten, []string{hash(ka), hash(ka), hash(kb)}) {
			t.Errorf("forgotten = %q, want every revoked key's hash", forgotten)
		}
	})
}
