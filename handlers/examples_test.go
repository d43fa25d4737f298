package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// exampleEpoch is the moment the spec's examples are written at ("created_at": "2026-11-23T10:00:00Z"): the test
// moves every timestamp of an example by the time since, so that "two days ago" and "next week" stay what they were.
var exampleEpoch = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// exampleID is an ID in an example (ins_01JDAD0A1B2C3D4E5F6G7H8J9K, in_4kTq2m…): the test puts a real one of the
// same kind in its place.
var exampleID = regexp.MustCompile(`^([a-z]{2,3})_[0-9A-Za-z_-]{20,}$`)

// requestExample is one example of a request body of the spec.
type requestExample struct {
	operation, name, contentType string
	value                        any
}

// requestExamples returns every request body example of the spec, by operation: a media type's named examples or
// its single example, else its schema's example (what the interactive reference fills in for "Try it out").
func requestExamples() map[string][]requestExample {
	out := map[string][]requestExample{}
	for _, item := range specDoc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			for ct, media := range op.RequestBody.Value.Content {
				add := func(name string, v any) {
					out[op.OperationID] = append(out[op.OperationID], requestExample{op.OperationID, name, ct, v})
				}
				switch {
				case len(media.Examples) > 0:
					for name, ex := range media.Examples {
						add(name, ex.Value.Value)
					}
				case media.Example != nil:
					add("example", media.Example)
				case media.Schema != nil && media.Schema.Value.Example != nil:
					add("schema example", media.Schema.Value.Example)
				}
			}
		}
	}
	return out
}

// exampleRun sends the spec's request examples to a fresh server, one operation at a time, with real IDs in
// place of the examples' own.
type exampleRun struct {
	*msgEnv
	key      string
	examples map[string][]requestExample
	sent     map[string]bool
	// ids holds the real ID to use for each kind of ID (by prefix: "ins", "msg", …), params the value of path
	// parameters whose example is not an ID.
	ids, params map[string]string
	shift       time.Duration
}

// use makes id the one put in place of every example ID of its kind.
func (x *exampleRun) use(id string) {
	x.t.Helper()
	m := exampleID.FindStringSubmatch(id)
	if m == nil {
		x.t.Fatalf("%q is not an ID", id)
	}
	x.ids[m[1]] = id
}

// real returns an example's value with real IDs in place of its IDs and its timestamps moved to now.
func (x *exampleRun) real(v any) any {
	x.t.Helper()
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = x.real(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = x.real(e)
		}
		return out
	case string:
		if m := exampleID.FindStringSubmatch(v); m != nil {
			id, ok := x.ids[m[1]]
			if !ok {
				x.t.Fatalf("an example names %s, but the test made no %s_ ID to use instead", v, m[1])
			}
			return id
		}
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			return at.Add(x.shift).Format(time.RFC3339)
		}
		if code, ok := strings.CutPrefix(v, "sandbox-invite:"); ok && x.ids["invite"] != "" && code != "" {
			return x.ids["invite"]
		}
	}
	return v
}

// send sends every request example of an operation not sent yet and expects the status the spec documents for it:
// its only success status, or, where it has several, want. It returns the answers by example name.
func (x *exampleRun) send(operationID string, want ...int) map[string]*response {
	x.t.Helper()
	return x.sendOnly(operationID, "", want...)
}

// sendOnly is send for one example, by name ("" for all).
func (x *exampleRun) sendOnly(operationID, name string, want ...int) map[string]*response {
	x.t.Helper()
	path, method, op := specOperation(x.t, operationID)
	status := successStatus(x.t, op, want)
	examples := x.examples[operationID]
	if len(examples) == 0 {
		x.t.Fatalf("%s has no request example", operationID)
	}
	for _, p := range append(append(openapi3.Parameters{}, specDoc.Paths.Find(path).Parameters...), op.Parameters...) {
		if p.Value.In != openapi3.ParameterInPath {
			continue
		}
		value, ok := x.params[p.Value.Name]
		if !ok {
			value, _ = x.real(p.Value.Example).(string)
		}
		path = strings.Replace(path, "{"+p.Value.Name+"}", url.PathEscape(value), 1)
	}
	out := map[string]*response{}
	for _, ex := range examples {
		if x.sent[operationID+" "+ex.name] || (name != "" && ex.name != name) {
			continue
		}
		body, err := json.Marshal(x.real(ex.value))
		if err != nil {
			x.t.Fatal(err)
		}
		res := x.do(request{method: method, path: path, key: x.key, body: string(body),
			header: map[string]string{"Content-Type": ex.contentType}})
		if res.StatusCode != status {
			x.t.Errorf("%s, example %q: %s %s %s → %d %s, want %d", operationID, ex.name, method, path, body,
				res.StatusCode, res.body, status)
		}
		x.sent[operationID+" "+ex.name] = true
		out[ex.name] = res
	}
	return out
}

