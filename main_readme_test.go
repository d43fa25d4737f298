package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store/storetest"
)

// TestREADMECommandsRun runs every command of the README's fenced sh blocks, in order, against a fresh server on
// SQLite, as a newcomer would type them: each placeholder ("sb_sk_…", "ins_…", "+9995…") becomes the value an
// earlier answer gave — the comment under a command says which field of its answer fills it —, localhost:8080 the
// test's server, and the webhook receiver of the tour the test's own. A command fails the test when it exits
// non-zero, when it answers a problem document its comment does not announce, or when its answer lacks the shape
// its comment shows (every "field", every "field":"literal"); a command whose comment shows a state not reached
// yet ("status":"connected") is repeated for up to 10 s, as a reader would. Commands that cannot run inside a test
// are listed in readmeSkipped with the reason.
func TestREADMECommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { delivered.Add(1) }))
	defer receiver.Close()
	dbURL := storetest.SQLiteURL(t)
	srv := runServer(t, dbURL, "", "SWITCHBOARD_WEBHOOK_ALLOW_HTTP=true", "SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8")
	r := &readmeRun{t: t, dbURL: dbURL, base: srv.url, receiver: receiver.URL + "/switchboard", bound: map[string]string{},
		vars: map[string]string{}}

	ran := 0
	for _, block := range shBlocks(string(raw)) {
		if r.revoked { // the README asks for a new key with the scopes of the next tours
			r.newKey()
		}
		for _, c := range block {
			if reason, skip := readmeSkipped(c.text); skip {
				t.Logf("skipped %q: %s", firstLine(c.text), reason)
				continue
			}
			r.run(c)
			ran++
		}
	}
	if ran < 25 {
		t.Errorf("only %d commands of the README ran", ran)
	}
	if delivered.Load() == 0 {
		t.Error("the tour's webhook receiver got no delivery")
	}
}

// readmeSkipped names the commands of the README a test cannot run, and why.
func readmeSkipped(cmd string) (string, bool) {
	switch {
	case strings.HasPrefix(cmd, "make run"), strings.HasPrefix(cmd, "make test"):
		return "this test is part of make test; make run is the server it started", true
	case strings.HasPrefix(cmd, "go build"):
		return "the test binary's TestMain built the binary it runs as bin/switchboard", true
	}
	return "", false
}

// shCommand is one command of a block (continuation lines and multi-line quotes joined) with the comment lines
// that follow it and its own trailing comment: what its answer looks like.
type shCommand struct {
	text, expect string
}

// shBlocks splits the README's ```sh blocks into commands: a line ending in \ or inside an open quote goes on, a
// # outside quotes after a blank starts a comment, comment lines belong to the command before them.
func shBlocks(md string) [][]shCommand {
	var blocks [][]shCommand
	var block []shCommand
	in := false
	var pending, comment strings.Builder
	var quote rune
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && line == "```sh":
			in, block = true, nil
			continue
		case in && line == "```":
			in = false
			blocks = append(blocks, block)
			continue
		case !in:
			continue
		}
		trimmed := strings.TrimSpace(line)
		if pending.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			if len(block) > 0 && trimmed != "" {
				block[len(block)-1].expect += " " + trimmed
			}
			continue
		}
		code := line
		for i, c := range line {
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '#' && (i == 0 || line[i-1] == ' '):
				code = line[:i]
				comment.WriteString(line[i:])
			}
			if len(code) < len(line) {
				break
			}
		}
		code = strings.TrimRight(code, " ")
		switch {
		case quote == 0 && strings.HasSuffix(code, "\\"):
			pending.WriteString(strings.TrimSuffix(code, "\\") + " ")
			continue
		case quote != 0:
			pending.WriteString(code + "\n")
			continue
		}
		pending.WriteString(code)
		block = append(block, shCommand{text: strings.TrimSpace(pending.String()), expect: comment.String()})
		pending.Reset()
		comment.Reset()
	}
	return blocks
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// readmeRun is the state of a run of the README: the placeholders bound so far and the shell variables set.
type readmeRun struct {
	t                     *testing.T
	dbURL, base, receiver string
	bound                 map[string]string // "sb_sk_…" → the secret
	vars                  map[string]string // K, J, SB, AUTH
	outputs               []string
	revoked               bool
}

