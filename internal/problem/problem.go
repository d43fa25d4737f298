// Package problem is the product's one error vocabulary: every failure a client can be told about has a stable code
// in this table, with exactly one HTTP status and title. Capability services return *Error values; each adapter
// shows them its own way (the API as RFC 9457 problem+json, the console as a message on the page, the CLI on
// stderr), so a rule that refuses something is written once and reads the same everywhere.
//
// Codes are never repurposed: a new failure gets a new code. The API reference lists the same codes (the Problem
// schema's enum and the error table of its introduction), and a test keeps the three in step.
package problem

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Code is a stable, snake_case error code. Clients switch on it; titles and details are for people.
type Code string

// The codes, grouped by status.
const (
	MalformedJSON                Code = "malformed_json"
	ValidationFailed             Code = "validation_failed"
	InvalidText                  Code = "invalid_text"
	MissingAPIKey                Code = "missing_api_key"
	InvalidAPIKey                Code = "invalid_api_key"
	APIKeyRevoked                Code = "api_key_revoked"
	APIKeyExpired                Code = "api_key_expired"
	SignatureInvalid             Code = "signature_invalid"
	InsufficientScope            Code = "insufficient_scope"
	KeyLimitedToInstances        Code = "key_limited_to_instances"
	OriginNotAllowed             Code = "origin_not_allowed"
	NotFound                     Code = "not_found"
	RouteNotFound                Code = "route_not_found"
	HooksNotSupported            Code = "hooks_not_supported"
	ModelNotFound                Code = "model_not_found"
	MethodNotAllowed             Code = "method_not_allowed"
	Conflict                     Code = "conflict"
	SlugTaken                    Code = "slug_taken"
	ExternalIDTaken              Code = "external_id_taken"
	WebhookDisabled              Code = "webhook_disabled"
	DeliveryInFlight             Code = "delivery_in_flight"
	IdempotencyRequestInProgress Code = "idempotency_request_in_progress"
	EventTypeExists              Code = "event_type_exists"
	EventTypeArchived            Code = "event_type_archived"
	LinkExpired                  Code = "link_expired"
	InstanceNotConnected         Code = "instance_not_connected"
	InstanceRestricted           Code = "instance_restricted"
	MessageNotCancelable         Code = "message_not_cancelable"
	CapabilityNotSupported       Code = "capability_not_supported"
	RecipientNotOnNetwork        Code = "recipient_not_on_network"
	ConversationWindowClosed     Code = "conversation_window_closed"
	RequestTooLarge              Code = "request_too_large"
	UnsupportedMediaType         Code = "unsupported_media_type"
	IdempotencyKeyReused         Code = "idempotency_key_reused"
	EventDataInvalid             Code = "event_data_invalid"
	SchemaTooComplex             Code = "schema_too_complex"
	ReferenceNotFound            Code = "reference_not_found"
	RateLimited                  Code = "rate_limited"
	InternalError                Code = "internal_error"
	ServiceUnavailable           Code = "service_unavailable"
	InvalidStreamToken           Code = "invalid_stream_token"
	ReplayUnavailable            Code = "replay_unavailable"
	StreamOverflow               Code = "stream_overflow"
	OriginsRequired              Code = "origins_required"
	UpstreamRejected             Code = "upstream_rejected"
	UpstreamError                Code = "upstream_error"
)

// Type is one row of the table.
type Type struct {
	Code   Code
	Status int
	Title  string
	// Description says when the code is used and what to do about it (the /problems page shows it).
	Description string
}

// table is the one place that maps codes to statuses and titles.
var table = map[Code]Type{}

