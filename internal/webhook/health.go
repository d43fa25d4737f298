package webhook

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// maxHealthAttempts bounds the attempts Health reads: an endpoint busier than that is judged by its latest ones.
const maxHealthAttempts = 50_000

// Health is how an endpoint's attempts went over a window, in total and by hour (oldest first).
type Health struct {
	Since, Until time.Time
	Attempts     int
	Succeeded    int
	// P50 and P95 are the attempts' durations at those percentiles (zero without attempts).
	P50, P95 time.Duration
	Hours    []HealthHour
	// Partial is set when the window held more than maxHealthAttempts attempts: the figures are of the latest ones.
	Partial bool
}

// HealthHour is the attempts of the hour that starts at Start.
type HealthHour struct {
	Start             time.Time
	Succeeded, Failed int
}

// SuccessRate is the share of attempts that succeeded, 0 to 1; 1 without attempts.
func (h Health) SuccessRate() float64 {
	if h.Attempts == 0 {
		return 1
	}
	return float64(h.Succeeded) / float64(h.Attempts)
}

// Health returns how the attempts of an endpoint of a workspace went over the window that ends now and lasts
// window, whole UTC hours. Returns a NotFound problem if the endpoint is not in the workspace.
func (s *Service) Health(ctx context.Context, workspaceID, id string, window time.Duration) (Health, error) {
	if _, err := s.stored(ctx, workspaceID, id); err != nil {
		return Health{}, err
	}
	now := time.Now().UTC()
	h := Health{Until: now, Since: now.Truncate(time.Hour).Add(-window + time.Hour)}
	as, err := s.db.Deliveries.EndpointAttempts(ctx, id, h.Since, maxHealthAttempts+1)
	if err != nil {
		return Health{}, err
	}
	if len(as) > maxHealthAttempts {
		as, h.Partial = as[:maxHealthAttempts], true
	}
	for t := h.Since; t.Before(now); t = t.Add(time.Hour) {
		h.Hours = append(h.Hours, HealthHour{Start: t})
	}
	durations := make([]int, len(as))
	for i, a := range as {
		durations[i] = a.DurationMS
		hour := min(int(a.StartedAt.Sub(h.Since)/time.Hour), len(h.Hours)-1)
		if a.ErrorClass == nil {
			h.Succeeded++
			h.Hours[hour].Succeeded++
		} else {
			h.Hours[hour].Failed++
		}
	}
	h.Attempts = len(as)
	if len(durations) > 0 {
		slices.Sort(durations)
		at := func(p float64) time.Duration {
			return time.Duration(durations[int(p*float64(len(durations)-1))]) * time.Millisecond
		}
		h.P50, h.P95 = at(0.50), at(0.95)
	}
	return h, nil
}

// SignedRequest is a delivery attempt's request as the receiver got it. Static headers show their names only: their
// values are the endpoint owner's secrets, which the API never shows either.
type SignedRequest struct {
	Method, URL string
	// Headers are in the order they are shown, Switchboard's own first.
	Headers []RequestHeader
	Body    []byte
}

// RequestHeader is one header of a SignedRequest; Hidden hides its value.
type RequestHeader struct {
	Name, Value string
	Hidden      bool
}

// Request rebuilds the request of an attempt of a delivery to endpoint e: the envelope of the delivery's event as
// the bytes that were signed, and the headers with the signature the attempt was sent with. ok is false for an
// attempt logged before signatures were kept.
func (s *Service) Request(e Endpoint, d DeliveryDetail, a Attempt) (r SignedRequest, ok bool, err error) {
	if a.Signature == nil {
		return SignedRequest{}, false, nil
	}
	body, err := EventBody(d.Event)
	if err != nil {
		return SignedRequest{}, false, err
	}
	r = SignedRequest{Method: http.MethodPost, URL: e.URL, Body: body}
	sent := Headers(d.Event.ID, a.StartedAt, *a.Signature)
	for _, name := range []string{HeaderID, HeaderTimestamp, HeaderSignature, "Content-Type", "User-Agent"} {
		r.Headers = append(r.Headers, RequestHeader{Name: name, Value: sent.Get(name)})
	}
	for _, name := range e.HeaderNames {
		r.Headers = append(r.Headers, RequestHeader{Name: name, Hidden: true})
	}
	return r, true, nil
}

// EventDeliveries returns the deliveries of events of a workspace by event ID, one per endpoint each went to. An
// event of another workspace has none. Its errors are internal.
func (s *Service) EventDeliveries(ctx context.Context, workspaceID string, eventIDs []string) (map[string][]Delivery, error) {
	ds, err := s.db.Deliveries.ForEvents(ctx, workspaceID, eventIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Delivery, len(eventIDs))
	for _, d := range ds {
		out[d.EventID] = append(out[d.EventID], deliveryOf(d))
	}
	return out, nil
}
