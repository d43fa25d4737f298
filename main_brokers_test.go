package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// The brokers every machine of this project runs (and CI uses).
const (
	testRabbitURL = "amqp://guest:guest@127.0.0.1:5672/"
	testNATSURL   = "nats://127.0.0.1:4222"
)

// emitMany records n events of the fixture's workspace, a hundred to a transaction, and returns their IDs.
func (f *fixture) emitMany(n int) []string {
	f.t.Helper()
	outbox := events.NewOutbox(f.db, events.Builtin())
	var ids []string
	for len(ids) < n {
		err := f.db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
			for i := 0; i < 100 && len(ids) < n; i++ {
				ev, err := outbox.EmitJSON(ctx, tx, f.ws.ID, "link.created", fmt.Appendf(nil, `{"link_id":"lnk_%d"}`, len(ids)))
				if err != nil {
					return err
				}
				ids = append(ids, ev.ID)
			}
			return nil
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	return ids
}

// leasedAt counts the workspace's pending deliveries whose claim's lease runs past at: claimed by a dispatcher and
// not recorded yet.
func (f *fixture) leasedAt(at time.Time) int {
	f.t.Helper()
	n, err := f.db.Bun().NewSelect().Table("webhook_deliveries").
		Where("workspace_id = ? AND status = ? AND lease_until > ?", f.ws.ID, store.DeliveryPending, at.UTC()).Count(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return int(n)
}

// deliveriesBy counts the workspace's deliveries by status.
func (f *fixture) deliveriesBy() map[string]int {
	f.t.Helper()
	var rows []struct {
		Status string
		N      int
	}
	if err := f.db.Bun().NewSelect().Table("webhook_deliveries").ColumnExpr("status, count(*) AS n").
		Where("workspace_id = ?", f.ws.ID).Group("status").Scan(context.Background(), &rows); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out
}

// A server killed (SIGKILL) while it drains a backlog into RabbitMQ and NATS JetStream loses nothing: restarted, it
// takes over the deliveries the dead one had claimed once their lease ran out, and every event reaches both brokers
// — RabbitMQ at least once (only what was in flight at the kill may come twice: consumers de-duplicate by
// message ID), JetStream exactly once (it drops a repeated Nats-Msg-Id, the event ID).
func TestBrokerKilledMidDrain(t *testing.T) {
	rabbit, err := amqp.Dial(testRabbitURL)
	if err != nil {
		t.Fatalf("RabbitMQ at %s: %v", testRabbitURL, err)
	}
	defer rabbit.Close()
	ch, err := rabbit.Channel()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(testNATSURL)
	if err != nil {
		t.Fatalf("NATS at %s: %v", testNATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL)
		name := fmt.Sprintf("sbkill%d", time.Now().UnixNano())
		q, err := ch.QueueDeclare(name, false, false, true, false, nil) // the test connection's own
		if err != nil {
			t.Fatal(err)
		}
		stream, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
			Storage: jetstream.MemoryStorage, Duplicates: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
		key := f.keyFor(dbURL, "webhooks:write")
		// Short leases: the restarted server takes over the dead one's claims within seconds.
		env := append([]string{"SWITCHBOARD_WEBHOOK_TIMEOUT=2s", "SWITCHBOARD_WEBHOOK_LEASE=3s"}, webhookEnv...)

		setup := runServer(t, dbURL, "", env...)
		setup.created(key, "/api/v1/webhooks", fmt.Sprintf(`{"url":%q,"type":"rabbitmq","events":["*"],"rabbitmq":{"routing_key":%q}}`,
			testRabbitURL, q.Name))
		setup.created(key, "/api/v1/webhooks", fmt.Sprintf(`{"url":%q,"type":"nats","events":["*"],"nats":{"subject":%q}}`,
			testNATSURL, name+".{type}"))
		setup.stop()

		// The backlog waits while no server runs; one starts draining it and is killed a tenth of the way.
		ids := f.emitMany(n)
		first := runServer(t, dbURL, "", env...)
		await.Equal(t, "a tenth of the backlog delivered", func() bool { return f.succeeded() >= 2*n/10 }, true)
		first.kill()
		killedAt := f.deliveriesBy()
		// What may repeat: the deliveries claimed and not yet recorded at the kill — the attempts running (at most
		// the endpoint's concurrency) and those whose broker confirmation waited for its record, which the engine
		// batches while the next attempts start. Their leases (3 s) still hold right after the kill.
		unrecorded := f.leasedAt(time.Now())
		if killedAt[store.DeliveryPending] == 0 {
			t.Fatalf("the backlog was drained before the kill (%v): nothing was cut off", killedAt)
		}

		second := runServer(t, dbURL, "", env...)
		await.Equal(t, "every delivery to succeed after the restart", f.succeeded, 2*n)
		if by := f.deliveriesBy(); len(by) != 1 {
			t.Fatalf("deliveries by status %v, want all %d succeeded", by, 2*n)
		}
		second.stop()

		// RabbitMQ: every event at least once; a repeat only of what was in flight at the kill.
		seen := map[string]int{}
		for {
			msg, ok, err := ch.Get(q.Name, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			seen[msg.MessageId]++
		}
		repeats := 0
		for _, id := range ids {
			switch c := seen[id]; {
			case c == 0:
				t.Errorf("event %s never reached RabbitMQ", id)
			case c > 1:
				repeats += c - 1
			}
		}
		if len(seen) != n {
			t.Errorf("RabbitMQ got %d distinct message IDs, want %d", len(seen), n)
		}
		if repeats > unrecorded {
			t.Errorf("RabbitMQ got %d repeats; only the %d deliveries claimed and not recorded at the kill may repeat", repeats, unrecorded)
		}

		// JetStream: exactly once, whatever was sent twice.
		info, err := stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != n {
			t.Fatalf("the stream holds %d messages, want %d", info.State.Msgs, n)
		}
		got := map[string]bool{}
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			msg, err := stream.GetMsg(context.Background(), seq)
			if err != nil {
				t.Fatal(err)
			}
			got[msg.Header.Get(jetstream.MsgIDHeader)] = true
		}
		for _, id := range ids {
			if !got[id] {
				t.Errorf("event %s is not in the stream", id)
			}
		}
		t.Logf("killed with %v (%d claimed, not recorded); RabbitMQ repeats %d, JetStream %d messages", killedAt, unrecorded, repeats, info.State.Msgs)
	})
}

// keyFor makes a key of the fixture's workspace with the CLI and returns its secret.
func (f *fixture) keyFor(dbURL, scopes string) string {
	f.t.Helper()
	out, stderr, code := cli(f.t, dbURL, "key", "create", "--workspace", f.ws.ID, "--name", "k", "--scopes", scopes, "--json")
	if code != 0 {
		f.t.Fatalf("key create: %s", stderr)
	}
	var key struct{ Secret string }
	if err := json.Unmarshal([]byte(out), &key); err != nil {
		f.t.Fatal(err)
	}
	return key.Secret
}
