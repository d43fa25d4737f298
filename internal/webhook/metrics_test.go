package webhook_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// metricValue sums the samples of a metric family whose labels include want (a counter's value, a gauge's, or a
// histogram's count); ok is false when the family is missing.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
		return v, true
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for name, value := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// The dispatcher's metrics appear on the registry they are given and follow the work: attempts by outcome and
// class, their durations, final statuses, and the queue gauges read from the database.
func TestMetrics(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, receivertest.Statuses(http.StatusServiceUnavailable))
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		d := webhook.NewDispatcher(db, h.box, h.guard, quiet(webhook.Config{Schedule: []time.Duration{0, 10 * time.Millisecond}}))
		reg := prometheus.NewRegistry()
		reg.MustRegister(d.Collectors()...)
		value := func(name string, labels map[string]string) float64 {
			v, ok := metricValue(t, reg, name, labels)
			if !ok {
				t.Fatalf("metric %s is missing", name)
			}
			return v
		}
		delivered := map[string]string{"outcome": "delivered", "error_class": "none"}
		failed := map[string]string{"outcome": "failed", "error_class": "http_5xx"}
		depth0, attempts0 := value("switchboard_webhook_queue_depth", nil), value("switchboard_webhook_attempts_total", delivered)

		evs := h.emitN(3, "link.created")
		if depth := value("switchboard_webhook_queue_depth", nil); depth < depth0+3 {
			t.Errorf("queue depth %v after queuing 3 deliveries, was %v", depth, depth0)
		}
		await.Until(t, "the oldest due delivery to age", func() float64 { return value("switchboard_webhook_oldest_pending_seconds", nil) },
			func(age float64) bool { return age > 0 })

		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		t.Cleanup(func() { stop(); <-done })
		h.awaitSucceeded("every delivery", evs, e.ID)
		if got := value("switchboard_webhook_attempts_total", delivered) - attempts0; got != 3 {
			t.Errorf("delivered attempts counted %v, want 3", got)
		}
		if got := value("switchboard_webhook_attempts_total", failed); got != 1 {
			t.Errorf("failed attempts (http_5xx) counted %v, want 1", got)
		}
		if got := value("switchboard_webhook_attempt_duration_seconds", nil); got != 4 {
			t.Errorf("attempt durations observed %v, want 4", got)
		}
		if got := value("switchboard_webhook_deliveries_total", map[string]string{"status": "succeeded"}); got != 3 {
			t.Errorf("succeeded deliveries counted %v, want 3", got)
		}
		if got := value("switchboard_webhook_queue_depth", nil); got != depth0 {
			t.Errorf("queue depth %v once delivered, want %v", got, depth0)
		}
		if got := value("switchboard_webhook_oldest_pending_seconds", nil); got != 0 {
			t.Errorf("oldest pending %v s with nothing due", got)
		}
	})
}