func init() {
	for _, t := range []Type{
		{MalformedJSON, 400, "Malformed JSON", "The request body is not valid JSON."},
		{ValidationFailed, 400, "Validation failed", "The request does not match the API reference; errors[] lists every invalid field."},
		{InvalidText, 400, "Invalid text", "A body sent to a source's ingest URL is text, form fields or JSON that cannot be stored: bytes that are not UTF-8, or the character U+0000 (NUL) in a string or a name; errors[] points at each such place of JSON or form fields. Send UTF-8 and leave NUL out (or send the data base64-encoded). The source's request log keeps the refused body's bytes."},
		{MissingAPIKey, 401, "Missing API key", `No "Authorization: Bearer sb_sk_…" header was sent.`},
		{InvalidAPIKey, 401, "Invalid API key", "The key is malformed, mistyped or unknown."},
		{APIKeyRevoked, 401, "API key revoked", "The key was revoked; create a new one at /user/api."},
		{APIKeyExpired, 401, "API key expired", "The key's expiry date has passed; create a new one at /user/api."},
		{InvalidStreamToken, 401, "Invalid stream token", "The access_token of an event stream is malformed, expired (tokens open streams for 5 minutes), or its key was revoked or expired; create a new one with POST /api/v1/events/stream-tokens."},
		{SignatureInvalid, 401, "Signature invalid", "A source's ingest URL or a channel hook URL refused the request: its signature, timestamp, secret token or credentials do not verify (with the source's scheme; with the instance's secret). A source's request log (GET /api/v1/sources/{id}/requests) shows each refusal with its reason."},
		{InsufficientScope, 403, "Insufficient scope", "The key lacks a scope the operation needs; required_scopes names them."},
		{KeyLimitedToInstances, 403, "Key limited to instances", "The API key is limited to some instances of its workspace (instance_ids in GET /api/v1/me), so it cannot create another; use a key that reaches every instance."},
		{OriginNotAllowed, 403, "Origin not allowed", "The request came from a page of an origin the key does not list (or from no page, with a key that lists origins, or with a browser key). A key with origins works only from those pages; a key without origins works from pages only where the operator allows their origin (--cors-origins). Add the origin to the key at /user/api, or call from a server with a secret key."},
		{NotFound, 404, "Not found", "No such object in the key's workspace, or no short link at this address."},
		{RouteNotFound, 404, "Route not found", "No route serves this path, with any method; the API reference at /docs lists every route."},
		{HooksNotSupported, 404, "Hooks not supported", "The instance exists, but its provider takes no pushes over HTTP, so nothing is received at its hook URL; only providers that push (GET /api/v1/providers) have one."},
		{ModelNotFound, 404, "Model not found", "No model with this ID is enabled for the workspace."},
		{MethodNotAllowed, 405, "Method not allowed", "The route exists but not for this method; the Allow header lists the methods it takes."},
		{Conflict, 409, "Conflict", "The request conflicts with the current state of the object."},
		{SlugTaken, 409, "Slug taken", "The slug is already used on this domain (or reserved for a while after a link was deleted)."},
		{ExternalIDTaken, 409, "External ID taken", "Another link of the workspace has this external_id."},
		{WebhookDisabled, 409, "Webhook endpoint disabled", "Switchboard disabled the endpoint (its receiver answered 410 or failed for days); enable it first."},
		{DeliveryInFlight, 409, "Delivery in flight", "The delivery is being attempted right now; retry when the attempt is recorded."},
		{IdempotencyRequestInProgress, 409, "Idempotent request in progress", "A request with this Idempotency-Key is still running; retry when it has finished."},
		{InstanceNotConnected, 409, "Instance not connected", "The call needs the instance's live session and it has none (created, disconnected, logged out, failed, or not yet paired); connect it first."},
		{InstanceRestricted, 409, "Instance restricted", "The network restricts the instance's account (banned, rate-limited for hours, or paused by the operator); status_reason says why."},
		{MessageNotCancelable, 409, "Message not cancelable", "The message is being sent or was sent already; only a queued message can be canceled."},
		{EventTypeExists, 409, "Event type exists", "The workspace already has a custom event type of this name; change it with PATCH /api/v1/event-types/{name}."},
		{EventTypeArchived, 409, "Event type archived", "The custom event type is archived and refuses new events; un-archive it with PATCH /api/v1/event-types/{name}."},
		{LinkExpired, 410, "Link expired", "The short link expired or reached its click limit, and has no expired_url to send visitors to."},
		{ReplayUnavailable, 410, "Replay unavailable", "The event an event stream was to resume after (Last-Event-ID or after) is not in the workspace's event log: it expired, or never was one of its events. Reconnect without it and reconcile with GET /api/v1/events."},
		{RequestTooLarge, 413, "Request too large", "The request body exceeds the size limit."},
		{UnsupportedMediaType, 415, "Unsupported media type", "The request body has a Content-Type the operation does not accept; send application/json."},
		{IdempotencyKeyReused, 422, "Idempotency key reused", "The Idempotency-Key was used with a different request in the last 24 hours; use a new key for a new request."},
		{CapabilityNotSupported, 422, "Capability not supported", "The instance's provider cannot do this call; GET /api/v1/providers/{provider} lists its capabilities. Nothing was queued."},
		{RecipientNotOnNetwork, 422, "Recipient not on network", "No account of the instance's network has this address."},
		{ConversationWindowClosed, 422, "Conversation window closed", "The network takes free-form messages only within its customer-service window after the person's last message (WhatsApp: 24 hours); send a template instead. Nothing was queued."},
		{OriginsRequired, 422, "Origins required", "A browser key (sb_pk_…) works only from the pages of its origins, so it keeps at least one: list the origins that stay, or revoke the key."},
		{ReferenceNotFound, 422, "Reference not found", "A member of the body names an object (an instance) that is not in the key's workspace; errors[] points at each such member."},
		{EventDataInvalid, 422, "Event data invalid", "The event's data does not match the JSON Schema of its type; errors[] points at each failure."},
		{SchemaTooComplex, 422, "Schema too complex", "A custom event type's JSON Schema passes a bound that keeps validation cheap (depth, subschemas, $ref expansion, checks per value, patterns; errors[] names each at its pointer), or validating an event's data against its type's schema would cost more than an event may: send less data in one event, or simplify the schema."},
		{RateLimited, 429, "Rate limit exceeded", "A rate limit of the key or its workspace is exhausted; wait Retry-After seconds."},
		{StreamOverflow, 429, "Stream overflow", "Sent inside an event stream, which then closes: the consumer fell 10,000 events behind. Reconnect with Last-Event-ID to resume from the event log at your own pace."},
		{UpstreamRejected, 422, "Upstream rejected", "The model's upstream refused the chat completion as invalid; detail (and error.message) carries its own words. Fix the request (its messages, its parameters) and send it again."},
		{UpstreamError, 502, "Upstream error", "The model's upstream failed, does not answer, or refused the server's credentials: nothing in the request is at fault. Retry later; the operator's logs name the upstream."},
		{InternalError, 500, "Internal server error", "Something failed on the server; the request_id finds the log line."},
		{ServiceUnavailable, 503, "Service unavailable", "A dependency of the server (its database) does not answer; retry after Retry-After seconds."},
	} {
		register(t)
	}
}

