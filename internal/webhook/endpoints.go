package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Endpoint rules the API's schema does not state.
const (
	// defaultGracePeriod is how long a rotated secret keeps signing when RotateSecret is not told.
	defaultGracePeriod = 24 * time.Hour
	// maxRecoverAge is how far back recover and enable's recover_since reach.
	maxRecoverAge = 14 * 24 * time.Hour
	// maxHeaderNameLen bounds a static header's name (header_names items are at most 256 characters).
	maxHeaderNameLen = 256
)

// pingType is the event type of a test when none is asked for; pingMessage is its data.message.
const (
	pingType    = "webhook.ping"
	pingMessage = "Hello from Switchboard."
)

// NewEndpoint is an endpoint to register.
type NewEndpoint struct {
	URL         string
	Description string
	// Events are the subscriptions: "*", event type names and family wildcards ("link.*").
	Events []string
	// InstanceIDs narrows the messaging events the endpoint receives to those of these instances (nil: all).
	InstanceIDs []string
	// Headers are static headers added to every delivery; nil or empty for none.
	Headers map[string]string
	// RateLimit is the most deliveries per second; nil for no limit.
	RateLimit *int
	// Kind is store.EndpointKindEndpoint ("" too) or store.EndpointKindHook.
	Kind string
	// ExpiresAt ends the subscription; nil for never.
	ExpiresAt *time.Time
	// Filters are conditions on the payload; nil for none.
	Filters []Filter
	// Type is store.EndpointHTTPS ("" too) or a broker type (TypeRabbitMQ, TypeNATS, TypeMQTT), whose destination
	// is URL and the templates of Destination (its URL is ignored).
	Type        string
	Destination Destination
	// DestinationFor names the broker types whose settings were given: only the endpoint's own may be, and a
	// request that gave another's is refused rather than the settings dropped.
	DestinationFor []string
}

// EndpointChange is what Update changes; nil fields and a RateLimit left alone keep their value.
type EndpointChange struct {
	URL         *string
	Description *string
	// Events replaces the subscriptions.
	Events *[]string
	// InstanceIDs replaces the instance filter (empty: every instance).
	InstanceIDs *[]string
	// Headers replaces the static headers (empty: none).
	Headers *map[string]string
	// RateLimit sets the most deliveries per second, or clears the limit.
	RateLimit patch.Field[int]
	// ExpiresAt sets the end of the subscription, or clears it.
	ExpiresAt patch.Field[time.Time]
	// Filters replaces the filters (empty: none).
	Filters *[]Filter
}

// Create registers an endpoint of a workspace: it checks the URL against the egress policy, the subscriptions
// against the catalogue and the static headers, generates the signing secret and stores it and the headers sealed.
// The secret is returned this once. Returns a ValidationFailed problem naming every invalid field, a
// ReferenceNotFound problem naming every instance of the filter that is not in the workspace, and a NotFound problem
// if the workspace does not exist.
func (s *Service) Create(ctx context.Context, workspaceID string, n NewEndpoint) (Endpoint, string, error) {
	var bad problem.Fields
	if n.Type == "" {
		n.Type = store.EndpointHTTPS
	}
	for _, other := range n.DestinationFor {
		if other != n.Type {
			bad.Add("/"+other, fmt.Sprintf("only an endpoint of type %s takes it", other))
		}
	}
	url, sealDest := n.URL, (func(string) *string)(nil)
	if IsBroker(n.Type) {
		n.Destination.URL = n.URL
		s.checkDestination(ctx, n.Type, n.Destination, &bad)
		url = withoutPassword(n.URL)
		sealDest = func(id string) *string { return sealDestination(s.box, n.Destination, id) }
	} else {
		s.checkURL(ctx, n.URL, &bad)
	}
	s.checkEvents(workspaceID, n.Events, &bad)
	checkHeaders(n.Headers, &bad)
	if n.ExpiresAt != nil {
		checkExpiry(*n.ExpiresAt, &bad)
	}
	checkFilters(n.Filters, &bad)
	if err := bad.Err(); err != nil {
		return Endpoint{}, "", err
	}
	if err := s.checkInstances(ctx, workspaceID, n.InstanceIDs); err != nil {
		return Endpoint{}, "", err
	}
	secret, err := NewSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	e, err := s.db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: workspaceID, URL: url,
		Description: n.Description, Events: n.Events, InstanceIDs: n.InstanceIDs, RateLimit: n.RateLimit, Kind: n.Kind,
		ExpiresAt: n.ExpiresAt, Filters: n.Filters, Type: n.Type, SealDestination: sealDest,
		SealSecret:  func(id string) string { return s.box.Seal([]byte(secret), []byte(id)) },
		SealHeaders: func(id string) *string { return SealHeaders(s.box, n.Headers, id) }})
	if err != nil {
		return Endpoint{}, "", clientError(err, "workspace", workspaceID)
	}
	return s.endpointOf(e), secret, nil
}