var (
	placeholder = regexp.MustCompile(`\+?[A-Za-z0-9_]*…`)
	assignment  = regexp.MustCompile(`^([A-Z]+)=("[^"]*"|\S+)$`)
	expectPair  = regexp.MustCompile(`"([a-z_]+)": ?"([^"\\]*)"`)
	expectKey   = regexp.MustCompile(`"([a-z_]+)":`)
	idempotency = regexp.MustCompile(`Idempotency-Key: ([^'"]*)…`)
	anyDate     = regexp.MustCompile(`20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	problemCode = regexp.MustCompile(`"code":"([a-z_]+)"`)
)

// substitute makes a README command runnable here.
func (r *readmeRun) substitute(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "https://hooks.example.com/switchboard", r.receiver)
	cmd = strings.ReplaceAll(cmd, "http://localhost:8080", r.base)
	cmd = strings.ReplaceAll(cmd, "localhost:8080", strings.TrimPrefix(r.base, "http://"))
	cmd = strings.ReplaceAll(cmd, "bin/switchboard ", binary+" ")
	cmd = idempotency.ReplaceAllString(cmd, fmt.Sprintf("Idempotency-Key: ${1}%d", time.Now().UnixNano()))
	// A recovery "since" a week ago: now, less an hour, so that the tour never falls out of the retention period.
	cmd = anyDate.ReplaceAllString(cmd, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if rest, ok := strings.CutPrefix(cmd, "open "); ok { // a browser: the page must answer
		cmd = "curl -sf " + rest
	}
	return placeholder.ReplaceAllStringFunc(cmd, func(p string) string {
		if v, ok := r.bound[p]; ok {
			return v
		}
		// Not bound by a comment: the newest ID of that prefix an answer showed ("evt_…", "lnk_…").
		prefix := strings.TrimSuffix(p, "…")
		ids := regexp.MustCompile(`"(?:[a-z_]+_)?id": ?"(` + regexp.QuoteMeta(prefix) + `[0-9A-Z]{26})"`)
		for i := len(r.outputs) - 1; i >= 0; i-- {
			if m := ids.FindAllStringSubmatch(r.outputs[i], -1); m != nil {
				return m[0][1]
			}
		}
		r.t.Fatalf("%q: nothing earlier gave %s", firstLine(cmd), p)
		return p
	})
}

// run runs one command (again, for up to 10 s, while its answer lacks the state its comment shows), checks its
// answer and binds the placeholders its comment names.
func (r *readmeRun) run(c shCommand) {
	t := r.t
	cmd := r.substitute(c.text)
	if vars := r.assignments(cmd); vars {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := r.shell(cmd)
		if err != nil {
			t.Fatalf("%s\nexited with %v:\n%s", c.text, err, out)
		}
		missing := r.lacks(strings.ReplaceAll(c.expect, "localhost:8080", strings.TrimPrefix(r.base, "http://")), out)
		if missing == "" {
			r.outputs = append(r.outputs, out)
			r.bind(c.expect, out)
			if strings.Contains(c.text, "key revoke") {
				r.revoked = true
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s\nanswered without %s (its comment: %s):\n%s", c.text, missing, c.expect, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assignments takes NAME=value commands (several, with ;) into the run's variables.
func (r *readmeRun) assignments(cmd string) bool {
	var found bool
	for part := range strings.SplitSeq(cmd, ";") {
		m := assignment.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return false
		}
		r.vars[m[1]] = strings.Trim(m[2], `"`)
		found = true
	}
	return found
}

func (r *readmeRun) shell(cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+cmd)
	sh.Env = append(os.Environ(), "DATABASE_URL="+r.dbURL)
	for k, v := range r.vars {
		sh.Env = append(sh.Env, k+"="+v)
	}
	out, err := sh.CombinedOutput()
	return string(out), err
}

// lacks says what of its comment's shape an answer lacks ("" when nothing): a problem document only where the
// comment shows its code, every "field" and every literal "field":"value" of the comment.
func (r *readmeRun) lacks(expect, out string) string {
	if m := problemCode.FindStringSubmatch(out); m != nil && strings.Contains(out, `"type":"/problems/`) &&
		!strings.Contains(expect, `"code":"`+m[1]+`"`) {
		return "success (it is the problem " + m[1] + ")"
	}
	for _, m := range expectPair.FindAllStringSubmatch(expect, -1) {
		key, value := m[1], m[2]
		if key == "detail" || key == "title" {
			continue
		}
		if p, ok := strings.CutSuffix(value, "…"); ok {
			if i := strings.LastIndex(p, "_"); i >= 0 {
				p = p[:i+1] // "ins_b…" is an ins_ ID: the letters after the type's prefix only tell placeholders apart
			}
			if !regexp.MustCompile(`"` + key + `": ?"` + regexp.QuoteMeta(p)).MatchString(out) {
				return fmt.Sprintf("%q starting %q", key, p)
			}
			continue
		}
		if !regexp.MustCompile(`"` + key + `": ?"` + regexp.QuoteMeta(value) + `"`).MatchString(out) {
			return fmt.Sprintf("%q: %q", key, value)
		}
	}
	for _, m := range expectKey.FindAllStringSubmatch(expect, -1) {
		if !strings.Contains(out, `"`+m[1]+`"`) {
			return fmt.Sprintf("the field %q", m[1])
		}
	}
	if status, ok := strings.CutPrefix(strings.TrimSpace(expect), "# "); ok && len(status) > 3 && status[3] == ' ' &&
		strings.HasPrefix(out, "HTTP/") && !strings.Contains(firstLine(out), status[:3]) {
		return "status " + status[:3]
	}
	return ""
}

