package main

// The operator's commands: migrate, workspace and key. The workspace and key commands are adapters over the
// workspaces service, as the console is: they read flags, call the service and print what it returns; its refusals
// become usage errors (exit 2) naming the flag, or errors in its own words (exit 1).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/workspaces"
	"github.com/switchboard/switchboard/store"
)

func migrateCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("migrate")
	dbURL := databaseFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "Database is up to date (%s).\n", db.Dialect())
	return nil
}

// openWorkspaces opens the database and the workspaces service over it, with models as its catalogue (nil: the
// built-in one). No key is verified in a CLI process, so the service has no cache to make forget a revoked key: the
// servers see the revocation through the store's change watch.
func openWorkspaces(ctx context.Context, dbURL string, models *modelcatalog.Catalog) (*workspaces.Service, *store.DB, error) {
	db, err := openDB(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	return workspaces.New(db, workspaces.Config{Models: models}), db, nil
}

// flagOf names the flag that carries each field of the service's input.
var flagOf = map[string]string{
	workspaces.FieldName:          "--name",
	workspaces.FieldScopes:        "--scopes",
	workspaces.FieldExpiresIn:     "--expires-in",
	workspaces.FieldEnabledModels: "--enable",
	workspaces.FieldEmail:         "--email",
	workspaces.FieldOrigins:       "--origins",
	workspaces.FieldInstances:     "--instances",
	workspaces.FieldKind:          "--kind",
	workspaces.FieldBrowserScope:  "--browser-scope",
	workspaces.FieldTarget:        "--target",
	workspaces.FieldDailyQuota:    "--daily-quota",
}

// refused turns what the service refused into the CLI's error: invalid input is a usage error of cmd naming the
// flag of each invalid field; anything else the service can tell (no such workspace, a member already) is an error
// in its words. Other errors are returned as they are.
func refused(cmd string, err error) error {
	var p *problem.Error
	if !errors.As(err, &p) {
		return err
	}
	if p.Code != problem.ValidationFailed {
		return errors.New(p.Detail)
	}
	var invalid []string
	for _, f := range p.Fields {
		// "/scopes/2" is the third of --scopes.
		field := f.Pointer
		if i := strings.IndexByte(field[1:], '/'); i >= 0 {
			field = field[:i+1]
		}
		name, ok := flagOf[field]
		if !ok {
			name = f.Pointer
		}
		invalid = append(invalid, name+": "+f.Detail)
	}
	return usagef("%s: %s", cmd, strings.Join(invalid, "; "))
}

// refusedIn is refused for a command on an existing workspace or key, saying too when the database holds no
// workspace at all: such a command then most likely ran against another database than the server's — the default
// SQLite file is relative to the working directory, and a command run elsewhere creates an empty one there.
func refusedIn(ctx context.Context, cmd string, svc *workspaces.Service, dbURL string, err error) error {
	var p *problem.Error
	if !errors.As(err, &p) { // not the service's refusal: nothing to explain
		return err
	}
	err = refused(cmd, err)
	if has, aerr := svc.AnyWorkspace(ctx); aerr != nil || has {
		return err
	}
	return emptyDatabase{err: err, db: shownDatabase(dbURL)}
}

// emptyDatabase is a refusal by a database without workspaces; it keeps the refusal's exit code.
type emptyDatabase struct {
	err error
	db  string
}

func (e emptyDatabase) Error() string {
	return fmt.Sprintf("%v\n(%s holds no workspace at all: is the server's database elsewhere? "+
		"Pass it with --database-url or DATABASE_URL.)", e.err, e.db)
}

func (e emptyDatabase) Unwrap() error { return e.err }

// shownDatabase is the database a command used, as it may be printed: a PostgreSQL URL without its password.
func shownDatabase(dbURL string) string {
	if dbURL == "" {
		dbURL = store.DefaultURL
	}
	if u, err := url.Parse(dbURL); err == nil && u.User != nil {
		return "the database " + u.Redacted()
	}
	return "the database " + dbURL
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList prints items as a JSON array (asJSON) or as a table with the given header and one row per item.
func printList[T, J any](w io.Writer, items []T, asJSON bool, toJSON func(T) J, header string, row func(T) []string) error {
	if asJSON {
		out := make([]J, len(items))
		for i, it := range items {
			out[i] = toJSON(it)
		}
		return printJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, strings.Join(row(it), "\t"))
	}
	return tw.Flush()
}

// workspaceJSON is the CLI's JSON form of a workspace.
type workspaceJSON struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	EnabledModels []string  `json:"enabled_models"`
	CreatedAt     time.Time `json:"created_at"`
}

