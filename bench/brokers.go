package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/webhook"
)

// The broker rows drain the webhook rows' backlog (webhookBacklog deliveries over webhookEndpoints endpoints) into
// each broker of the machine with its confirmation (RabbitMQ publisher confirms, the JetStream acknowledgement, the
// MQTT PUBACK), as a ratio to the https drain of the same database in the same run.
var benchBrokers = []struct{ typ, url string }{
	{webhook.TypeRabbitMQ, "amqp://guest:guest@127.0.0.1:5672/"},
	{webhook.TypeNATS, "nats://127.0.0.1:4222"},
	{webhook.TypeMQTT, "mqtt://127.0.0.1:1883"},
}

// runBrokers measures the broker rows on SQLite (the https baseline included).
func runBrokers(ctx context.Context, o options, out, log io.Writer) (int, error) {
	if !o.rows.MatchString("broker deliveries — SQLite") {
		return 0, nil
	}
	tmp, err := os.MkdirTemp("", "switchboard-bench-brokers-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	prefix := "sbbench" + strconv.FormatInt(int64(os.Getpid()), 10)
	cleanup, err := prepareBrokers(ctx, prefix)
	defer cleanup()
	if err != nil {
		return 0, err
	}
	type row struct {
		name string
		rate float64
		err  string
	}
	var rows []row
	for i, target := range append([]string{"https"}, webhook.TypeRabbitMQ, webhook.TypeNATS, webhook.TypeMQTT) {
		b, err := startWebhookBench(ctx, "SQLite", "file:"+filepath.Join(tmp, strconv.Itoa(i)+".db"))
		if err != nil {
			return 0, err
		}
		if target != "https" {
			if err := b.toBroker(ctx, target, prefix); err != nil {
				b.close()
				return 0, err
			}
		}
		r, ok, err := b.measureBacklog(ctx, 0)
		b.close()
		if err != nil {
			return 0, err
		}
		res := row{name: target, rate: r.rate}
		if !ok {
			res.err = b.failures[len(b.failures)-1]
		}
		fmt.Fprintf(log, "broker deliveries — SQLite — %-8s %8.0f deliveries/s %s\n", target, r.rate, res.err)
		rows = append(rows, res)
	}
	failed := 0
	fmt.Fprintf(out, "\n| broker deliveries — SQLite (backlog of %d, confirmed) | deliveries/s | ratio to https |\n|---|---:|---:|\n", webhookBacklog)
	for _, r := range rows {
		if r.err != "" {
			failed++
			fmt.Fprintf(out, "| %s | — | **FAILED**: %s |\n", r.name, r.err)
			continue
		}
		fmt.Fprintf(out, "| %s | %.0f | %.2f |\n", r.name, r.rate, r.rate/rows[0].rate)
	}
	return failed, nil
}

// prepareBrokers declares what the brokers need to confirm the bench's messages: a RabbitMQ queue per endpoint (the
// default exchange routes to it) and a JetStream stream of the bench's subjects. MQTT needs nothing.
func prepareBrokers(ctx context.Context, prefix string) (cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for _, u := range undo {
			u()
		}
	}
	conn, err := amqp.Dial(benchBrokers[0].url)
	if err != nil {
		return cleanup, fmt.Errorf("RabbitMQ: %w", err)
	}
	undo = append(undo, func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		return cleanup, err
	}
	for i := range webhookEndpoints {
		q := prefix + "." + eventType(i)
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			return cleanup, err
		}
		undo = append(undo, func() { _, _ = ch.QueueDelete(q, false, false, false) })
	}
	nc, err := nats.Connect(benchBrokers[1].url)
	if err != nil {
		return cleanup, fmt.Errorf("NATS: %w", err)
	}
	undo = append(undo, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return cleanup, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix, Subjects: []string{prefix + ".>"},
		Storage: jetstream.FileStorage}); err != nil {
		return cleanup, err
	}
	undo = append([]func(){func() { _ = js.DeleteStream(context.Background(), prefix) }}, undo...)
	return cleanup, nil
}

// toBroker replaces the bench's https endpoints by endpoints of a broker type, registered through the webhook
// service as the API does, each publishing where prepareBrokers made room.
func (b *webhookBench) toBroker(ctx context.Context, typ, prefix string) error {
	if _, err := b.db.Bun().NewDelete().TableExpr("webhook_endpoints").Where("workspace_id = ?", b.ws.ID).Exec(ctx); err != nil {
		return err
	}
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	svc, err := webhook.NewService(b.db, b.outbox, webhook.ServiceConfig{Box: b.box, Guard: guard,
		Sender: webhook.NewSender(b.box, guard, webhook.DefaultTimeout)})
	if err != nil {
		return err
	}
	url := ""
	for _, br := range benchBrokers {
		if br.typ == typ {
			url = br.url
		}
	}
	for i := range webhookEndpoints {
		n := webhook.NewEndpoint{URL: url, Events: []string{eventType(i)}, Type: typ}
		n.Destination.RoutingKey = prefix + "." + eventType(i)
		n.Destination.Subject = prefix + "." + eventType(i)
		n.Destination.Topic = prefix + "/" + eventType(i)
		if _, _, err := svc.Create(ctx, b.ws.ID, n); err != nil {
			return fmt.Errorf("%s endpoint: %w", typ, err)
		}
	}
	return nil
}
