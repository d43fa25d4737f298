// Package modelcatalog is the operator's catalogue of AI models that workspaces can use in automations and channel
// replies. It is configuration, not data: a built-in default list, or a YAML or JSON file (SWITCHBOARD_MODELS_FILE).
package modelcatalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Model is one entry of the catalogue.
type Model struct {
	ID            string   `yaml:"id"`
	OwnedBy       string   `yaml:"owned_by"`
	Created       int64    `yaml:"created"`
	DisplayName   string   `yaml:"display_name"`
	Description   string   `yaml:"description"`
	Capabilities  []string `yaml:"capabilities"`
	ContextWindow int64    `yaml:"context_window"`
}

// Catalog is an immutable, validated list of models in display order.
type Catalog struct {
	models []Model
	byID   map[string]int
}

// Capabilities lists the capability names a model may declare (the enum of the API's Model.capabilities).
var Capabilities = []string{"chat", "tools", "vision", "embeddings", "audio", "moderation"}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// New validates models and builds a catalogue: IDs must be unique and URL-path safe, owned_by set, capabilities known.
func New(models []Model) (*Catalog, error) {
	c := &Catalog{byID: map[string]int{}}
	for i, m := range models {
		switch {
		case !idPattern.MatchString(m.ID):
			return nil, fmt.Errorf("model %d: id %q must match %s", i+1, m.ID, idPattern)
		case m.OwnedBy == "" || len(m.OwnedBy) > 128:
			return nil, fmt.Errorf("model %q: owned_by must be 1 to 128 characters", m.ID)
		case m.Created < 0:
			return nil, fmt.Errorf("model %q: created must be Unix seconds", m.ID)
		case len(m.DisplayName) > 256 || len(m.Description) > 2048:
			return nil, fmt.Errorf("model %q: display_name is limited to 256 and description to 2048 characters", m.ID)
		case m.ContextWindow < 0:
			return nil, fmt.Errorf("model %q: context_window must not be negative", m.ID)
		}
		if _, dup := c.byID[m.ID]; dup {
			return nil, fmt.Errorf("model %q is listed twice", m.ID)
		}
		for _, cap := range m.Capabilities {
			if !slices.Contains(Capabilities, cap) {
				return nil, fmt.Errorf("model %q: unknown capability %q (known: %v)", m.ID, cap, Capabilities)
			}
		}
		c.byID[m.ID] = len(c.models)
		c.models = append(c.models, m)
	}
	return c, nil
}

// Load reads a catalogue file: YAML or JSON (JSON is YAML), `{"models": [{"id": …, "owned_by": …}, …]}`.
func Load(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("models file: %w", err)
	}
	var f struct {
		Models []Model `yaml:"models"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("models file %s: %w", path, err)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("models file %s lists no models (expected \"models: [{id: …, owned_by: …}]\")", path)
	}
	c, err := New(f.Models)
	if err != nil {
		return nil, fmt.Errorf("models file %s: %w", path, err)
	}
	return c, nil
}

// Default is the built-in catalogue, used when no file is configured.
func Default() *Catalog {
	c, err := New(defaultModels)
	if err != nil {
		panic(err) // the built-in list is covered by tests
	}
	return c
}

var defaultModels = []Model{
	{ID: "gpt-4o-mini", OwnedBy: "openai", Created: 1721172741, DisplayName: "GPT-4o mini",
		Description:  "Fast, low-cost general model for replies and classification.",
		Capabilities: []string{"chat", "tools", "vision"}, ContextWindow: 128000},
	{ID: "gpt-4o", OwnedBy: "openai", Created: 1715367049, DisplayName: "GPT-4o",
		Description:  "Higher-quality replies, summaries and extraction from images.",
		Capabilities: []string{"chat", "tools", "vision"}, ContextWindow: 128000},
	{ID: "claude-3-5-haiku-latest", OwnedBy: "anthropic", Created: 1729555200, DisplayName: "Claude 3.5 Haiku",
		Description:  "Quick, careful drafting of customer replies.",
		Capabilities: []string{"chat", "tools"}, ContextWindow: 200000},
	{ID: "llama-3.1-8b-instant", OwnedBy: "meta", Created: 1721692800, DisplayName: "Llama 3.1 8B",
		Description:  "Open-weight model for self-hosted routing and classification.",
		Capabilities: []string{"chat"}, ContextWindow: 131072},
	{ID: "text-embedding-3-small", OwnedBy: "openai", Created: 1705948997, DisplayName: "Text Embedding 3 small",
		Description:  "Embeddings for search and de-duplication of messages.",
		Capabilities: []string{"embeddings"}, ContextWindow: 8191},
	{ID: "omni-moderation-latest", OwnedBy: "openai", Created: 1732734466, DisplayName: "Omni moderation",
		Description:  "Screens inbound messages and link destinations for abuse.",
		Capabilities: []string{"moderation"}, ContextWindow: 32768},
}

// All returns every model in display order.
func (c *Catalog) All() []Model { return slices.Clone(c.models) }

// Has reports whether the catalogue lists id.
func (c *Catalog) Has(id string) bool { _, ok := c.byID[id]; return ok }

// ForWorkspace returns the models enabled for a workspace: every model when enabled is nil, else those listed
// (IDs no longer in the catalogue are ignored), in catalogue order.
func (c *Catalog) ForWorkspace(enabled []string) []Model {
	if enabled == nil {
		return slices.Clone(c.models)
	}
	out := make([]Model, 0, len(enabled))
	for _, m := range c.models {
		if slices.Contains(enabled, m.ID) {
			out = append(out, m)
		}
	}
	return out
}

// Get returns a model enabled for a workspace (see ForWorkspace).
func (c *Catalog) Get(id string, enabled []string) (Model, bool) {
	i, ok := c.byID[id]
	if !ok || (enabled != nil && !slices.Contains(enabled, id)) {
		return Model{}, false
	}
	return c.models[i], true
}
