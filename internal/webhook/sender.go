package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/telemetry"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// Sender signs events and posts them to endpoints through the SSRF-guarded client: the one way anything in
// Switchboard sends a webhook (the dispatcher's attempts and the API's test ping).
type Sender struct {
	box     *sealbox.Box
	client  *http.Client
	timeout time.Duration
	// brokers publish to the endpoints of the broker types, through connections kept between attempts.
	brokers *brokers
}

// NewSender returns a Sender whose requests (and broker publishes) are bounded by timeout.
func NewSender(box *sealbox.Box, guard *egress.Guard, timeout time.Duration) *Sender {
	return &Sender{box: box, client: guard.Client(timeout), timeout: timeout, brokers: &brokers{guard: guard}}
}

// Close closes the connections to brokers; a later publish opens them again.
func (s *Sender) Close() { s.brokers.close() }

// Sent is what one POST to a receiver produced.
type Sent struct {
	StartedAt time.Time
	Duration  time.Duration
	// StatusCode is nil when the receiver did not answer.
	StatusCode *int
	// Excerpt is the start of the response body (at most ExcerptLen bytes) as storable text (see cutText), nil when
	// empty.
	Excerpt *string
	Outcome Outcome
	// RetryAfter is the response's Retry-After header ("" when absent).
	RetryAfter string
	// ResponseHeaders are the response's headers as the delivery log keeps them (ResponseHeadersOf); nil without a
	// response.
	ResponseHeaders map[string]string
	// Signature is the webhook-signature header the request was sent with.
	Signature string
}

// ExcerptLen is how much of a response body the delivery log keeps.
const ExcerptLen = 512

// Envelope is the body of every delivery: the event as the API's event list shows it, so a receiver and a client
// pulling missed events parse the same document.
type Envelope struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Timestamp   string          `json:"timestamp"`
	APIVersion  string          `json:"api_version"`
	WorkspaceID string          `json:"workspace_id"`
	Data        json.RawMessage `json:"data"`
}

// EnvelopeOf returns the envelope of a stored event.
func EnvelopeOf(ev events.Event) Envelope {
	return Envelope{ID: ev.ID, Type: ev.Type, Timestamp: ev.CreatedAt.UTC().Format(time.RFC3339Nano), APIVersion: "v1",
		WorkspaceID: ev.WorkspaceID, Data: ev.Data}
}

// Send posts ev to endpoint e, signed with its secret (and, during a rotation's grace period, its previous one), with
// its static headers. A failed attempt is not an error: it is classified in Sent.Outcome. An error means nothing was
// sent (a secret or the headers could not be opened).
func (s *Sender) Send(ctx context.Context, e store.WebhookEndpoint, ev store.Event) (sent Sent, err error) {
	ctx, span := telemetry.Start(ctx, "webhook attempt", trace.SpanKindInternal,
		attribute.String("switchboard.webhook_id", e.ID), attribute.String("switchboard.event_id", ev.ID),
		attribute.String("switchboard.event_type", ev.Type), attribute.String("switchboard.workspace_id", ev.WorkspaceID))
	defer func() {
		if sent.StatusCode != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", *sent.StatusCode))
		}
		if err != nil || sent.Outcome.Result != Delivered {
			span.SetStatus(codes.Error, sent.Outcome.Class)
		}
		span.End()
	}()
	if IsBroker(e.Type) {
		return s.publish(ctx, e, ev)
	}
	keys, err := s.signingKeys(e, time.Now())
	if err != nil {
		return Sent{}, err
	}
	static, err := OpenHeaders(s.box, e.SealedHeaders, e.ID)
	if err != nil {
		return Sent{}, err
	}
	body, err := Body(ev)
	if err != nil {
		return Sent{}, err
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return Sent{}, err
	}
	for name, value := range static {
		req.Header.Set(name, value)
	}
	// The signature headers are set last: static headers can never replace them.
	signature := Sign(keys, ev.ID, start, body)
	for name, values := range Headers(ev.ID, start, signature) {
		req.Header[name] = values
	}
	r := Sent{StartedAt: start, Signature: signature}
	resp, err := s.client.Do(req)
	r.Duration = time.Since(start)
	status := 0
	if resp != nil {
		status, r.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, ExcerptLen+1))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
		_ = resp.Body.Close()
		r.StatusCode = &status
		r.ResponseHeaders = ResponseHeadersOf(resp.Header)
		if t := cutText(excerpt, ExcerptLen); t != "" {
			r.Excerpt = &t
		}
	}
	// A target the policy refuses at dial time, or a scheme it no longer allows (plain http after the operator turned
	// it off), is not allowed: classed "blocked" like a blocked address.
	if errors.Is(err, egress.ErrBlocked) || errors.Is(err, egress.ErrInvalidURL) {
		err = fmt.Errorf("%w: %w", ErrBlocked, err)
	}
	r.Outcome = Classify(status, err)
	return r, nil
}

// Body is the body of every delivery of ev: its envelope as JSON, the bytes that are signed.
func Body(ev store.Event) ([]byte, error) { return EventBody(events.Of(ev)) }

// EventBody is Body of an event as the services give it.
func EventBody(ev events.Event) ([]byte, error) { return json.Marshal(EnvelopeOf(ev)) }

// Bounds of the response headers the delivery log keeps of an attempt.
const (
	maxResponseHeaders     = 32
	maxResponseHeaderValue = 256
)

// ResponseHeadersOf is what the delivery log keeps of a receiver's response headers: at most 32, each value cut to
// 256 bytes and repeated values joined with ", ", without Set-Cookie (a receiver's session is none of the log's
// business).
func ResponseHeadersOf(h http.Header) map[string]string {
	out := make(map[string]string, min(len(h), maxResponseHeaders))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if len(out) == maxResponseHeaders {
			break
		}
		if strings.EqualFold(name, "Set-Cookie") {
			continue
		}
		out[name] = cutText([]byte(strings.Join(h[name], ", ")), maxResponseHeaderValue)
	}
	return out
}

// signingKeys opens the endpoint's secret and, during a rotation's grace period, the previous one.
func (s *Sender) signingKeys(e store.WebhookEndpoint, now time.Time) ([][]byte, error) {
	open := func(sealed string) ([]byte, error) {
		secret, err := s.box.Open(sealed, []byte(e.ID))
		if err != nil {
			return nil, err
		}
		return ParseSecret(string(secret))
	}
	key, err := open(e.Secret)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{key}
	if e.PreviousSecret != nil && e.PreviousSecretUntil != nil && now.Before(*e.PreviousSecretUntil) {
		prev, err := open(*e.PreviousSecret)
		if err != nil {
			return nil, err
		}
		keys = append(keys, prev)
	}
	return keys, nil
}

// cutText is the start of a receiver's answer (its body, a header's value) as the delivery log keeps it: at most n
// bytes, without a character the cut would split, as text both databases store (U+0000 and bytes that are not
// UTF-8 shown as U+FFFD, see package text). A receiver's answer may be anything at all, and one that could not be
// stored would fail the write of every outcome recorded with it.
func cutText(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return text.Bytes(b)
}