// checkInstances returns a ReferenceNotFound problem pointing at each of ids (the instance filter) that names no
// instance of the workspace: a filter on another workspace's instance, or on one that never existed, would
// silently match nothing.
func (s *Service) checkInstances(ctx context.Context, workspaceID string, ids []string) error {
	found, err := s.db.Instances.OfWorkspace(ctx, workspaceID, ids)
	if err != nil {
		return err
	}
	var missing problem.Fields
	for i, id := range ids {
		if !found[id] {
			missing.Add(problem.Pointer("instance_ids", strconv.Itoa(i)), fmt.Sprintf("There is no instance %s in this workspace.", id))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := problem.Errorf(problem.ReferenceNotFound, "instance_ids names %d instance(s) that are not in this workspace.", len(missing))
	e.Fields = missing
	return e
}

// Get returns an endpoint of a workspace. Returns a NotFound problem if it is not in the workspace.
func (s *Service) Get(ctx context.Context, workspaceID, id string) (Endpoint, error) {
	e, err := s.db.Webhooks.Get(ctx, workspaceID, id)
	return s.endpointResult(e, err, id)
}

// stored returns the stored endpoint of a workspace, for what needs its sealed secrets (a test ping) or only its
// existence. Returns a NotFound problem if it is not in the workspace.
func (s *Service) stored(ctx context.Context, workspaceID, id string) (store.WebhookEndpoint, error) {
	e, err := s.db.Webhooks.Get(ctx, workspaceID, id)
	return e, clientError(err, "webhook endpoint", id)
}

// List returns a page of a workspace's endpoints and whether more follow. Its errors are internal.
func (s *Service) List(ctx context.Context, workspaceID string, p store.Page) ([]Endpoint, bool, error) {
	es, more, err := s.db.Webhooks.List(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]Endpoint, len(es))
	for i, e := range es {
		out[i] = s.endpointOf(e)
	}
	return out, more, nil
}

// Update changes an endpoint of a workspace, each field checked as at creation; deliveries already queued go to its
// new URL, with its new headers. Returns a ValidationFailed problem naming every invalid field, a ReferenceNotFound
// problem naming every instance of the filter that is not in the workspace, and a NotFound problem if the endpoint
// is not in the workspace.
func (s *Service) Update(ctx context.Context, workspaceID, id string, c EndpointChange) (Endpoint, error) {
	change := store.WebhookEndpointChange{URL: c.URL, Description: c.Description}
	var bad problem.Fields
	if c.URL != nil {
		current, err := s.stored(ctx, workspaceID, id)
		if err != nil {
			return Endpoint{}, err
		}
		if IsBroker(current.Type) {
			bad.Add("/url", "a broker destination cannot move; create a new endpoint (its credentials are sealed with it)")
		} else {
			s.checkURL(ctx, *c.URL, &bad)
		}
	}
	if c.Events != nil {
		s.checkEvents(workspaceID, *c.Events, &bad)
		change.Events = *c.Events
	}
	if c.InstanceIDs != nil {
		change.InstanceIDs = append([]string{}, *c.InstanceIDs...)
	}
	if c.Headers != nil {
		checkHeaders(*c.Headers, &bad)
		change.SetHeaders, change.SealedHeaders = true, SealHeaders(s.box, *c.Headers, id)
	}
	if c.RateLimit.Given() {
		change.SetRateLimit = true
		c.RateLimit.Apply(&change.RateLimit)
	}
	if c.ExpiresAt.Given() {
		change.SetExpiresAt = true
		c.ExpiresAt.Apply(&change.ExpiresAt)
		if change.ExpiresAt != nil {
			checkExpiry(*change.ExpiresAt, &bad)
		}
	}
	if c.Filters != nil {
		checkFilters(*c.Filters, &bad)
		change.Filters = c.Filters
	}
	if err := bad.Err(); err != nil {
		return Endpoint{}, err
	}
	if err := s.checkInstances(ctx, workspaceID, change.InstanceIDs); err != nil {
		return Endpoint{}, err
	}
	e, err := s.db.Webhooks.Update(ctx, workspaceID, id, change)
	return s.endpointResult(e, err, id)
}

// Delete removes an endpoint of a workspace with its delivery log. Returns a NotFound problem if it is not in the
// workspace.
func (s *Service) Delete(ctx context.Context, workspaceID, id string) error {
	return clientError(s.db.Webhooks.Delete(ctx, workspaceID, id), "webhook endpoint", id)
}

// Pause holds an endpoint's deliveries until it resumes; a paused endpoint stays as it is. Returns a NotFound problem
// if the endpoint is not in the workspace and a WebhookDisabled problem if it is disabled.
func (s *Service) Pause(ctx context.Context, workspaceID, id string) (Endpoint, error) {
	e, err := s.db.Webhooks.Pause(ctx, workspaceID, id)
	return s.endpointResult(e, err, id)
}

// Resume makes a paused endpoint active, and what queued meanwhile due; an active endpoint stays as it is. Returns a
// NotFound problem if the endpoint is not in the workspace and a WebhookDisabled problem if it is disabled.
func (s *Service) Resume(ctx context.Context, workspaceID, id string) (Endpoint, error) {
	e, err := s.db.Webhooks.Resume(ctx, workspaceID, id)
	if err != nil {
		return Endpoint{}, clientError(err, "webhook endpoint", id)
	}
	s.wake()
	return s.endpointOf(e), nil
}

// Enable makes an endpoint active whatever its status, forgetting why it was disabled and its run of failures. With
// recoverSince (at most 14 days ago) it also queues again, in the same transaction, what failed or was skipped since
// then. Returns a ValidationFailed problem for a recoverSince too far back and a NotFound problem if the endpoint is
// not in the workspace.
func (s *Service) Enable(ctx context.Context, workspaceID, id string, recoverSince *time.Time) (Endpoint, error) {
	if recoverSince != nil {
		if err := checkRecoverSince(*recoverSince, "/recover_since"); err != nil {
			return Endpoint{}, err
		}
	}
	e, _, err := s.db.Webhooks.Enable(ctx, workspaceID, id, recoverSince)
	if err != nil {
		return Endpoint{}, clientError(err, "webhook endpoint", id)
	}
	s.wake()
	return s.endpointOf(e), nil
}

// Recovery is what Recover queued: the deliveries of the window [Since, Until).
type Recovery struct {
	Since, Until time.Time
	Queued       int
}

// Recover queues again, with their webhook-id, an endpoint's deliveries created from since until until (nil: now)
// that failed for good or were skipped. Returns a ValidationFailed problem when since is more than 14 days ago or
// until is not later, a NotFound problem if the endpoint is not in the workspace and a WebhookDisabled problem if it
// is disabled (Enable recovers as it enables).
func (s *Service) Recover(ctx context.Context, workspaceID, id string, since time.Time, until *time.Time) (Recovery, error) {
	r := Recovery{Since: since.UTC(), Until: time.Now().UTC()}
	if until != nil {
		r.Until = until.UTC()
	}
	if err := checkRecoverSince(r.Since, "/since"); err != nil {
		return Recovery{}, err
	}
	if !r.Until.After(r.Since) {
		return Recovery{}, problem.Invalid("/until", "must be later than since")
	}
	n, err := s.db.Deliveries.Recover(ctx, workspaceID, id, r.Since, r.Until)
	if err != nil {
		return Recovery{}, clientError(err, "webhook endpoint", id)
	}
	if n > 0 {
		s.wake()
	}
	r.Queued = n
	return r, nil
}

// checkRecoverSince refuses a recovery that reaches further back than maxRecoverAge.
func checkRecoverSince(since time.Time, pointer string) error {
	if since.Before(time.Now().Add(-maxRecoverAge)) {
		return problem.Invalid(pointer, "must be at most 14 days ago")
	}
	return nil
}

// RotateSecret gives an endpoint a new signing secret, returned this once. The current one keeps signing beside it
// for grace (nil: a day; zero: it is dropped at once). Returns a NotFound problem if the endpoint is
// not in the workspace.
func (s *Service) RotateSecret(ctx context.Context, workspaceID, id string, grace *time.Duration) (Endpoint, string, error) {
	g := defaultGracePeriod
	if grace != nil {
		g = *grace
	}
	secret, err := NewSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	e, err := s.db.Webhooks.RotateSecret(ctx, workspaceID, id, s.box.Seal([]byte(secret), []byte(id)), g)
	if err != nil {
		return Endpoint{}, "", clientError(err, "webhook endpoint", id)
	}
	return s.endpointOf(e), secret, nil
}

// TestResult is what a test ping produced. The receiver's failure is a result, not an error.
type TestResult struct {
	EventID, EventType string
	// Delivered is set when the receiver answered 2xx; ErrorClass names the failure otherwise.
	Delivered  bool
	ErrorClass string
	Duration   time.Duration
	// StatusCode is the receiver's answer; nil when it gave none that is an HTTP status.
	StatusCode *int
	// Excerpt is the start of the response body; nil when empty (always for a refused destination).
	Excerpt *string
}

// Test sends one signed event of eventType ("": webhook.ping) to an endpoint now, whatever its status, neither
// stored nor retried. A ping carries its own data; any other type carries the example of the catalogue. A refused
// destination tells nothing but "blocked", so a test cannot probe the server's network. Returns a ValidationFailed
// problem for an event type the workspace does not see and a NotFound problem if the endpoint is not in the
// workspace.
func (s *Service) Test(ctx context.Context, workspaceID, id, eventType string) (TestResult, error) {
	if eventType == "" {
		eventType = pingType
	}
	t, ok := s.types.Lookup(workspaceID, eventType)
	if !ok {
		return TestResult{}, problem.Invalid("/event_type",
			fmt.Sprintf("there is no event type %q; GET /api/v1/event-types lists them", eventType))
	}
	e, err := s.stored(ctx, workspaceID, id)
	if err != nil {
		return TestResult{}, err
	}
	var data any = t.Example
	if eventType == pingType {
		data = gen.WebhookPingEvent{WebhookId: e.ID, Message: pingMessage}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return TestResult{}, err
	}
	ev := store.Event{ID: store.NewID("evt"), WorkspaceID: workspaceID, Type: eventType, Data: raw,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	// The policy may have changed since the URL was registered: the Sender refuses a target it no longer allows (a
	// forbidden scheme as much as a blocked address) before any connection, as "blocked" with no status or excerpt.
	sent, err := s.sender.Send(ctx, e, ev)
	if err != nil {
		return TestResult{}, fmt.Errorf("test webhook %s: %w", e.ID, err)
	}
	res := TestResult{EventID: ev.ID, EventType: eventType, Delivered: sent.Outcome.Result == Delivered,
		ErrorClass: sent.Outcome.Class, Duration: sent.Duration, Excerpt: sent.Excerpt}
	if sent.StatusCode != nil && *sent.StatusCode >= 100 && *sent.StatusCode <= 599 {
		res.StatusCode = sent.StatusCode
	}
	return res, nil
}

// checkURL records why a target URL cannot be registered. The egress errors' messages are written for clients, and
// the same for every blocked address.
func (s *Service) checkURL(ctx context.Context, url string, bad *problem.Fields) {
	err := s.guard.CheckURL(ctx, url)
	switch {
	case err == nil:
	case errors.Is(err, egress.ErrInvalidURL), errors.Is(err, egress.ErrUnresolvable):
		bad.Add("/url", err.Error())
	default:
		bad.Add("/url", egress.ErrBlocked.Error())
	}
}

// checkExpiry refuses an end of a subscription that has passed.
func checkExpiry(t time.Time, bad *problem.Fields) {
	if !t.After(time.Now()) {
		bad.Add("/expires_at", "must be in the future")
	}
}

// checkFilters records the filters whose value does not suit their operation.
func checkFilters(filters []Filter, bad *problem.Fields) {
	for i, f := range filters {
		at := func(field string) string { return problem.Pointer("filters", strconv.Itoa(i), field) }
		switch f.Op {
		case "equals":
			if f.Value == nil {
				bad.Add(at("value"), "equals needs a value")
			}
		case "in":
			if len(f.Values) == 0 {
				bad.Add(at("values"), "in needs values")
			}
		case "exists":
			if _, ok := f.Value.(bool); f.Value != nil && !ok {
				bad.Add(at("value"), "exists takes true or false")
			}
		case "prefix":
			if _, ok := f.Value.(string); !ok {
				bad.Add(at("value"), "prefix needs a string")
			}
		}
		if f.Op != "in" && f.Values != nil {
			bad.Add(at("values"), "only the in operation takes values")
		}
	}
}

// checkEvents records the subscriptions the catalogue does not know.
func (s *Service) checkEvents(workspaceID string, patterns []string, bad *problem.Fields) {
	for i, p := range patterns {
		if !s.types.Subscribable(workspaceID, p) {
			bad.Add(problem.Pointer("events", strconv.Itoa(i)), fmt.Sprintf(
				`%q is not "*", an event type or a family wildcard such as "link.*" of the catalogue (GET /api/v1/event-types)`, p))
		}
	}
}

// checkHeaders records the static headers that cannot be sent: names that are not HTTP tokens or that would replace
// a header Switchboard sets, names given twice in different case, and values with control characters.
func checkHeaders(headers map[string]string, bad *problem.Fields) {
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names) // errors in a stable order
	seen := map[string]bool{}
	for _, name := range names {
		pointer := problem.Pointer("headers", name)
		lower := strings.ToLower(name)
		switch {
		case name == "" || len(name) > maxHeaderNameLen || strings.IndexFunc(name, notTokenChar) >= 0:
			bad.Add(pointer, fmt.Sprintf("a header name is an HTTP token of 1 to %d letters, digits and !#$%%&'*+-.^_`|~", maxHeaderNameLen))
		case reservedHeader(lower):
			bad.Add(pointer, "Switchboard sets this header itself (webhook-*, Content-Type, Content-Length, User-Agent, Host and hop-by-hop headers)")
		case seen[lower]:
			bad.Add(pointer, "header names are case-insensitive: this one is given twice")
		case strings.IndexFunc(headers[name], invalidHeaderValueChar) >= 0:
			bad.Add(pointer, "a header value cannot contain control characters (line breaks included)")
		}
		seen[lower] = true
	}
}

// reservedHeader reports whether a lower-case header name belongs to Switchboard or to the connection.
func reservedHeader(lower string) bool {
	switch lower {
	case "content-type", "content-length", "user-agent", "host", "connection", "transfer-encoding", "te", "trailer",
		"upgrade", "keep-alive":
		return true
	}
	return strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "proxy-")
}

