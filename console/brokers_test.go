package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The endpoint form registers a broker destination: RabbitMQ chosen in the form, its routing key set, the URL's
// password sealed (the pages show the URL without it), and the endpoint's test ping published to the queue the
// routing key names, signed with the secret the page showed once. A broker's settings need the broker type.
func TestCreateBrokerWebhookForm(t *testing.T) {
	admin, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil { // every machine of this project runs RabbitMQ, and CI does
		t.Fatalf("RabbitMQ on 127.0.0.1:5672: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		q, err := ch.QueueDeclare(strings.ToLower(store.NewID("sbconsole")), false, true, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "brokerhooks")
		page := b.get(t, "/user/webhooks")
		page.wantText(t, "RabbitMQ")
		r := b.createWebhook(t, url.Values{"type": {"rabbitmq"}, "url": {"amqp://guest:guest@127.0.0.1:5672/"},
			"routing_key": {q.Name}, "subject": {"ignored.{type}"}, "events": {"webhook.ping"}})
		r.wantStatus(t, http.StatusCreated)
		secret, _ := r.elementText("webhook-secret")
		es := endpoints(t, db, ws.ID)
		if len(es) != 1 || es[0].Type != webhook.TypeRabbitMQ || strings.Contains(es[0].URL, "guest:guest") {
			t.Fatalf("endpoints %+v", es)
		}
		d, err := webhook.OpenDestination(e.box, es[0])
		if err != nil || d.RoutingKey != q.Name || d.Subject != "" || !strings.Contains(d.URL, "guest:guest") {
			t.Fatalf("destination %+v, %v", d, err)
		}
		list := b.get(t, "/user/webhooks")
		list.wantText(t, "rabbitmq")
		list.wantNoText(t, "guest:guest")

		test := b.postCSRF(t, "/user/webhooks/"+es[0].ID+"/test", url.Values{})
		test.wantStatus(t, http.StatusOK)
		msg := await.Until(t, "the test ping in the queue", func() amqp.Delivery {
			m, _, _ := ch.Get(q.Name, true)
			return m
		}, func(m amqp.Delivery) bool { return m.Body != nil })
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		header := http.Header{}
		for k, v := range msg.Headers {
			if s, ok := v.(string); ok {
				header.Set(k, s)
			}
		}
		if err := wh.Verify(msg.Body, header); err != nil {
			t.Fatalf("the shown secret does not verify the ping published to RabbitMQ: %v (%s)", err, msg.Body)
		}

		refused := b.createWebhook(t, url.Values{"type": {"nats"}, "url": {"https://hooks.example.com/x"}, "events": {"*"}})
		refused.wantStatus(t, http.StatusUnprocessableEntity)
		if n := len(endpoints(t, db, ws.ID)); n != 1 {
			t.Fatalf("%d endpoints after a refused form", n)
		}
	})
}
