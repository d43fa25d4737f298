package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/store"
)

// metrics are the dispatcher's Prometheus metrics. Counters and the histogram count this process's work; the queue
// gauges describe the whole database (every process reports the same values).
type metrics struct {
	attempts   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	deliveries *prometheus.CounterVec
	pruned     prometheus.Counter
	queue      *queueCollector
	// engine are the queue engine's collectors (the in-flight gauge among them).
	engine []prometheus.Collector
}

// Outcome labels of the attempt metrics.
var outcomeLabels = map[Result]string{Delivered: "delivered", Failed: "failed", Gone: "gone"}

func newMetrics(d *Dispatcher) *metrics {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_webhook_attempts_total",
			Help: `Webhook delivery attempts by outcome (delivered, failed, gone) and error class ("none" when delivered).`,
		}, []string{"outcome", "error_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_webhook_attempt_duration_seconds",
			Help:    "Duration of webhook delivery attempts, from the request to the end of the response, by outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_webhook_deliveries_total",
			Help: "Webhook deliveries that reached a final status: succeeded, or failed once every retry was spent (or the endpoint was gone).",
		}, []string{"status"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_webhook_pruned_events_total",
			Help: "Events deleted, with their deliveries and attempts, after the retention period.",
		}),
		engine: d.engine.Collectors(),
		queue: &queueCollector{db: d.db, log: d.log,
			depth: prometheus.NewDesc("switchboard_webhook_queue_depth",
				"Pending webhook deliveries in the database, due now or later (paused endpoints included).", nil, nil),
			oldest: prometheus.NewDesc("switchboard_webhook_oldest_pending_seconds",
				"How long the oldest due delivery of an active endpoint has waited (0 when none is due).", nil, nil),
		},
	}
	// The usual series exist from the start, so rates and alerts work before the first attempt.
	m.attempts.WithLabelValues("delivered", "none")
	m.attempts.WithLabelValues("gone", ClassGone)
	for _, o := range outcomeLabels {
		m.duration.WithLabelValues(o)
	}
	m.deliveries.WithLabelValues(store.DeliverySucceeded)
	m.deliveries.WithLabelValues(store.DeliveryFailed)
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.attempts, m.duration, m.deliveries, m.pruned, m.queue}, m.engine...)
}

func (m *metrics) observeAttempt(s Sent) {
	outcome, class := outcomeLabels[s.Outcome.Result], s.Outcome.Class
	if class == "" {
		class = "none"
	}
	m.attempts.WithLabelValues(outcome, class).Inc()
	m.duration.WithLabelValues(outcome).Observe(s.Duration.Seconds())
}

// observeDelivery counts a delivery whose attempt was just recorded, if that made its status final.
func (m *metrics) observeDelivery(status string) {
	if status == store.DeliverySucceeded || status == store.DeliveryFailed {
		m.deliveries.WithLabelValues(status).Inc()
	}
}

// queueCollector reads the queue gauges from the database at scrape time (two indexed queries), so they are exact
// whichever process queued or delivered.
type queueCollector struct {
	db            *store.DB
	log           *slog.Logger
	depth, oldest *prometheus.Desc
}

// queueScrapeTimeout bounds the queries of one scrape.
const queueScrapeTimeout = 2 * time.Second

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
}

// Collect implements prometheus.Collector. When the database does not answer the gauges are left out of the scrape
// (the rest of /metrics still answers) and a warning is logged.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), queueScrapeTimeout)
	defer cancel()
	now := time.Now()
	st, err := c.db.Deliveries.QueueStats(ctx, now)
	if err != nil {
		c.log.Warn("webhook queue metrics unavailable", "error", err)
		return
	}
	age := 0.0
	if st.OldestDue != nil {
		age = max(0, now.Sub(*st.OldestDue).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
