package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A hook subscription (a workflow tool's REST hook) whose receiver answers 410 Gone is deleted, not only disabled;
// an ordinary endpoint answering 410 is disabled as before. The workspace is told about both.
func TestGoneDeletesHookSubscription(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		goneHook, gonePlain := receivertest.New(t, receivertest.Statuses(http.StatusGone)), receivertest.New(t, receivertest.Statuses(http.StatusGone))
		ops := receivertest.New(t, nil)
		hook, _ := h.endpoint(goneHook.URL+"/hook", func(n *store.NewWebhookEndpoint) {
			n.Events, n.Kind = []string{"link.*"}, store.EndpointKindHook
		})
		plain, _ := h.endpoint(gonePlain.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.*"} })
		h.endpoint(ops.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"webhook.endpoint.disabled"} })
		h.start(webhook.Config{})
		h.emit("link.deleted")
		await.Equal(t, "both endpoints announced as disabled", ops.Count, 2)

		if _, err := db.Webhooks.Get(context.Background(), h.ws.ID, hook.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the hook subscription after 410: %v, want it deleted", err)
		}
		got, err := db.Webhooks.Get(context.Background(), h.ws.ID, plain.ID)
		if err != nil || got.Status != store.EndpointDisabled || got.Kind != store.EndpointKindEndpoint {
			t.Errorf("the ordinary endpoint after 410: %+v, %v", got, err)
		}
	})
}
