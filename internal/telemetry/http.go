package telemetry

import (
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport makes a client span of each request next sends and passes the trace on in traceparent. The span names
// the method and the host only: paths and queries can hold credentials (a Telegram bot token is in its path).
func Transport(next http.RoundTripper) http.RoundTripper { return transport{next: next} }

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host, port, err := net.SplitHostPort(req.URL.Host)
	if err != nil {
		host, port = req.URL.Host, ""
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", req.Method),
		attribute.String("server.address", host), attribute.String("url.scheme", req.URL.Scheme)}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	ctx, span := Start(req.Context(), "HTTP "+req.Method, trace.SpanKindClient, attrs...)
	if !span.IsRecording() {
		span.End()
		return t.next.RoundTrip(req)
	}
	defer span.End()
	req = req.Clone(ctx) // a RoundTripper must not change the caller's request
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	res, err := t.next.RoundTrip(req)
	if err != nil {
		span.SetStatus(codes.Error, "no response") // the error's text can quote the URL
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode))
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	return res, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach next's pool.
func (t transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Server starts the server span of a request: a child of the caller's traceparent, named by the operation (an
// operationId, or the route), with the route template — never the path, which can hold an ingest token.
func Server(req *http.Request, operation, route string) (*http.Request, trace.Span) {
	if !enabled.Load() {
		return req, off // tracing is off: the request is not copied (redirects are the hot path)
	}
	ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	ctx, span := Start(ctx, operation, trace.SpanKindServer,
		attribute.String("http.request.method", req.Method), attribute.String("http.route", route))
	if !span.SpanContext().IsValid() {
		return req, span // not sampled and no caller's trace: nothing to pass on
	}
	return req.WithContext(ctx), span
}

// EndServer records the answer's status on a server span and ends it; 5xx answers are errors (4xx are the
// client's, as OpenTelemetry's HTTP conventions say).
func EndServer(span trace.Span, status int, requestID string) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("switchboard.request_id", requestID))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}