// register adds a row; a code twice is a programming error.
func register(t Type) {
	if _, dup := table[t.Code]; dup {
		panic("problem: code registered twice: " + string(t.Code))
	}
	table[t.Code] = t
}

// Lookup returns the row of a code.
func Lookup(c Code) (Type, bool) {
	t, ok := table[c]
	return t, ok
}

// All returns every row, by status and then code: the order of the /problems page.
func All() []Type {
	out := make([]Type, 0, len(table))
	for _, t := range table {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Type) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), cmp.Compare(a.Code, b.Code))
	})
	return out
}

// Error is a failure with a code of the table, as a capability service reports it.
type Error struct {
	Code   Code
	Detail string
	// Fields are the invalid parts of the request of a ValidationFailed error.
	Fields []Field
}

// Field is one invalid part of a request, located by a Parameter name, else a Header name, else a JSON Pointer into
// the body ("" is the whole body).
type Field struct {
	Pointer, Parameter, Header string
	Detail                     string
}

// New returns an error of a code of the table; a code outside it is a programming error.
func New(code Code, detail string) *Error {
	if _, ok := table[code]; !ok {
		panic("problem: code not in the table: " + string(code))
	}
	return &Error{Code: code, Detail: detail}
}

// Errorf is New with a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return New(code, fmt.Sprintf(format, args...))
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Detail }

// Status is the HTTP status of the error's code.
func (e *Error) Status() int { return table[e.Code].Status }

// Fields collects the invalid fields of a request that its schema cannot judge (a URL that is not allowed, a name
// too long in characters), or of one item of a bulk request, with pointers relative to it.
type Fields []Field

// Add records an invalid member of the body.
func (f *Fields) Add(pointer, detail string) {
	*f = append(*f, Field{Pointer: pointer, Detail: detail})
}

// AddParameter records an invalid path or query parameter.
func (f *Fields) AddParameter(name, detail string) {
	*f = append(*f, Field{Parameter: name, Detail: detail})
}

// Err is the ValidationFailed error of the fields, or nil when there are none. Its type is error so that callers
// can return it directly without a typed nil.
func (f Fields) Err() error {
	if e := f.Problem(); e != nil {
		return e
	}
	return nil
}

// Problem is Err as an *Error (nil when there are no fields).
func (f Fields) Problem() *Error {
	if len(f) == 0 {
		return nil
	}
	detail := "The request has 1 invalid field."
	if len(f) > 1 {
		detail = fmt.Sprintf("The request has %d invalid fields.", len(f))
	}
	e := New(ValidationFailed, detail)
	e.Fields = f
	return e
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// Pointer renders the path of a body member as an RFC 6901 JSON Pointer: "/headers/X-A~1B" for the segments
// "headers" and "X-A/B".
func Pointer(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(s))
	}
	return b.String()
}

// Invalid is the ValidationFailed error of one body member.
func Invalid(pointer, detail string) *Error {
	var f Fields
	f.Add(pointer, detail)
	return f.Problem()
}

// InvalidParameter is the ValidationFailed error of one path or query parameter.
func InvalidParameter(name, detail string) *Error {
	var f Fields
	f.AddParameter(name, detail)
	return f.Problem()
}