// specOperation finds an operation of the spec by its ID.
func specOperation(t testing.TB, operationID string) (path, method string, op *openapi3.Operation) {
	t.Helper()
	for path, item := range specDoc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == operationID {
				return path, method, op
			}
		}
	}
	t.Fatalf("no operation %s", operationID)
	return "", "", nil
}

// successStatus is the success status an operation documents: its only one, or want when it has several.
func successStatus(t testing.TB, op *openapi3.Operation, want []int) int {
	t.Helper()
	var success []int
	for code := range op.Responses.Map() {
		if n, err := strconv.Atoi(code); err == nil && n < 300 {
			success = append(success, n)
		}
	}
	switch {
	case len(want) == 1 && slices.Contains(success, want[0]):
		return want[0]
	case len(want) == 0 && len(success) == 1:
		return success[0]
	}
	t.Fatalf("%s documents success statuses %v: say which one its examples answer", op.OperationID, success)
	return 0
}

// idOf returns the "id" of a JSON answer.
func idOf(t testing.TB, res *response) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	res.json(t, &v)
	if v.ID == "" {
		t.Fatalf("no id in %s", res.body)
	}
	return v.ID
}

// Every request example of the spec works against a fresh server on the sandbox network, as "Try it out" in the
// interactive reference sends it: each answers the status its operation documents (and the answer matches the
// spec), with real IDs in place of the examples' and timestamps moved to now. An example added to the spec fails
// this test until it is sent here.
func TestEveryRequestExampleWorks(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		// Webhook receivers' names resolve to a loopback address where nothing listens: registration accepts them
		// and a test delivery fails at once, as it would against a host that is down.
		guard := egress.NewGuard(egress.Policy{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			egress.WithLookup(func(context.Context, string, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
			}))
		// The model of the chat completion's example is served by a fake OpenAI-compatible upstream.
		upstream := llmtest.New(t, "sk-upstream", "llama3.1")
		box, err := sealbox.New(make([]byte, sealbox.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		models := llm.New(llm.Config{Client: egress.NewGuard(apptest.Loopback).Client(0), DB: db, Box: box, Guard: guard,
			Upstreams: []llm.Upstream{{Name: "local", BaseURL: upstream.URL, APIKey: "sk-upstream"}}})
		e := newSandboxServer(t, db, sandbox.Options{}, handlers.Config{BaseURL: "http://app.switchboard.test", LLM: models}, guard)
		x := &exampleRun{msgEnv: e, examples: requestExamples(), sent: map[string]bool{},
			ids: map[string]string{}, params: map[string]string{}, shift: time.Since(exampleEpoch)}
		x.key, _ = e.key(e.ws.ID, apikey.All()...)

		// Webhooks.
		created := x.send("createWebhook")
		x.use(idOf(t, created["everything"]))
		x.send("updateWebhook")
		x.send("enableWebhook")
		x.send("rotateWebhookSecret")
		x.send("testWebhook")
		x.send("recoverWebhook")

		// Automation: a custom event type, published to; sources, and an ingest URL that needs no signature.
		x.send("createEventType")
		x.send("publishEvent")
		x.params["event_type"] = "custom.order.paid"
		x.send("updateEventType")
		x.use(idOf(t, x.send("createSource")["github"]))
		x.send("updateSource")
		x.send("rotateSourceToken")
		res := x.do(request{method: http.MethodPost, path: "/api/v1/sources", key: x.key,
			body: `{"name":"Shop","event_type":"custom.shop.order","verification":{"scheme":"none"}}`})
		var shop struct {
			IngestURL string `json:"ingest_url"`
		}
		res.json(t, &shop)
		x.use(shop.IngestURL[strings.LastIndex(shop.IngestURL, "/")+1:])
		x.send("ingestSourceRequest")

		x.send("createChatCompletion")
		x.send("createModelUpstream")

		// Links; the upsert's external ID is the one the campaign example created.
		x.send("createLink")
		x.send("createLinksBulk")
		x.use(idOf(t, x.send("upsertLinkByExternalId", http.StatusOK)["sync"]))
		x.send("updateLink")

		// Messaging: the instance of the examples pairs by pairing code as +9995550101 and talks to +9995550102 and
		// +9995550103, instances of their own; a fourth instance joins the group by its invite.
		alice := idOf(t, x.send("createInstance")["sandbox"])
		x.use(alice)
		x.send("updateInstance")
		if res := e.post("/api/v1/instances/"+alice+"/connect", ""); res.StatusCode != http.StatusOK {
			t.Fatalf("connect: %d %s", res.StatusCode, res.body)
		}
		e.status(alice, "awaiting_auth")
		x.send("requestPairingCode")
		if res := e.post("/api/v1/instances/"+alice+"/sandbox/scan", ""); res.StatusCode != http.StatusOK {
			t.Fatalf("scan: %d %s", res.StatusCode, res.body)
		}
		if got := e.status(alice, "connected"); got.Account == nil || got.Account.Address != "+9995550101" {
			t.Fatalf("the instance of the examples is %+v, want +9995550101", got.Account)
		}
		peers := map[string]string{}
		for _, number := range []string{"+9995550102", "+9995550103"} {
			peer := e.instance("sandbox", fmt.Sprintf(`{"auto_pair":true,"number":%q}`, number))
			peers[number] = peer.Id
			if res := e.post("/api/v1/instances/"+peer.Id+"/connect", ""); res.StatusCode != http.StatusOK {
				t.Fatalf("connect %s: %d %s", number, res.StatusCode, res.body)
			}
			e.status(peer.Id, "connected")
		}
		x.use(x.upload("invoice.png", "\x89PNG\r\n\x1a\n"))
		var text struct {
			ID     string `json:"id"`
			ChatID string `json:"chat_id"`
		}
		x.sendOnly("sendMessage", "text", http.StatusAccepted)["text"].json(t, &text)
		x.use(text.ID)
		x.use(text.ChatID)
		x.send("sendMessage", http.StatusAccepted)
		// A bot of the instance (the engine does not run here: it answers nothing), disabled again at once.
		x.use(idOf(t, x.send("createBot")["model"]))
		x.send("updateBot")
		x.send("controlChatBot")
		// A receipt follows a message the network took.
		await.Until(t, "the text example sent", func() string {
			var m struct {
				Status string `json:"status"`
			}
			e.get("/api/v1/instances/"+alice+"/messages/"+text.ID, &m)
			return m.Status
		}, func(s string) bool { return s != "queued" && s != "sending" })
		x.send("sandboxReceipt")
		x.send("sandboxInbound")
		// Presence in the chat of the text, and the instance's availability.
		x.send("sendChatPresence")
		x.send("updateChat")
		x.use(idOf(t, x.send("createLabel", http.StatusCreated)["label"]))
		x.send("updateLabel")
		x.send("setInstancePresence")
		// A poll from +9995550102 that the instance of the examples votes on.
		if res := e.post("/api/v1/instances/"+peers["+9995550102"]+"/messages",
			`{"to":"+9995550101","type":"poll","poll":{"question":"Lunch?","options":["Pizza","Sushi"]}}`); res.StatusCode != http.StatusAccepted {
			t.Fatalf("poll: %d %s", res.StatusCode, res.body)
		}
		poll := await.Until(t, "the poll at the instance of the examples", func() string {
			var l gen.MessageList
			e.get("/api/v1/instances/"+alice+"/messages?direction=inbound&limit=100", &l)
			for _, m := range l.Data {
				if m.Type == gen.MessageTypePoll {
					return m.Id
				}
			}
			return ""
		}, func(id string) bool { return id != "" })
		x.use(poll)
		x.send("sandboxPollVote")
		x.use(text.ID)
		x.send("lookupContacts")
		var people gen.PersonList // the looked-up contact is a person; linking it to its own changes nothing
		e.get("/api/v1/people?limit=1", &people)
		if len(people.Data) == 0 {
			t.Fatal("no person after a lookup")
		}
		x.use(people.Data[0].Id)
		x.use(people.Data[0].Contacts[0].Contact.Id)
		x.send("linkPerson")
		x.send("sendToPerson", http.StatusAccepted)
		x.use(idOf(t, x.send("createGroup")["group"]))
		x.send("updateGroup")
		x.send("changeGroupParticipants")
		var invite struct {
			Invite string `json:"invite"`
		}
		e.get("/api/v1/instances/"+alice+"/groups/"+x.ids["grp"]+"/invite", &invite)
		x.ids["invite"] = invite.Invite
		x.use(e.connected("Dave").Id)
		x.send("joinGroup")
		x.use(alice)
		x.send("sandboxFailSends")
		x.send("sandboxCall")
		x.send("sandboxRestrict") // last: the instance is restricted for the example's two seconds

		var missed []string
		for op, examples := range x.examples {
			for _, ex := range examples {
				if !x.sent[op+" "+ex.name] {
					missed = append(missed, op+" "+ex.name)
				}
			}
		}
		if len(missed) > 0 {
			slices.Sort(missed)
			t.Errorf("request examples this test does not send: %v", missed)
		}
	})
}

// upload stores a file through the API and returns its media ID.
func (x *exampleRun) upload(name, content string) string {
	x.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		x.t.Fatal(err)
	}
	if _, err := io.WriteString(fw, content); err != nil {
		x.t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		x.t.Fatal(err)
	}
	res := x.do(request{method: http.MethodPost, path: "/api/v1/media", key: x.key, body: buf.String(),
		header: map[string]string{"Content-Type": mw.FormDataContentType()}})
	if res.StatusCode != http.StatusCreated {
		x.t.Fatalf("upload: %d %s", res.StatusCode, res.body)
	}
	return idOf(x.t, res)
}
