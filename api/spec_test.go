package api_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/api"
)

// TestGeneratedCodeIsCurrent regenerates every target of the code generator into a temporary directory with the
// pinned tool and compares it with what is committed: the server's gen/ and the Go SDK's client are never edited by
// hand and never stale. (The TypeScript SDK's drift is checked by make check-generated, which needs npm.)
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the code generator")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	output := regexp.MustCompile(`(?m)^output:\s*(\S+)\s*$`)
	for _, config := range []string{"oapi-codegen.yaml", "sdk/go/oapi-codegen.yaml"} {
		t.Run(filepath.Dir(config), func(t *testing.T) {
			cfg, err := os.ReadFile(filepath.Join(root, config))
			if err != nil {
				t.Fatal(err)
			}
			m := output.FindSubmatch(cfg)
			if m == nil {
				t.Fatalf("%s has no output: line", config)
			}
			committed := filepath.Join(root, string(m[1]))
			fresh := filepath.Join(t.TempDir(), "generated.go")
			tmpCfg := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(tmpCfg, output.ReplaceAll(cfg, []byte("output: "+fresh)), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "tool", "oapi-codegen", "-config", tmpCfg, "api/openapi.yaml")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("oapi-codegen: %v\n%s", err, out)
			}
			want, err := os.ReadFile(fresh)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(committed)
			if err != nil {
				t.Fatalf("%s is missing: run make generate", m[1])
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is stale or was edited by hand: run `make generate` and commit the result", m[1])
			}
		})
	}
}

// TestSpecIsValid loads the served spec with kin-openapi and validates it, examples included.
func TestSpecIsValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %s, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(t.Context(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatal(err)
	}
}

// TestRequiredParametersHaveExamples checks that every required parameter of every operation has an example of its
// own: contract testers (Dredd) and mock servers (Prism) build requests from them and refuse a spec where one is
// missing, and the interactive reference fills them in for "Try it out".
func TestRequiredParametersHaveExamples(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range append(append(openapi3.Parameters{}, item.Parameters...), op.Parameters...) {
				if p.Value.Required && p.Value.Example == nil && len(p.Value.Examples) == 0 {
					t.Errorf("%s %s (%s): required %s parameter %q has no example", method, path, op.OperationID,
						p.Value.In, p.Value.Name)
				}
			}
		}
	}
}