// bind gives each placeholder of the comment ("field":"ins_b…") the value of that field in the answer.
func (r *readmeRun) bind(expect, out string) {
	for _, m := range expectPair.FindAllStringSubmatch(expect, -1) {
		key, value := m[1], m[2]
		if !strings.HasSuffix(value, "…") {
			continue
		}
		if got := regexp.MustCompile(`"` + key + `": ?"([^"]*)"`).FindStringSubmatch(out); got != nil {
			r.bound[value] = got[1]
		}
	}
}

// newKey makes a key with every scope of the tours in the README's workspace, as the README tells a reader who
// revoked the first one.
func (r *readmeRun) newKey() {
	r.t.Helper()
	out, stderr, code := cli(r.t, r.dbURL, "key", "create", "--workspace", r.bound["ws_01…"], "--name", "tours", "--scopes",
		"links:read,links:write,webhooks:read,webhooks:write,automation:read,automation:write,messaging:read,messaging:write", "--json")
	if code != 0 {
		r.t.Fatalf("key create: %s", stderr)
	}
	r.bind(`"secret": "sb_sk_…"`, out)
	r.revoked = false
}

// docsRunBy names, for each command of the sh blocks in docs/ (found by a part of its text), the test or make
// target that runs it (the README's
// run here needs a fresh server of its own; these need PostgreSQL moves, a built image or a collector). A command
// added to docs/ without an entry fails TestDocsCommandsAreRun: say which test proves it, or write one.
var docsRunBy = []struct{ prefix, by string }{
	{"switchboard migrate-data", "TestMigrateDataToPostgres (a deployment copied to PostgreSQL, then served from it)"},
	{`SWITCHBOARD_SECRET_KEY="$(cat data/secret.key)" DATABASE_URL=postgres://`, "TestMigrateDataToPostgres (serves the copy with the same key)"},
	{"curl -N -H \"Authorization: Bearer $SB_KEY\" \"http://localhost:8080/api/v1/events/stream", "handlers' TestEventStream (the stream read as curl -N shows it: retry, id, event, data)"},
	{`-d '{"type":"rabbitmq"`, "internal/webhook's TestRabbitMQDestination (an endpoint of that type delivering into the machine's RabbitMQ, publisher confirms)"},
	{"make image", "make test-image, part of make ci"},
	{"podman run", "make test-image: starts the image's binary from the image's file system (containers cannot be run on the build machines)"},
	{"switchboard serve --otlp-endpoint", "TestTracesReachAnOTLPCollector"},
	{`switchboard key create --workspace ws_… --name "site embed" --kind browser`, "TestBootstrapFirstCallAndRevoke (a browser key with the same flags)"},
	{"switchboard key origins key_…", "TestKeyOriginsCLI (a running server follows the change)"},
	{"switchboard key instances", "TestKeyInstancesCLI (a running server follows the change)"},
	{"make generate", "make check-generated, part of make ci"},
	{"make test-sdk", "make test"},
	{"make build-whatsapp", "make test-whatsapp, part of make test (it builds the tagged binary first)"},
	{"make test-whatsapp", "make test"},
	{"make ci", "CI (.ci/run)"},
	{"make fuzz", "make ci"},
	{"make bench", "run by hand: its numbers are in docs/benchmarks.md"},
	{"make e2e-n8n", "make ci"},
	{"make compat", "make ci"},
}

func TestDocsCommandsAreRun(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range shBlocks(string(raw)) {
			for _, c := range block {
				n++
				if !slices.ContainsFunc(docsRunBy, func(d struct{ prefix, by string }) bool { return strings.Contains(c.text, d.prefix) }) {
					t.Errorf("%s: %q is run by no test (add it to docsRunBy with the test that runs it)", f, firstLine(c.text))
				}
			}
		}
	}
	if n == 0 {
		t.Error("no command found in docs/: the parser is broken")
	}
}
