package clicks

import "github.com/prometheus/client_golang/prometheus"

// metrics account for every click: received = persisted + discarded + in flight + spooled (until replayed) +
// dropped. Dropped stays 0 unless the disk damages the spool or the database and the disk fail together at
// shutdown; refused counts redirects not served because memory and the spool were both full.
type metrics struct {
	received, persisted, spooled, replayed, dropped, refused prometheus.Counter
	discarded                                                *prometheus.CounterVec
	inFlight, spoolBytes                                     prometheus.GaugeFunc
	batch                                                    prometheus.Histogram
}

func newMetrics(r *Recorder) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_clicks_" + name + "_total", Help: help})
	}
	m := &metrics{
		received:  counter("received", "Clicks handed to the recorder by redirects."),
		persisted: counter("persisted", "Clicks written to the database (new rows; replays included)."),
		spooled:   counter("spooled", "Clicks written to the spool on disk because the database failed or fell behind."),
		replayed:  counter("replayed", "Clicks read back from the spool and committed to the database."),
		dropped: counter("dropped", "Clicks lost: damaged spool records, or clicks neither the database nor the disk "+
			"took at shutdown. Stays 0 in a healthy installation."),
		refused: counter("refused", "Redirects answered 503 because the click buffer was full and the spool failing."),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_clicks_discarded_total",
			Help: "Clicks deliberately not stored: link_deleted (the link was deleted before the click was written), " +
				"already_recorded (a replayed click that was stored before).",
		}, []string{"reason"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_click_batch_duration_seconds",
			Help:    "Time to enrich and write one batch of clicks in one transaction.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	m.discarded.WithLabelValues("link_deleted")
	m.discarded.WithLabelValues("already_recorded")
	m.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_clicks_in_flight", Help: "Clicks in memory: buffered or in a batch being written.",
	}, func() float64 { return float64(r.inFlight()) })
	m.spoolBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_clicks_spool_bytes", Help: "Size of the spool files waiting to be replayed.",
	}, func() float64 { return float64(r.spool.bytes()) })
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.received, m.persisted, m.spooled, m.replayed, m.dropped, m.refused, m.discarded,
		m.inFlight, m.spoolBytes, m.batch}
}
