// Package llm connects Switchboard to the operator's OpenAI-compatible model servers ("upstreams"): it lists the
// models they serve, passes chat completions through to them under each workspace's limits, and is what bots call
// to draft their replies.
package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Upstream is one OpenAI-compatible server the operator configured.
type Upstream struct {
	// Name identifies the upstream in the models list (Model.upstream) and in logs.
	Name string `json:"name" yaml:"name"`
	// BaseURL is the URL the OpenAI paths are appended to, such as https://api.openai.com/v1 or
	// http://ollama:11434/v1.
	BaseURL string `json:"base_url" yaml:"base_url"`
	// APIKey is sent as a Bearer token; empty sends none (local servers often take any).
	APIKey string `json:"api_key" yaml:"api_key"`
	// Models, when set, narrows what the upstream lists to these IDs (an upstream such as OpenAI serves far more
	// models than an operator wants to offer).
	Models []string `json:"models,omitempty" yaml:"models"`
	// id is the store ID of a workspace's upstream ("" for the operator's).
	id string
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ParseUpstreams reads the operator's upstreams from value: a JSON list, or the path of a JSON or YAML file holding
// one (a list, or {"upstreams": [...]}). A value that starts with "[" or "{" is JSON, anything else a path, so a key
// need not sit in the environment. Empty means none.
func ParseUpstreams(value string) ([]Upstream, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	src, what := []byte(value), "SWITCHBOARD_MODEL_UPSTREAMS"
	if value[0] != '[' && value[0] != '{' {
		b, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("model upstreams: %w", err)
		}
		src, what = b, value
	}
	ups, err := decodeUpstreams(src)
	if err != nil {
		return nil, fmt.Errorf("model upstreams %s: %w", what, err)
	}
	if err := validate(ups); err != nil {
		return nil, fmt.Errorf("model upstreams %s: %w", what, err)
	}
	return ups, nil
}

// decodeUpstreams decodes a list or {"upstreams": list}, refusing unknown fields (a misspelt "api_key" would
// otherwise be dropped silently). JSON is YAML, so one decoder reads both.
func decodeUpstreams(src []byte) ([]Upstream, error) {
	var list []Upstream
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&list); err == nil {
		return list, nil
	}
	var wrapped struct {
		Upstreams []Upstream `yaml:"upstreams"`
	}
	dec = yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&wrapped); err != nil {
		return nil, fmt.Errorf("expected a list of {name, base_url, api_key, models}: %w", err)
	}
	return wrapped.Upstreams, nil
}

func validate(ups []Upstream) error {
	seen := map[string]bool{}
	for i, u := range ups {
		if !namePattern.MatchString(u.Name) {
			return fmt.Errorf("upstream %d: name %q must match %s", i+1, u.Name, namePattern)
		}
		if seen[u.Name] {
			return fmt.Errorf("upstream %q is listed twice", u.Name)
		}
		seen[u.Name] = true
		b, err := url.Parse(u.BaseURL)
		if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" || b.User != nil {
			return fmt.Errorf("upstream %q: base_url must be an http or https URL without credentials", u.Name)
		}
		ups[i].BaseURL = strings.TrimSuffix(u.BaseURL, "/")
	}
	return nil
}

// String names the upstream without its key, for logs.
func (u Upstream) String() string { return u.Name + " (" + u.BaseURL + ")" }

// MarshalJSON leaves the key out, so that an upstream logged or dumped by accident does not leak it.
func (u Upstream) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name    string   `json:"name"`
		BaseURL string   `json:"base_url"`
		Models  []string `json:"models,omitempty"`
	}{u.Name, u.BaseURL, u.Models})
}
