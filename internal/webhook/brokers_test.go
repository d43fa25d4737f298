package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The brokers every machine of this project runs (and CI uses): tests publish to them for real.
const (
	rabbitURL = "amqp://guest:guest@127.0.0.1:5672/"
	natsURL   = "nats://127.0.0.1:4222"
	mqttURL   = "mqtt://127.0.0.1:1883"
)

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// brokerHarness is a harness with a running dispatcher (a one-step, fast retry schedule) and the webhook service
// over it, to register broker endpoints as the API does.
type brokerHarness struct {
	*harness
	svc *webhook.Service
}

func newBrokerHarness(t *testing.T, db *store.DB) *brokerHarness {
	h := newHarness(t, db)
	// RabbitMQ answers a wrong password after 3 s: attempts get longer than the other tests give them.
	d := h.start(webhook.Config{Timeout: 8 * time.Second, Schedule: []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond}})
	svc, err := webhook.NewService(db, events.NewOutbox(db, events.Builtin()), webhook.ServiceConfig{Box: h.box, Guard: h.guard, Sender: d.Sender(), Wake: d.Wake})
	if err != nil {
		t.Fatal(err)
	}
	return &brokerHarness{harness: h, svc: svc}
}

// in is the harness for a subtest: its failures are the subtest's.
func (h *brokerHarness) in(t *testing.T) *brokerHarness {
	base := *h.harness
	base.t = t
	return &brokerHarness{harness: &base, svc: h.svc}
}

// create registers an endpoint through the service, subscribed to every event.
// It returns the stored row, whose sealed destination the tests look into.
func (h *brokerHarness) create(n webhook.NewEndpoint) store.WebhookEndpoint {
	h.t.Helper()
	n.Events = []string{"*"}
	e, _, err := h.svc.Create(context.Background(), h.ws.ID, n)
	if err != nil {
		h.t.Fatal(err)
	}
	stored, err := h.db.Webhooks.Get(context.Background(), h.ws.ID, e.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return stored
}

// wait waits until a delivery has the status, or fails the test.
func (h *brokerHarness) wait(eventID, endpointID, status string) store.Delivery {
	h.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h.status(eventID, endpointID) == status {
			return h.delivery(eventID, endpointID)
		}
	}
	var log []string
	for _, a := range h.attempts(h.delivery(eventID, endpointID).ID) {
		log = append(log, fmt.Sprintf("%v %v %v", a.StatusCode, deref(a.ErrorClass), deref(a.ResponseExcerpt)))
	}
	h.t.Fatalf("delivery of %s to %s is %q, want %q; attempts %q", eventID, endpointID, h.status(eventID, endpointID), status, log)
	return store.Delivery{}
}

// failedWith waits until a delivery has a failed attempt of the class whose reason says reason (an attempt may
// fail otherwise first on a busy machine: a connection that timed out), and checks that it did not succeed.
func (h *brokerHarness) failedWith(eventID, endpointID, class, reason string) {
	h.t.Helper()
	var seen []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		d := h.delivery(eventID, endpointID)
		if d.Status == store.DeliverySucceeded {
			h.t.Fatalf("delivery succeeded after a refusal")
		}
		seen = seen[:0]
		for _, a := range h.attempts(d.ID) {
			if deref(a.ErrorClass) == class && strings.Contains(deref(a.ResponseExcerpt), reason) {
				return
			}
			seen = append(seen, deref(a.ErrorClass)+": "+deref(a.ResponseExcerpt))
		}
	}
	h.t.Fatalf("no attempt of %s to %s failed with %s and a reason with %q: %q", eventID, endpointID, class, reason, seen)
}

// checkSigned checks that a message carries the envelope of ev and its Standard Webhooks headers, verifiable with the
// endpoint's secret as a webhook receiver verifies them.
func (h *brokerHarness) checkSigned(e store.WebhookEndpoint, ev store.Event, body []byte, header func(string) string) {
	h.t.Helper()
	if header("webhook-id") != ev.ID {
		h.t.Fatalf("webhook-id %q, want %s", header("webhook-id"), ev.ID)
	}
	hdr := http.Header{}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		hdr.Set(k, header(k))
	}
	secret := h.secretOf(e)
	if err := verify(h.t, secret, receivertest.Request{Header: hdr, Body: body}); err != nil {
		h.t.Fatalf("signature: %v (body %s)", err, body)
	}
}

