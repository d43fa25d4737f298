package handlers_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// TestXMPPThroughAPIMeasure is a measurement, not a test: `make bench` runs it (SWITCHBOARD_BENCH_XMPP=1) and it
// logs, through the whole product — API, send queue, XMPP provider, a real Prosody on loopback, a plain client that
// answers receipts — messages/s from accept to sent and to delivered for one instance and one chat (pacing off, one
// message in flight as the queue hands a chat's messages over), and inbound message → signed webhook latency. It
// asserts nothing about time.
func TestXMPPThroughAPIMeasure(t *testing.T) {
	if os.Getenv("SWITCHBOARD_BENCH_XMPP") == "" {
		t.Skip("a measurement: make bench runs it with SWITCHBOARD_BENCH_XMPP=1")
	}
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		const out, in = 500, 300
		srv := prosodytest.Start(t)
		alice, bob := srv.Register("alice", "secret-a"), srv.Register("bob", "secret-b")
		e := newXMPPEnv(t, db)
		rc := receivertest.New(t, nil)
		if res := e.post("/api/v1/webhooks", `{"url":"`+rc.URL+`/hook","events":["message.received"]}`); res.StatusCode != 201 {
			t.Fatalf("webhook: %d %s", res.StatusCode, res.body)
		}
		cfg, _ := json.Marshal(srv.Config(alice, "secret-a"))
		inst := e.instance("xmpp", string(cfg))
		e.post("/api/v1/instances/"+inst.Id+"/connect", "")
		e.status(inst.Id, "connected")
		peer := srv.Dial(bob, "secret-b")
		peer.AnswerReceipts()

		accepted := make(map[string]time.Time, out)
		var ids []string
		start := time.Now()
		for i := range out {
			res := e.post("/api/v1/instances/"+inst.Id+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"m%d"}`, bob, i))
			if res.StatusCode != 202 {
				t.Fatalf("send: %d %s", res.StatusCode, res.body)
			}
			var m gen.Message
			res.json(t, &m)
			accepted[m.Id] = time.Now()
			ids = append(ids, m.Id)
		}
		last := awaitMessage(e, inst.Id, ids[len(ids)-1], "delivered")
		var toSent, toDelivered []time.Duration
		var lastSent, lastDelivered time.Time
		for _, id := range ids {
			m := last
			if id != last.Id {
				m = awaitMessage(e, inst.Id, id, "delivered")
			}
			for _, h := range m.StatusHistory {
				switch h.Status {
				case "sent":
					toSent = append(toSent, h.At.Sub(accepted[id]))
					lastSent = latest(lastSent, h.At)
				case "delivered":
					toDelivered = append(toDelivered, h.At.Sub(accepted[id]))
					lastDelivered = latest(lastDelivered, h.At)
				}
			}
		}
		t.Logf("XMPP through the API (%s): %d messages, accept → sent %.0f msgs/s (p50 %s, p99 %s), accept → delivered "+
			"%.0f msgs/s (p50 %s, p99 %s)", db.Dialect(), out, float64(out)/lastSent.Sub(start).Seconds(), pct(toSent, 0.5),
			pct(toSent, 0.99), float64(out)/lastDelivered.Sub(start).Seconds(), pct(toDelivered, 0.5), pct(toDelivered, 0.99))

		// Inbound: bob's messages, one every 5 ms, to signed webhooks at the receiver.
		sentAt := make(map[string]time.Time, in)
		for i := range in {
			id := fmt.Sprintf("in%d", i)
			sentAt[id] = time.Now()
			peer.Send(`<message to="` + alice + `" id="` + id + `" type="chat"><body>` + id + `</body></message>`)
			time.Sleep(5 * time.Millisecond)
		}
		arrivals := await.Until(t, "every inbound webhook", func() []receivertest.Request { return rc.Requests() },
			func(r []receivertest.Request) bool { return len(r) >= in })
		var lat []time.Duration
		for _, r := range arrivals {
			var ev struct {
				Data struct {
					Message gen.Message `json:"message"`
				} `json:"data"`
			}
			if json.Unmarshal(r.Body, &ev) != nil || ev.Data.Message.Text == nil {
				continue
			}
			if at, ok := sentAt[*ev.Data.Message.Text]; ok {
				lat = append(lat, r.At.Sub(at))
			}
		}
		t.Logf("XMPP through the API (%s): client's send → signed message.received at the receiver, %d messages: "+
			"p50 %s, p99 %s", db.Dialect(), len(lat), pct(lat, 0.5), pct(lat, 0.99))
	})
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pct is the p quantile of ds, rounded for a log line.
func pct(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "—"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))].Round(100 * time.Microsecond).String()
}