// notTokenChar reports whether r cannot be part of an HTTP token (RFC 9110 §5.6.2).
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// invalidHeaderValueChar reports whether r cannot be part of a header value: control characters other than tab.
func invalidHeaderValueChar(r rune) bool {
	return r < ' ' && r != '\t' || r == 0x7f
}

// CheckSubscription checks a subscription given as query parameters (a live event stream's) by the rules of an
// endpoint's: types the catalogue knows, filters whose values suit their operation, instances of the workspace.
// Returns a ValidationFailed problem naming the parameter of each bad one (types, filters), or a
// ReferenceNotFound problem for instances of no instance of the workspace.
func (s *Service) CheckSubscription(ctx context.Context, workspaceID string, types, instanceIDs []string,
	filters []Filter) error {
	var bad problem.Fields
	s.checkEvents(workspaceID, types, &bad)
	checkFilters(filters, &bad)
	asParameters(bad)
	if err := bad.Err(); err != nil {
		return err
	}
	err := s.checkInstances(ctx, workspaceID, instanceIDs)
	var p *problem.Error
	if errors.As(err, &p) {
		asParameters(p.Fields)
	}
	return err
}

// asParameters turns the body pointers of an endpoint's checks into the query parameters of a stream's: "/events/0"
// becomes the parameter types, "/filters/0/value" the parameter filters, each detail saying which item.
func asParameters(fields []problem.Field) {
	for i, f := range fields {
		param, member, _ := strings.Cut(strings.TrimPrefix(f.Pointer, "/"), "/")
		if param == "events" {
			param = "types"
		}
		fields[i] = problem.Field{Parameter: param, Detail: "[" + member + "] " + f.Detail}
	}
}