func (h *brokerHarness) secretOf(e store.WebhookEndpoint) string {
	h.t.Helper()
	plain, err := h.box.Open(e.Secret, []byte(e.ID))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(plain)
}

func TestRabbitMQDestination(t *testing.T) {
	admin, err := amqp.Dial(rabbitURL)
	if err != nil {
		t.Fatalf("RabbitMQ at %s: %v", rabbitURL, err)
	}
	defer admin.Close()
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newBrokerHarness(t, db)
		q, err := ch.QueueDeclare(randomName("sbtest."), false, true, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		typ := webhook.TypeRabbitMQ

		t.Run("delivered once the broker confirmed, signed, the credentials sealed", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: rabbitURL, Type: typ, Destination: webhook.Destination{RoutingKey: q.Name}})
			if e.URL != "amqp://guest@127.0.0.1:5672/" || e.Destination == nil || strings.Contains(*e.Destination, "guest:guest") {
				t.Fatalf("stored url %q, destination %v", e.URL, e.Destination)
			}
			if got, err := h.svc.Get(context.Background(), h.ws.ID, e.ID); err != nil || got.Type != typ ||
				got.Destination == nil || got.Destination.RoutingKey != q.Name || got.Destination.URL != "" || strings.Contains(got.URL, "guest:") {
				t.Fatalf("the service's view %+v, %v", got, err)
			}
			ev := h.emit("webhook.ping")
			h.wait(ev.ID, e.ID, store.DeliverySucceeded)
			msg, ok, err := ch.Get(q.Name, true)
			if err != nil || !ok {
				t.Fatalf("queue %s: %v %v", q.Name, ok, err)
			}
			if msg.MessageId != ev.ID || msg.Type != ev.Type || msg.DeliveryMode != amqp.Persistent {
				t.Fatalf("message %+v", msg)
			}
			h.checkSigned(e, ev, msg.Body, func(k string) string { s, _ := msg.Headers[k].(string); return s })
		})

		t.Run("a missing exchange is retried with the broker's reason, then delivered once it exists", func(t *testing.T) {
			h := h.in(t)
			exchange := randomName("sbtest.x.")
			e := h.create(webhook.NewEndpoint{URL: rabbitURL, Type: typ,
				Destination: webhook.Destination{Exchange: exchange, RoutingKey: "{type}"}})
			ev := h.emit("webhook.ping")
			h.failedWith(ev.ID, e.ID, webhook.ClassBrokerRefused, "no exchange")
			if err := ch.ExchangeDeclare(exchange, "direct", false, true, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch.QueueBind(q.Name, "webhook.ping", exchange, false, nil); err != nil {
				t.Fatal(err)
			}
			// The dispatcher may be retrying on its own schedule at this moment (the answer is then delivery_in_flight,
			// and that attempt may already find the exchange): send again until the delivery is not in flight.
			if err := await.Until(t, "a redelivery that is not refused as in flight", func() error {
				_, err := h.svc.Redeliver(context.Background(), h.ws.ID, h.delivery(ev.ID, e.ID).ID)
				return err
			}, func(err error) bool {
				var p *problem.Error
				return err == nil || !errors.As(err, &p) || p.Code != problem.DeliveryInFlight
			}); err != nil {
				t.Fatal(err)
			}
			h.wait(ev.ID, e.ID, store.DeliverySucceeded)
			if msg, ok, err := ch.Get(q.Name, true); err != nil || !ok || msg.MessageId != ev.ID {
				t.Fatalf("after recovery: %v %v %v", msg.MessageId, ok, err)
			}
		})

		t.Run("an unroutable message is refused, not dropped", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: rabbitURL, Type: typ, Destination: webhook.Destination{RoutingKey: randomName("nobody.")}})
			ev := h.emit("webhook.ping")
			h.failedWith(ev.ID, e.ID, webhook.ClassBrokerRefused, "unroutable")
		})

		t.Run("wrong credentials are refused", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: "amqp://guest:wrong@127.0.0.1:5672/", Type: typ, Destination: webhook.Destination{RoutingKey: q.Name}})
			ev := h.emit("webhook.ping")
			h.failedWith(ev.ID, e.ID, webhook.ClassBrokerRefused, "refused the connection")
		})
	})
}

