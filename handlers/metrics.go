package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard/switchboard/store"
)

// metrics are the server's Prometheus metrics, in a registry of its own (several servers can run in one test).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series holds the resolved series by seriesKey.
	series sync.Map
}

func newMetrics(db *store.DB) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_http_requests_total",
			Help: "HTTP requests by operationId (or route), method and status.",
		}, []string{"operation", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_http_request_duration_seconds",
			Help:    "HTTP request latency by operationId (or route).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"operation"}),
	}
	faults := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "switchboard_store_faults_total",
		Help: "Database operations that failed because of the database (connection, busy, I/O, locking protocol, corruption), not the statement.",
	}, func() float64 { return float64(db.Faults()) })
	m.registry.MustRegister(m.requests, m.duration, faults,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(operation, method string, status int, elapsed time.Duration) {
	method = methodLabel(method)
	key := seriesKey{operation, method, status}
	s, ok := m.series.Load(key)
	if !ok {
		// Resolving labels hashes them and takes the vector's lock; a request finds its series in a map read
		// instead. The label values are bounded (operations, methods, statuses), and so is this map.
		s, _ = m.series.LoadOrStore(key, series{
			requests: m.requests.WithLabelValues(operation, method, strconv.Itoa(status)),
			duration: m.duration.WithLabelValues(operation),
		})
	}
	s.(series).requests.Inc()
	s.(series).duration.Observe(elapsed.Seconds())
}

type seriesKey struct {
	operation, method string
	status            int
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// methodLabel bounds the method label: anyone can send any method, and each new label value is a new series kept
// for the life of the process. The methods of HTTP keep their name; everything else is "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// RegisterMetrics adds collectors of the process's engines (the webhook dispatcher, the click recorder) to the
// server's registry, so /metrics shows them too. Returns an error if one is already registered or clashes with an
// existing metric.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
