// Package telemetry traces the server with OpenTelemetry, exported over OTLP/HTTP, off unless an endpoint is set:
// a span for each API request (named by its operationId, continuing a caller's W3C traceparent), a span for each
// database statement run on behalf of a traced operation, a span for each outbound HTTP call (webhook attempts,
// provider APIs) that also carries traceparent to the receiver, and a root span for each webhook attempt.
//
// Spans never hold secrets: no URL path or query (Telegram's bot token is in its path, an ingest token in ours), no
// header, no SQL text or argument, no error message of a remote — only routes, operation names, hosts, statuses
// and IDs. While tracing is off the global tracer is OpenTelemetry's no-op one: a span costs an interface call.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of every span.
const Name = "github.com/switchboard/switchboard"

// Options configure tracing.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL of a collector (http://collector:4318); traces go to its /v1/traces. Empty
	// leaves tracing off.
	Endpoint string
	// SampleRatio is the share of new traces kept (0 to 1); a caller's sampled traceparent is always followed.
	SampleRatio float64
	// Version is the service.version resource attribute.
	Version string
}

// Setup installs the tracer provider and the W3C propagator globally when o.Endpoint is set and returns the function
// that flushes and stops it (a no-op when tracing is off).
func Setup(ctx context.Context, o Options) (shutdown func(context.Context) error, err error) {
	if o.Endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the OTLP endpoint must be an http(s) URL such as http://collector:4318, not %q", o.Endpoint)
	}
	if o.SampleRatio < 0 || o.SampleRatio > 1 {
		return nil, errors.New("the trace sample ratio must be between 0 and 1")
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.JoinPath("v1", "traces").String())}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "switchboard"),
		attribute.String("service.version", o.Version))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
	)
	otel.SetTracerProvider(provider)
	tracer.Store(tracerBox{provider.Tracer(Name)})
	enabled.Store(true)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return provider.Shutdown, nil
}

// Tracer is the tracer of every span of the server (no-op while tracing is off).
func Tracer() trace.Tracer { return tracer.Load().(tracerBox).Tracer }

// tracer is the tracer of Setup's provider, or a no-op one while tracing is off. It is kept here rather than
// asked of the global provider on every span: before a provider is set, otel.Tracer takes a lock and a map entry
// each call, which every request (redirects included) would pay for nothing.
var tracer atomic.Value

type tracerBox struct{ trace.Tracer }

// enabled is set once Setup installed a provider. Until then the calls made on every request (Server, EndServer)
// return at once: even a no-op tracer costs the options and attributes built for it, a few percent of a redirect.
var enabled atomic.Bool

// off is the span handed out while tracing is off: it records nothing and ends at no cost.
var off = trace.SpanFromContext(context.Background())

func init() { tracer.Store(tracerBox{noop.NewTracerProvider().Tracer(Name)}) }

// Start starts a span as a child of ctx's span (or a root).
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
