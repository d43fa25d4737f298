package switchboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	switchboard "github.com/switchboard/switchboard/sdk/go"
)

// TestRoundTrip calls a running server through the SDK: `make test-sdk` starts one on a fresh SQLite database, makes
// a workspace key with the CLI and sets SWITCHBOARD_URL and SWITCHBOARD_API_KEY.
func TestRoundTrip(t *testing.T) {
	base, key := os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_API_KEY")
	if base == "" {
		t.Skip("SWITCHBOARD_URL is not set (make test-sdk sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := switchboard.New(base, key)
	if err != nil {
		t.Fatal(err)
	}

	models, err := sb.ListModelsWithResponse(ctx)
	must(t, err, models.HTTPResponse, models.Body)
	if models.JSON200 == nil || len(models.JSON200.Data) == 0 {
		t.Fatalf("models: %s", models.Body)
	}

	// A receiver of link events (the server runs with loopback and plain http allowed for webhooks).
	deliveries := make(chan map[string]any, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var event map[string]any
		if r.Header.Get("webhook-signature") != "" && json.NewDecoder(r.Body).Decode(&event) == nil {
			deliveries <- event
		}
	}))
	defer receiver.Close()
	hook, err := sb.CreateWebhookWithResponse(ctx, nil, switchboard.WebhookCreate{Url: receiver.URL + "/hook", Events: []string{"link.created"}})
	must(t, err, hook.HTTPResponse, hook.Body)
	if len(hook.JSON201.Secret) < 10 {
		t.Errorf("webhook secret: %s", hook.Body)
	}

	slug := fmt.Sprintf("sdk-go-%d", time.Now().UnixNano())
	link, err := sb.CreateLinkWithResponse(ctx, nil, switchboard.LinkCreate{DestinationUrl: "https://example.com/sdk", Slug: &slug})
	must(t, err, link.HTTPResponse, link.Body)
	got, err := sb.GetLinkWithResponse(ctx, link.JSON201.Id)
	must(t, err, got.HTTPResponse, got.Body)
	if got.JSON200.DestinationUrl != "https://example.com/sdk" {
		t.Errorf("link: %s", got.Body)
	}
	select {
	case event := <-deliveries:
		if data, _ := event["data"].(map[string]any); event["type"] != "link.created" || data["link"].(map[string]any)["id"] != link.JSON201.Id {
			t.Errorf("delivered: %v", event)
		}
	case <-ctx.Done():
		t.Fatal("the link.created delivery did not arrive")
	}

	config := switchboard.InstanceConfig{"auto_pair": true}
	var ids []string
	for _, name := range []string{"Alice", "Bob"} {
		ins, err := sb.CreateInstanceWithResponse(ctx, nil, switchboard.InstanceCreate{Name: name, Provider: "sandbox", Config: &config})
		must(t, err, ins.HTTPResponse, ins.Body)
		conn, err := sb.ConnectInstanceWithResponse(ctx, ins.JSON201.Id)
		must(t, err, conn.HTTPResponse, conn.Body)
		ids = append(ids, ins.JSON201.Id)
	}
	var bob string
	for i := 0; bob == "" && i < 100; i++ {
		ins, err := sb.GetInstanceWithResponse(ctx, ids[1])
		must(t, err, ins.HTTPResponse, ins.Body)
		if ins.JSON200.Status == switchboard.InstanceStatusConnected {
			bob = ins.JSON200.Account.Address
		}
		time.Sleep(100 * time.Millisecond)
	}
	if bob == "" {
		t.Fatal("Bob's instance did not connect")
	}

	text := "hello from the Go SDK"
	var sent *switchboard.SendMessageResponse
	for i := 0; i < 100; i++ { // Alice may still be pairing: 409 until she is connected
		sent, err = sb.SendMessageWithResponse(ctx, ids[0], nil, switchboard.MessageCreate{Type: switchboard.MessageTypeText, To: &bob, Text: &text})
		if err != nil || sent.StatusCode() != 409 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	must(t, err, sent.HTTPResponse, sent.Body)
	status := sent.JSON202.Status
	for i := 0; i < 100 && (status == switchboard.MessageStatusQueued || status == switchboard.MessageStatusSending); i++ {
		time.Sleep(100 * time.Millisecond)
		msg, err := sb.GetMessageWithResponse(ctx, ids[0], sent.JSON202.Id)
		must(t, err, msg.HTTPResponse, msg.Body)
		status = msg.JSON200.Status
	}
	if status != switchboard.MessageStatusSent && status != switchboard.MessageStatusDelivered && status != switchboard.MessageStatusRead {
		t.Errorf("message status %s", status)
	}

	// A failure is an *Error carrying the problem, with its stable code.
	missing, err := sb.GetLinkWithResponse(ctx, "lnk_00000000000000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	var problem *switchboard.Error
	if err := switchboard.Check(missing.HTTPResponse, missing.Body); !errors.As(err, &problem) || problem.Problem == nil || problem.Problem.Code != "not_found" {
		t.Errorf("a missing link: %v", err)
	}
}

// must fails the test on a transport error or an answer that is not 2xx, with the problem's code.
func must(t *testing.T, err error, resp *http.Response, body []byte) {
	t.Helper()
	if err == nil {
		err = switchboard.Check(resp, body)
	}
	if err != nil {
		t.Fatalf("%v (%s)", err, body)
	}
}
