package xmpp

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/xmpp/prosodytest"
)

// timedSink records when receipts and inbound messages reach the sink.
type timedSink struct {
	*recorder
	mu        sync.Mutex
	delivered map[string]time.Time
	inbound   map[string]time.Time
	arrived   chan string // inbound ids, as they reach the sink
}

func (s *timedSink) Receipt(ctx context.Context, r channels.Receipt) error {
	s.mu.Lock()
	if r.Status == "delivered" {
		s.delivered[r.ProviderID] = time.Now()
	}
	s.mu.Unlock()
	return nil
}

func (s *timedSink) Inbound(ctx context.Context, m channels.Inbound) error {
	s.mu.Lock()
	s.inbound[m.ProviderID] = time.Now()
	s.mu.Unlock()
	s.arrived <- m.ProviderID
	return nil
}

func (s *timedSink) count(m map[string]time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(m)
}

// BenchmarkProsody measures the provider through a real Prosody on loopback (make bench runs it): one instance
// sending to a client that answers receipts, one message at a time as the send queue hands them over (each Send
// waits for the server's acknowledgement), then the other way, one message at a time, from the client's send to the
// sink.
func BenchmarkProsody(b *testing.B) {
	srv := prosodytest.Start(b)
	account := srv.Register("alice", "secret-a")
	bobAccount := srv.Register("bob", "secret-b")
	sink := &timedSink{recorder: newRecorder(), delivered: map[string]time.Time{}, inbound: map[string]time.Time{}, arrived: make(chan string, 1)}
	s, err := New(Options{PingInterval: time.Hour}).Open(channels.Instance{ID: "ins_bench", Config: srv.Config(account, "secret-a")}, sink)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	await.Until(b, "the session to connect", sink.connections, func(n int) bool { return n > 0 })
	bob := dialPeer(b, srv, bobAccount, "secret-b")
	bob.AnswerReceipts()
	sender := s.(channels.Sender)

	b.Run("send", func(b *testing.B) {
		sent := make([]time.Time, b.N)
		start := time.Now()
		b.ResetTimer()
		for i := range b.N {
			sent[i] = time.Now()
			if _, err := sender.Send(ctx, channels.Outbound{MessageID: fmt.Sprintf("msg_b%d_%d", b.N, i), Chat: bobAccount, Type: channels.TypeText, Text: "benchmark"}); err != nil {
				b.Fatal(err)
			}
		}
		toSent := time.Since(start)
		await.Until(b, "every receipt", func() int { return sink.count(sink.delivered) }, func(n int) bool { return n >= b.N })
		toDelivered := time.Since(start)
		b.StopTimer()
		var lat []time.Duration
		sink.mu.Lock()
		for i := range b.N {
			lat = append(lat, sink.delivered[fmt.Sprintf("msg_b%d_%d", b.N, i)].Sub(sent[i]))
		}
		clear(sink.delivered)
		sink.mu.Unlock()
		b.ReportMetric(float64(b.N)/toSent.Seconds(), "sent/s")
		b.ReportMetric(float64(b.N)/toDelivered.Seconds(), "delivered/s")
		b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "delivered-p50-ms")
		b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "delivered-p99-ms")
	})

	b.Run("inbound", func(b *testing.B) {
		var lat []time.Duration
		b.ResetTimer()
		for i := range b.N {
			id := fmt.Sprintf("in_b%d_%d", b.N, i)
			start := time.Now()
			bob.send(`<message to="` + account + `" id="` + id + `" type="chat"><body>benchmark</body></message>`)
			if got := await.Receive(b, "the message at the sink", sink.arrived); got != id {
				b.Fatalf("arrived %s, want %s", got, id)
			}
			sink.mu.Lock()
			lat = append(lat, sink.inbound[id].Sub(start))
			sink.mu.Unlock()
		}
		b.StopTimer()
		b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "inbound-p50-ms")
		b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "inbound-p99-ms")
	})
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