func toWorkspaceJSON(w workspaces.Workspace) workspaceJSON {
	return workspaceJSON{ID: w.ID, Name: w.Name, EnabledModels: w.EnabledModels, CreatedAt: w.CreatedAt}
}

func workspaceCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("workspace: missing subcommand (create, list, models, add-member)")
	}
	sub, args := args[0], args[1:]
	cmd := "workspace " + sub
	fs := newFlagSet(cmd)
	dbURL := databaseFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	switch sub {
	case "create":
		name := fs.String("name", "", fmt.Sprintf("workspace name, 1 to %d characters (required)", workspaces.MaxNameLength))
		if err := parse(fs, args); err != nil {
			return err
		}
		if *name == "" {
			return usagef("%s: --name is required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := svc.CreateWorkspace(ctx, *name, "")
		if err != nil {
			return refused(cmd, err)
		}
		if *asJSON {
			return printJSON(stdout, toWorkspaceJSON(w))
		}
		fmt.Fprintf(stdout, "Created workspace %s (%s).\nNext: switchboard key create --workspace %s --name \"my key\" --scopes models:read\n", w.ID, w.Name, w.ID)
		return nil
	case "list":
		if err := parse(fs, args); err != nil {
			return err
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		ws, err := svc.Workspaces(ctx)
		if err != nil {
			return err
		}
		return printList(stdout, ws, *asJSON, toWorkspaceJSON, "ID\tNAME\tMODELS\tCREATED", func(w workspaces.Workspace) []string {
			models := "all"
			if w.EnabledModels != nil {
				models = strings.Join(w.EnabledModels, ",")
			}
			return []string{w.ID, w.Name, models, w.CreatedAt.Format(time.RFC3339)}
		})
	case "models":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		enable := fs.String("enable", "", "comma-separated model IDs the workspace may use")
		all := fs.Bool("all", false, "enable every model of the catalogue")
		modelsFile := fs.String("models-file", "",
			"model catalogue to check IDs against (env SWITCHBOARD_MODELS_FILE, default: the built-in list)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" || (*enable == "") == !*all {
			return usagef("%s: --workspace and exactly one of --enable or --all are required", cmd)
		}
		catalog, err := loadCatalog(*modelsFile)
		if err != nil {
			return err
		}
		var models []string // nil: every model
		if !*all {
			models = splitList(*enable)
			if models == nil {
				models = []string{}
			}
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, catalog)
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := svc.SetEnabledModels(ctx, *wsID, models)
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			return printJSON(stdout, toWorkspaceJSON(w))
		}
		if models == nil {
			fmt.Fprintf(stdout, "Workspace %s may use every model.\n", w.ID)
		} else {
			fmt.Fprintf(stdout, "Workspace %s may use: %s\n", w.ID, strings.Join(models, ", "))
		}
		return nil
	case "add-member":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		email := fs.String("email", "", "email of a user who signed up in the console (required)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" || *email == "" {
			return usagef("%s: --workspace and --email are required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		m, err := svc.AddMember(ctx, *wsID, *email)
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			return printJSON(stdout, map[string]string{"workspace_id": m.WorkspaceID, "user_id": m.UserID, "email": m.Email, "role": m.Role})
		}
		fmt.Fprintf(stdout, "%s is now an owner of workspace %s.\n", m.Email, m.WorkspaceID)
		return nil
	}
	return usagef("workspace: unknown subcommand %q (create, list, models, add-member)", sub)
}

// keyJSON is the CLI's JSON form of a key; Secret is set only by key create.
type keyJSON struct {
	ID          string     `json:"id"`
	Secret      string     `json:"secret,omitempty"`
	Name        string     `json:"name"`
	WorkspaceID string     `json:"workspace_id"`
	Masked      string     `json:"masked"`
	Scopes      []string   `json:"scopes"`
	Origins     []string   `json:"origins"`
	InstanceIDs []string   `json:"instance_ids"`
	Kind        string     `json:"kind"`
	Target      string     `json:"target,omitempty"`
	DailyQuota  int        `json:"daily_quota,omitempty"`
	Status      string     `json:"status"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
}

func toKeyJSON(k workspaces.Key) keyJSON {
	return keyJSON{
		ID: k.ID, Name: k.Name, WorkspaceID: k.WorkspaceID, Masked: apikey.Mask(k.DisplayPrefix, k.Last4),
		Scopes: k.Scopes, Origins: k.Origins, InstanceIDs: k.InstanceIDs, Kind: k.Kind, Target: k.ScopeTarget,
		DailyQuota: k.DailyQuota, Status: k.Status(time.Now()), CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, LastUsedAt: k.LastUsedAt,
	}
}

func keyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("key: missing subcommand (create, list, revoke, origins, instances)")
	}
	sub, args := args[0], args[1:]
	cmd := "key " + sub
	fs := newFlagSet(cmd)
	dbURL := databaseFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	switch sub {
	case "create":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		name := fs.String("name", "", fmt.Sprintf("key name, 1 to %d characters (required)", workspaces.MaxNameLength))
		scopes := fs.String("scopes", "", "comma-separated scopes (required): "+strings.Join(apikey.All(), ","))
		expiresIn := fs.Duration("expires-in", 0, "lifetime, e.g. 720h (default: never expires)")
		origins := fs.String("origins", "", "comma-separated origins whose pages may use the key, e.g. "+
			"https://www.example.com,https://*.example.com (default: none; the key works from servers)")
		kind := fs.String("kind", "secret", "secret (sb_sk_…, for servers) or browser (sb_pk_…, may be published in pages; "+
			"needs --origins and --browser-scope)")
		var browserScopes []string
		for _, b := range apikey.BrowserScopes {
			browserScopes = append(browserScopes, b.Name)
		}
		browserScope := fs.String("browser-scope", "", "a browser key's one job: "+strings.Join(browserScopes, ", "))
		target := fs.String("target", "", "what the browser scope aims at: the custom event type (events:publish), "+
			"the instance ID (messages:send), the link ID (links:read_stats)")
		instances := fs.String("instances", "", "comma-separated IDs of the instances a secret key is limited to "+
			"(default: none; the key reaches every instance of the workspace)")
		dailyQuota := fs.Int("daily-quota", 0, fmt.Sprintf("links a browser key may create in a day (links:create; default %d)",
			workspaces.DefaultDailyQuota))
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" || *name == "" {
			return usagef("%s: --workspace and --name are required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		k, secret, err := svc.CreateKey(ctx, workspaces.NewKey{WorkspaceID: *wsID, Name: *name,
			Scopes: strings.Split(*scopes, ","), ExpiresIn: *expiresIn, CreatedBy: workspaces.CreatedByCLI,
			Origins: splitList(*origins), Kind: *kind, BrowserScope: *browserScope, Target: *target, DailyQuota: *dailyQuota,
			Instances: splitList(*instances)})
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			out := toKeyJSON(k)
			out.Secret = secret
			return printJSON(stdout, out)
		}
		expires := "never"
		if k.ExpiresAt != nil {
			expires = k.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "Created API key %s (%q) in workspace %s.\nScopes:  %s\nOrigins: %s\nInstances: %s\nExpires: %s\n\n    %s\n\n"+
			"Copy the key now: it is stored only as a hash and will not be shown again.\n",
			k.ID, k.Name, k.WorkspaceID, strings.Join(k.Scopes, " "), originsText(k.Origins), instancesText(k.InstanceIDs), expires, secret)
		if k.Kind == apikey.KindBrowser {
			fmt.Fprintf(stdout, "This browser key may be published in the pages of its origins; it works nowhere else "+
				"(docs/use-from-your-site.md).\n")
		} else {
			fmt.Fprintf(stdout, "Try it:  curl -H \"Authorization: Bearer %s\" http://localhost:8080/api/v1/models\n", secret)
		}
		return nil
	case "list":
		wsID := fs.String("workspace", "", "workspace ID (required)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *wsID == "" {
			return usagef("%s: --workspace is required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		keys, err := svc.Keys(ctx, *wsID)
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		return printList(stdout, keys, *asJSON, toKeyJSON, "ID\tNAME\tKEY\tSCOPES\tSTATUS\tLAST USED", func(k workspaces.Key) []string {
			last := "never"
			if k.LastUsedAt != nil {
				last = k.LastUsedAt.Format(time.RFC3339)
			}
			return []string{k.ID, k.Name, apikey.Mask(k.DisplayPrefix, k.Last4), strings.Join(k.Scopes, ","),
				k.Status(time.Now()), last}
		})
	case "revoke":
		id, err := keyIDAndFlags(fs, cmd, args)
		if err != nil {
			return err
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		k, err := svc.RevokeKey(ctx, id)
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			return printJSON(stdout, toKeyJSON(k))
		}
		fmt.Fprintf(stdout, "Revoked API key %s (%q) at %s. Requests with it now answer 401 api_key_revoked.\n",
			k.ID, k.Name, k.RevokedAt.Format(time.RFC3339))
		return nil
	case "origins":
		origins := fs.String("origins", "", "the key's origins from now on, comma-separated (required; \"\" removes them "+
			"from a secret key; a browser key keeps at least one)")
		id, err := keyIDAndFlags(fs, cmd, args)
		if err != nil {
			return err
		}
		if !flagSet(fs, "origins") {
			return usagef("%s: --origins is required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		k, err := svc.SetKeyOrigins(ctx, "", id, splitList(*origins))
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			return printJSON(stdout, toKeyJSON(k))
		}
		fmt.Fprintf(stdout, "API key %s (%q) now answers these origins: %s\n", k.ID, k.Name, originsText(k.Origins))
		return nil
	case "instances":
		instances := fs.String("instances", "", "the instances the key is limited to from now on, comma-separated "+
			"(required; \"\" lifts the limit: every instance of the workspace)")
		id, err := keyIDAndFlags(fs, cmd, args)
		if err != nil {
			return err
		}
		if !flagSet(fs, "instances") {
			return usagef("%s: --instances is required", cmd)
		}
		svc, db, err := openWorkspaces(ctx, *dbURL, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		k, err := svc.SetKeyInstances(ctx, "", id, splitList(*instances))
		if err != nil {
			return refusedIn(ctx, cmd, svc, *dbURL, err)
		}
		if *asJSON {
			return printJSON(stdout, toKeyJSON(k))
		}
		fmt.Fprintf(stdout, "API key %s (%q) now reaches these instances: %s\n", k.ID, k.Name, instancesText(k.InstanceIDs))
		return nil
	}
	return usagef("key: unknown subcommand %q (create, list, revoke, origins, instances)", sub)
}

// keyIDAndFlags parses the arguments of a command on one key: its ID, before or after the flags.
func keyIDAndFlags(fs *flag.FlagSet, cmd string, args []string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return "", err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	if id == "" {
		return "", usagef("%s: KEY_ID is required", cmd)
	}
	return id, nil
}

// originsText shows a key's origins.
func originsText(origins []string) string {
	if len(origins) == 0 {
		return "none (servers, and pages of the operator's --cors-origins)"
	}
	return strings.Join(origins, " ")
}

// instancesText shows the instances a key is limited to.
func instancesText(ids []string) string {
	if len(ids) == 0 {
		return "all (the key is not limited to instances)"
	}
	return strings.Join(ids, " ")
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
