package modelcatalog_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/modelcatalog"
)

func ids(ms []modelcatalog.Model) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestDefaultIsValidAndNonEmpty(t *testing.T) {
	c := modelcatalog.Default()
	all := c.All()
	if len(all) == 0 {
		t.Fatal("Default() has no models")
	}
	// Default panics on an invalid list; rebuilding it through New states the same thing as an error.
	if _, err := modelcatalog.New(all); err != nil {
		t.Fatalf("the default list does not pass New: %v", err)
	}
	for _, m := range all {
		if !c.Has(m.ID) {
			t.Errorf("Has(%q) = false for a default model", m.ID)
		}
		if m.Created <= 0 || m.DisplayName == "" || m.Description == "" || len(m.Capabilities) == 0 || m.ContextWindow <= 0 {
			t.Errorf("default model %q is incomplete: %+v", m.ID, m)
		}
	}
}

func TestLoad(t *testing.T) {
	want := []modelcatalog.Model{
		{ID: "local-llama3.1:8b", OwnedBy: "ops", Created: 1700000000, DisplayName: "Local Llama",
			Description: "On our own GPUs.", Capabilities: []string{"chat", "tools"}, ContextWindow: 8192},
		{ID: "embed-1", OwnedBy: "ops", Capabilities: []string{"embeddings"}},
	}
	files := []struct {
		name, body string
	}{
		{"models.yaml", `
models:
  - id: local-llama3.1:8b
    owned_by: ops
    created: 1700000000
    display_name: Local Llama
    description: On our own GPUs.
    capabilities: [chat, tools]
    context_window: 8192
  - id: embed-1
    owned_by: ops
    capabilities: [embeddings]
`},
		{"models.json", `{"models": [
  {"id": "local-llama3.1:8b", "owned_by": "ops", "created": 1700000000, "display_name": "Local Llama",
   "description": "On our own GPUs.", "capabilities": ["chat", "tools"], "context_window": 8192},
  {"id": "embed-1", "owned_by": "ops", "capabilities": ["embeddings"]}
]}`},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), f.name)
			if err := os.WriteFile(path, []byte(f.body), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := modelcatalog.Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := c.All(); !reflect.DeepEqual(got, want) {
				t.Errorf("Load = %+v, want %+v", got, want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, body string
		mention    string // the error helps the operator find the mistake
	}{
		{"unknown top-level field", "model:\n  - id: a\n    owned_by: x\n", "model"},
		{"unknown model field", "models:\n  - id: a\n    owned_by: x\n    owner: y\n", "owner"},
		{"misspelt field in JSON", `{"models": [{"id": "a", "owned_by": "x", "context": 5}]}`, "context"},
		{"not YAML", "models: [\n", "models.yaml"},
		{"wrong type", "models:\n  - id: a\n    owned_by: x\n    created: yesterday\n", "yesterday"},
		{"invalid model", "models:\n  - id: a\n", "owned_by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "models.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := modelcatalog.Load(path)
			if err == nil {
				t.Fatalf("Load accepted %q: %v", tt.body, ids(c.All()))
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("Load error %q does not mention %q", err, tt.mention)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, err := modelcatalog.Load(filepath.Join(t.TempDir(), "nope.yaml")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load of a missing file = %v, want a not-exist error", err)
		}
	})
}

func TestNewErrors(t *testing.T) {
	ok := modelcatalog.Model{ID: "ok", OwnedBy: "x"}
	tests := []struct {
		name    string
		models  []modelcatalog.Model
		mention string
	}{
		{"empty id", []modelcatalog.Model{{OwnedBy: "x"}}, "id"},
		{"id with a slash", []modelcatalog.Model{{ID: "a/b", OwnedBy: "x"}}, `"a/b"`},
		{"id with a space", []modelcatalog.Model{{ID: "a b", OwnedBy: "x"}}, `"a b"`},
		{"id starting with a dot", []modelcatalog.Model{{ID: ".hidden", OwnedBy: "x"}}, `".hidden"`},
		{"id starting with a hyphen", []modelcatalog.Model{{ID: "-x", OwnedBy: "x"}}, `"-x"`},
		{"id of 129 characters", []modelcatalog.Model{{ID: strings.Repeat("a", 129), OwnedBy: "x"}}, "must match"},
		{"non-ASCII id", []modelcatalog.Model{{ID: "modèle", OwnedBy: "x"}}, `"modèle"`},
		{"duplicate id", []modelcatalog.Model{ok, {ID: "other", OwnedBy: "x"}, ok}, "listed twice"},
		{"missing owned_by", []modelcatalog.Model{{ID: "a"}}, "owned_by"},
		{"owned_by too long", []modelcatalog.Model{{ID: "a", OwnedBy: strings.Repeat("x", 129)}}, "owned_by"},
		{"unknown capability", []modelcatalog.Model{{ID: "a", OwnedBy: "x", Capabilities: []string{"chat", "telepathy"}}}, `"telepathy"`},
		{"capability in the wrong case", []modelcatalog.Model{{ID: "a", OwnedBy: "x", Capabilities: []string{"Chat"}}}, `"Chat"`},
		{"negative created", []modelcatalog.Model{{ID: "a", OwnedBy: "x", Created: -1}}, "created"},
		{"negative context window", []modelcatalog.Model{{ID: "a", OwnedBy: "x", ContextWindow: -1}}, "context_window"},
		{"display name too long", []modelcatalog.Model{{ID: "a", OwnedBy: "x", DisplayName: strings.Repeat("x", 257)}}, "display_name"},
		{"description too long", []modelcatalog.Model{{ID: "a", OwnedBy: "x", Description: strings.Repeat("x", 2049)}}, "description"},
		{"invalid model after valid ones", []modelcatalog.Model{ok, {ID: "b"}}, `"b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := modelcatalog.New(tt.models)
			if err == nil {
				t.Fatalf("New accepted %+v", tt.models)
			}
			if c != nil {
				t.Errorf("New returned a catalogue with its error")
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("New error %q does not mention %s", err, tt.mention)
			}
		})
	}
}

func TestNewAccepts(t *testing.T) {
	tests := []struct {
		name  string
		model modelcatalog.Model
	}{
		{"minimal", modelcatalog.Model{ID: "a", OwnedBy: "x"}},
		{"every id character", modelcatalog.Model{ID: "Az09._:-", OwnedBy: "x"}},
		{"id of 128 characters", modelcatalog.Model{ID: strings.Repeat("a", 128), OwnedBy: "x"}},
		{"every capability", modelcatalog.Model{ID: "a", OwnedBy: "x", Capabilities: modelcatalog.Capabilities}},
		{"limits reached", modelcatalog.Model{ID: "a", OwnedBy: strings.Repeat("x", 128),
			DisplayName: strings.Repeat("x", 256), Description: strings.Repeat("x", 2048)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := modelcatalog.New([]modelcatalog.Model{tt.model})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if !c.Has(tt.model.ID) {
				t.Errorf("Has(%q) = false", tt.model.ID)
			}
		})
	}
}

func testCatalog(t *testing.T) *modelcatalog.Catalog {
	t.Helper()
	c, err := modelcatalog.New([]modelcatalog.Model{
		{ID: "c", OwnedBy: "x"}, {ID: "a", OwnedBy: "x"}, {ID: "b", OwnedBy: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestForWorkspace(t *testing.T) {
	tests := []struct {
		name    string
		enabled []string
		want    []string
	}{
		{"nil enables every model", nil, []string{"c", "a", "b"}},
		{"empty list enables none", []string{}, []string{}},
		{"catalogue order, not list order", []string{"b", "c"}, []string{"c", "b"}},
		{"unknown IDs ignored", []string{"gone", "a", "also-gone"}, []string{"a"}},
		{"only unknown IDs", []string{"gone"}, []string{}},
		{"duplicates listed once", []string{"a", "a"}, []string{"a"}},
	}
	c := testCatalog(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(c.ForWorkspace(tt.enabled)); !slices.Equal(got, tt.want) {
				t.Errorf("ForWorkspace(%q) = %q, want %q", tt.enabled, got, tt.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		enabled []string
		found   bool
	}{
		{"every model enabled", "a", nil, true},
		{"enabled", "a", []string{"a", "b"}, true},
		{"not enabled", "c", []string{"a", "b"}, false},
		{"none enabled", "a", []string{}, false},
		{"not in the catalogue", "zzz", nil, false},
		{"enabled but not in the catalogue", "zzz", []string{"zzz"}, false},
		{"IDs are case-sensitive", "A", nil, false},
	}
	c := testCatalog(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, found := c.Get(tt.id, tt.enabled)
			if found != tt.found {
				t.Fatalf("Get(%q, %q) found = %v, want %v", tt.id, tt.enabled, found, tt.found)
			}
			if found && m.ID != tt.id {
				t.Errorf("Get(%q) = %+v", tt.id, m)
			}
			if !found && !reflect.DeepEqual(m, modelcatalog.Model{}) {
				t.Errorf("Get(%q) returned %+v with found = false, want the zero Model", tt.id, m)
			}
		})
	}
}

// The catalogue is documented as immutable: what a caller does with a returned list must not change it.
func TestCatalogIsImmutable(t *testing.T) {
	c := testCatalog(t)
	c.All()[0].ID = "changed"
	c.ForWorkspace(nil)[1].OwnedBy = "changed"
	if got := ids(c.All()); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Errorf("after a caller edited All(), the catalogue lists %q", got)
	}
	if m, _ := c.Get("a", nil); m.OwnedBy != "x" {
		t.Errorf("after a caller edited ForWorkspace(nil), Get(a) = %+v", m)
	}
}
