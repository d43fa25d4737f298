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

// runBrokers measures the broker rows on SQLite and, unless skipped or unreachable, PostgreSQL (the https baseline
// of each included). Each drain has a database of its own, so that none drains behind another's rows.
func runBrokers(ctx context.Context, o options, out, log io.Writer) (int, error) {
	var databases []string
	for _, database := range []string{"SQLite", "PostgreSQL"} {
		if o.rows.MatchString("broker deliveries — " + database) {
			databases = append(databases, database)
		}
	}
	if len(databases) == 0 {
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
	failed := 0
	for _, database := range databases {
		n, err := runBrokerRows(ctx, o, database, tmp, prefix, out, log)
		if err != nil {
			return failed, err
		}
		failed += n
	}
	return failed, nil
}

// runBrokerRows measures the https drain and each broker's on one kind of database and writes their table.
func runBrokerRows(ctx context.Context, o options, database, tmp, prefix string, out, log io.Writer) (int, error) {
	type row struct {
		name string
		rate float64
		err  string
	}
	var rows []row
	for i, target := range append([]string{"https"}, webhook.TypeRabbitMQ, webhook.TypeNATS, webhook.TypeMQTT) {
		dbURL, drop := "file:"+filepath.Join(tmp, strconv.Itoa(i)+".db"), func() {}
		if database == "PostgreSQL" {
			var skipped string
			if dbURL, drop, skipped = benchPostgres(ctx, o, true, log); dbURL == "" {
				fmt.Fprintf(out, "\n*broker deliveries — PostgreSQL skipped: %s*\n", skipped)
				return 0, nil
			}
		}
		r, res, err := measureBrokerDrain(ctx, database, dbURL, target, prefix)
		drop()
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(log, "broker deliveries — %s — %-8s %8.0f deliveries/s %s\n", database, target, r, res)
		rows = append(rows, row{name: target, rate: r, err: res})
	}
	failed := 0
	fmt.Fprintf(out, "\n| broker deliveries — %s (backlog of %d, confirmed) | deliveries/s | ratio to https |\n|---|---:|---:|\n",
		database, webhookBacklog)
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

// measureBrokerDrain drains the webhook rows' backlog on a database into target (https or a broker type) and
// returns deliveries/s, or the last failure when the drain did not complete.
func measureBrokerDrain(ctx context.Context, database, dbURL, target, prefix string) (float64, string, error) {
	b, err := startWebhookBench(ctx, database, dbURL)
	if err != nil {
		return 0, "", err
	}
	defer b.close()
	if target != "https" {
		if err := b.toBroker(ctx, target, prefix); err != nil {
			return 0, "", err
		}
	}
	r, ok, err := b.measureBacklog(ctx, 0)
	if err != nil {
		return 0, "", err
	}
	if !ok {
		return r.rate, b.failures[len(b.failures)-1], nil
	}
	return r.rate, "", nil
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