func TestNATSDestination(t *testing.T) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS at %s: %v", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newBrokerHarness(t, db)
		prefix := randomName("sbtest")
		stream, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: prefix, Subjects: []string{prefix + ".>"},
			Storage: jetstream.MemoryStorage, Duplicates: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), prefix) })
		typ := webhook.TypeNATS

		t.Run("acknowledged by the stream, de-duplicated by event ID", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: natsURL, Type: typ, Destination: webhook.Destination{Subject: prefix + ".{workspace}.{type}"}})
			ev := h.emit("webhook.ping")
			d := h.wait(ev.ID, e.ID, store.DeliverySucceeded)
			msg, err := stream.GetMsg(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if msg.Subject != prefix+"."+h.ws.ID+".webhook.ping" || msg.Header.Get(jetstream.MsgIDHeader) != ev.ID {
				t.Fatalf("message on %s, headers %v", msg.Subject, msg.Header)
			}
			h.checkSigned(e, ev, msg.Data, msg.Header.Get)
			// Sent again on purpose: JetStream keeps one copy.
			if _, err := h.svc.Redeliver(context.Background(), h.ws.ID, d.ID); err != nil {
				t.Fatal(err)
			}
			for h.attempts(d.ID); len(h.attempts(d.ID)) < 2; time.Sleep(20 * time.Millisecond) {
			}
			h.wait(ev.ID, e.ID, store.DeliverySucceeded)
			info, err := stream.Info(context.Background())
			if err != nil || info.State.Msgs != 1 {
				t.Fatalf("stream holds %d messages (%v), want 1", info.State.Msgs, err)
			}
		})

		t.Run("a subject no stream captures is retried with the reason", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: natsURL, Type: typ, Destination: webhook.Destination{Subject: randomName("nostream.")}})
			ev := h.emit("webhook.ping")
			h.failedWith(ev.ID, e.ID, webhook.ClassBrokerRefused, "no JetStream stream")
		})
	})
}

func TestMQTTDestination(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newBrokerHarness(t, db)
		topic := randomName("sbtest/")
		got := make(chan *paho.Publish, 4)
		conn, err := net.Dial("tcp", "127.0.0.1:1883")
		if err != nil {
			t.Fatalf("Mosquitto at 127.0.0.1:1883: %v", err)
		}
		sub := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(p paho.PublishReceived) (bool, error) { got <- p.Packet; return true, nil }}})
		ctx := context.Background()
		if _, err := sub.Connect(ctx, &paho.Connect{ClientID: randomName("sbsub"), CleanStart: true, KeepAlive: 30}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Disconnect(&paho.Disconnect{}) })
		if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic + "/#", QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		typ := webhook.TypeMQTT

		t.Run("acknowledged at QoS 1, headers as user properties", func(t *testing.T) {
			h := h.in(t)
			e := h.create(webhook.NewEndpoint{URL: mqttURL, Type: typ, Destination: webhook.Destination{Topic: topic + "/{type}"}})
			ev := h.emit("webhook.ping")
			h.wait(ev.ID, e.ID, store.DeliverySucceeded)
			select {
			case p := <-got:
				if p.Topic != topic+"/webhook.ping" {
					t.Fatalf("topic %s", p.Topic)
				}
				h.checkSigned(e, ev, p.Payload, p.Properties.User.Get)
			case <-time.After(20 * time.Second):
				t.Fatal("nothing published")
			}
		})

		t.Run("a broker that does not answer is retried with the reason", func(t *testing.T) {
			h := h.in(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close() // nothing listens there now
			e := h.create(webhook.NewEndpoint{URL: "mqtt://" + addr, Type: typ})
			ev := h.emit("webhook.ping")
			h.failedWith(ev.ID, e.ID, webhook.ClassConnectionRefused, "refused")
		})
	})
}

// Broker settings belong to their type, and broker URLs to broker types.
func TestBrokerRegistrationRules(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newBrokerHarness(t, db)
		for _, b := range []webhook.NewEndpoint{
			{URL: "https://127.0.0.1/hook", Type: webhook.TypeRabbitMQ},
			{URL: rabbitURL, Type: webhook.TypeNATS},
			{URL: rabbitURL, Type: webhook.TypeRabbitMQ, DestinationFor: []string{webhook.TypeNATS}},
			{URL: "amqp://10.0.0.1:5672/", Type: webhook.TypeRabbitMQ},
		} {
			b.Events = []string{"*"}
			if _, _, err := h.svc.Create(context.Background(), h.ws.ID, b); err == nil ||
				!strings.Contains(err.Error(), "validation_failed") {
				t.Errorf("%+v: %v, want validation_failed", b, err)
			}
		}
	})
}
