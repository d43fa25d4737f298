package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// Limits of the request log.
const (
	excerptBytes   = 2 << 10
	maxLogHeaders  = 50
	maxHeaderValue = 1024
)

// IngestRequest is a request to a source's ingest URL, as the HTTP layer hands it over.
type IngestRequest struct {
	Method string
	Header http.Header
	// Body is read up to the smaller of the source's size limit and Limit.
	Body io.Reader
	// Length is the body's declared length (-1 when unknown): a body declared over the limit is refused unread.
	Length int64
	// Limit is the server's limit on request bodies (0: none). The ingest applies it rather than the HTTP layer, so
	// that a body over it is refused like one over the source's own limit, and logged.
	Limit int64
	// Rate, when set, is told the source's rate-limit decision for this request (the HTTP layer answers with it).
	Rate func(ratelimit.Policy, ratelimit.Decision)
}

// IngestResult is what a source made of a request.
type IngestResult struct {
	// EventID is the event stored (for a duplicate, the first one); "" for a handshake.
	EventID   string
	Duplicate bool
	// Challenge is the value a Slack url_verification request asked to be answered with.
	Challenge string
}

// errDuplicate rolls back an event whose de-duplication key another request claimed first.
type errDuplicate struct{ first string }

func (e errDuplicate) Error() string { return "duplicate of " + e.first }

// Ingest verifies a request to the ingest URL of token and records it: as an event with its deliveries and a log
// entry, in one transaction, before it returns — or, refused, as a log entry with the reason. Returns a NotFound
// problem for an unknown token (not logged: it names no source), SignatureInvalid (401), RequestTooLarge (413),
// UnsupportedMediaType (415), MalformedJSON (400, also for a body that ended early), InvalidText (400),
// RateLimited (429, with RetryAfter), EventTypeArchived (409) and EventDataInvalid (422) problems.
func (s *Service) Ingest(ctx context.Context, token string, r IngestRequest) (IngestResult, error) {
	src, err := s.SourceByToken(ctx, token)
	if err != nil {
		return IngestResult{}, err
	}
	now := s.now()
	limit, limitName := int64(src.MaxBodyBytes), "this source accepts"
	if r.Limit > 0 && r.Limit < limit {
		limit, limitName = r.Limit, "this server accepts"
	}
	var (
		body    []byte
		readErr error
	)
	if r.Length <= limit {
		body, readErr = io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	log := s.logEntry(src, r, body, now)
	policy, d := s.takeRate(src, now)
	if r.Rate != nil {
		r.Rate(policy, d)
	}
	if !d.Allowed {
		p := rateLimited(src, d)
		if s.shouldLogRate(src.ID, now) {
			return IngestResult{}, s.refuse(ctx, &log, ReasonRateLimited, p)
		}
		return IngestResult{}, p
	}
	if r.Length > limit || int64(len(body)) > limit {
		log.SizeBytes = max(len(body), int(min(r.Length, math.MaxInt32)))
		return IngestResult{}, s.refuse(ctx, &log, ReasonTooLarge, problem.Errorf(problem.RequestTooLarge,
			"The body is larger than %s (%d bytes).", limitName, limit))
	}
	if readErr != nil {
		// The sender went away (or stalled) in the middle of its body: its request, not a failure of ours.
		return IngestResult{}, s.refuse(ctx, &log, ReasonMalformedBody, problem.New(problem.MalformedJSON,
			"The request body ended before it was complete."))
	}
	kind, ok := bodyKind(r.Header.Get("Content-Type"), len(body))
	if !ok {
		return IngestResult{}, s.refuse(ctx, &log, ReasonUnsupportedMedia, problem.New(problem.UnsupportedMediaType,
			"Send JSON (application/json), form fields (application/x-www-form-urlencoded) or plain text (text/plain)."))
	}
	v, err := s.verifierOf(src)
	if err != nil {
		return IngestResult{}, err
	}
	if ref := v.verify(r.Header, body, now); ref != nil {
		return IngestResult{}, s.refuse(ctx, &log, ref.reason, problem.New(problem.SignatureInvalid, ref.detail))
	}
	data, decoded, err := eventData(kind, body)
	if p, ok := errors.AsType[*problem.Error](err); ok {
		return IngestResult{}, s.refuse(ctx, &log, ReasonInvalidText, p)
	}
	if err != nil {
		return IngestResult{}, s.refuse(ctx, &log, ReasonMalformedBody, problem.New(problem.MalformedJSON,
			"The body is not valid JSON: "+err.Error()))
	}
	if challenge, ok := slackChallenge(src, decoded); ok {
		log.Outcome, log.Status = store.SourceRequestHandshake, http.StatusOK
		return IngestResult{Challenge: challenge}, s.db.SourceRequests.Insert(ctx, nil, &log)
	}
	if err := s.checkPublishable(ctx, src.WorkspaceID, src.EventType, decoded, ""); err != nil {
		reasons := map[problem.Code]string{problem.EventTypeArchived: ReasonTypeArchived,
			problem.EventDataInvalid: ReasonDataInvalid, problem.SchemaTooComplex: ReasonSchemaTooComplex}
		if p, ok := errors.AsType[*problem.Error](err); ok && reasons[p.Code] != "" {
			return IngestResult{}, s.refuse(ctx, &log, reasons[p.Code], p)
		}
		return IngestResult{}, err
	}
	key := dedupKey(src, r.Header, decoded)
	window := time.Duration(src.DedupWindowSeconds) * time.Second
	if key != "" {
		if first, seen, err := s.seenKey(ctx, src.ID, key, now); err != nil || seen {
			if err != nil {
				return IngestResult{}, err
			}
			return s.duplicate(ctx, &log, first)
		}
	}
	var ev store.Event
	err = s.commits.Do(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if ev, err = s.outbox.EmitJSON(ctx, tx, src.WorkspaceID, src.EventType, data); err != nil {
			return err
		}
		if key != "" {
			first, dup, err := s.db.SourceRequests.ClaimDedupKey(ctx, tx, src.ID, key, ev.ID, window)
			if err != nil {
				return err
			}
			if dup {
				return errDuplicate{first}
			}
		}
		log.Outcome, log.Status, log.EventID = store.SourceRequestAccepted, http.StatusOK, &ev.ID
		return s.db.SourceRequests.Insert(ctx, tx, &log)
	})
	var dup errDuplicate
	if errors.As(err, &dup) {
		return s.duplicate(ctx, &log, dup.first)
	}
	if err != nil {
		return IngestResult{}, err
	}
	return IngestResult{EventID: ev.ID}, nil
}

// takeRate charges one request to the source's rate limit.
func (s *Service) takeRate(src store.Source, now time.Time) (ratelimit.Policy, ratelimit.Decision) {
	p := ratelimit.Policy{Name: "source", Quota: src.RatePerMinute, Window: time.Minute}
	return p, s.limiter.Take("source:"+src.ID, p, now)
}

// Challenge is a sender's URL check (GET on the ingest URL) of token: it counts against the source's rate like a
// request. Returns NotFound for an unknown token and a RateLimitedError over the rate; the decision is returned
// either way once the source is known.
func (s *Service) Challenge(ctx context.Context, token string) (ratelimit.Policy, ratelimit.Decision, error) {
	src, err := s.SourceByToken(ctx, token)
	if err != nil {
		return ratelimit.Policy{}, ratelimit.Decision{}, err
	}
	p, d := s.takeRate(src, s.now())
	if !d.Allowed {
		return p, d, rateLimited(src, d)
	}
	return p, d, nil
}

// rateLimited is the 429 of a source over its rate.
func rateLimited(src store.Source, d ratelimit.Decision) *RateLimitedError {
	return &RateLimitedError{Problem: problem.Errorf(problem.RateLimited,
		"This source accepts %d requests a minute; retry after %d s.", src.RatePerMinute, retrySeconds(d.RetryAfter)),
		RetryAfter: d.RetryAfter}
}

// RateLimitedError is the 429 of a source over its rate, with the wait the sender is told (Retry-After).
type RateLimitedError struct {
	Problem    *problem.Error
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return e.Problem.Error() }

// Unwrap lets adapters show it as its problem.
func (e *RateLimitedError) Unwrap() error { return e.Problem }

func retrySeconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// shouldLogRate reports whether a request refused for the source's rate goes to its log: one a second at most.
func (s *Service) shouldLogRate(sourceID string, now time.Time) bool {
	s.rateLogMu.Lock()
	defer s.rateLogMu.Unlock()
	if now.Sub(s.lastRateLog[sourceID]) < time.Second {
		return false
	}
	s.lastRateLog[sourceID] = now
	return true
}

// seenKey reads whether a de-duplication key was claimed within its window, without writing.
func (s *Service) seenKey(ctx context.Context, sourceID, key string, now time.Time) (string, bool, error) {
	return s.db.SourceRequests.SeenDedupKey(ctx, sourceID, key, now)
}

func (s *Service) duplicate(ctx context.Context, log *store.SourceRequest, first string) (IngestResult, error) {
	log.Outcome, log.Status, log.EventID = store.SourceRequestDuplicate, http.StatusOK, &first
	if err := s.db.SourceRequests.Insert(ctx, nil, log); err != nil && !errors.Is(err, store.ErrNotFound) {
		return IngestResult{}, err
	}
	return IngestResult{EventID: first, Duplicate: true}, nil
}

// refuse logs a refused request with its reason and returns the problem the sender is told. A source deleted
// meanwhile has no log to write to; the refusal stands.
func (s *Service) refuse(ctx context.Context, log *store.SourceRequest, reason string, refusal error) error {
	var p *problem.Error
	errors.As(refusal, &p)
	detail := text.Clean(p.Detail) // a detail may quote what was sent
	log.Outcome, log.Status, log.Reason, log.Detail = store.SourceRequestRefused, p.Status(), &reason, &detail
	if err := s.db.SourceRequests.Insert(ctx, nil, log); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return refusal
}

// verifierOf opens a source's secret for its scheme.
func (s *Service) verifierOf(src store.Source) (verifier, error) {
	v := verifier{SourceVerification: presets(src.Verification)}
	if src.SealedSecret != nil {
		secret, err := s.box.Open(*src.SealedSecret, []byte(src.ID))
		if err != nil {
			return verifier{}, fmt.Errorf("automation: source %s: the secret does not open with the server key: %w", src.ID, err)
		}
		v.secret = secret
	}
	return v, nil
}

// Body kinds.
const (
	bodyJSON = iota
	bodyForm
	bodyText
	bodyEmpty
)

// bodyKind tells how a body of a content type is read; ok is false for a type the ingest does not take.
func bodyKind(contentType string, size int) (int, bool) {
	if contentType == "" {
		return bodyEmpty, size == 0
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return 0, false
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return bodyJSON, true
	case mt == "application/x-www-form-urlencoded":
		return bodyForm, true
	case strings.HasPrefix(mt, "text/"):
		return bodyText, true
	}
	return 0, false
}

// eventData turns a body into the event's data (a JSON object) and its decoded form (for schemas, pointers and
// handshakes): a JSON object as it is, any other JSON value, or text, as {"body": value}; form fields as members
// (repeated fields as arrays). Text the databases cannot keep — bytes that are not UTF-8 (which a JSON decoder would
// quietly replace) or U+0000 anywhere — is refused with an InvalidText problem, never altered.
func eventData(kind int, body []byte) (json.RawMessage, any, error) {
	var v any
	switch kind {
	case bodyEmpty:
		v = map[string]any{}
	case bodyJSON:
		if !utf8.Valid(body) {
			return nil, nil, notUTF8(body)
		}
		decoded, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		if err := storable(decoded); err != nil {
			return nil, nil, err
		}
		if obj, ok := decoded.(map[string]any); ok {
			var compact bytes.Buffer
			if err := json.Compact(&compact, body); err != nil {
				return nil, nil, err
			}
			return compact.Bytes(), obj, nil
		}
		v = map[string]any{"body": decoded}
	case bodyForm:
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, nil, err
		}
		m := map[string]any{}
		for k, vs := range q {
			if len(vs) == 1 {
				m[k] = vs[0]
			} else {
				m[k] = anys(vs)
			}
		}
		if err := storable(m); err != nil {
			return nil, nil, err
		}
		v = m
	case bodyText:
		if d := text.Fault(string(body)); d != "" {
			return nil, nil, problem.New(problem.InvalidText, "The text body "+d+".")
		}
		v = map[string]any{"body": string(body)}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	decoded, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	return raw, decoded, err
}

// storable returns the InvalidText problem of decoded data holding text the databases cannot keep, naming each
// place, or nil.
func storable(data any) error {
	var errs problem.Fields
	text.Check(data, "", &errs)
	if len(errs) == 0 {
		return nil
	}
	p := problem.New(problem.InvalidText, "The body holds text that cannot be stored; errors[] points at each place.")
	p.Fields = errs
	return p
}

// notUTF8 is the InvalidText problem of a JSON body that is not UTF-8 (RFC 8259 requires it).
func notUTF8(body []byte) error {
	at := 0
	for at < len(body) {
		r, n := utf8.DecodeRune(body[at:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		at += n
	}
	return problem.Errorf(problem.InvalidText, "The body is not valid UTF-8 (the first invalid byte is at offset %d).", at)
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// slackChallenge answers Slack's signed url_verification request.
func slackChallenge(src store.Source, data any) (string, bool) {
	if src.Verification.Scheme != SchemeSlack {
		return "", false
	}
	m, _ := data.(map[string]any)
	challenge, ok := m["challenge"].(string)
	if m["type"] != "url_verification" || !ok {
		return "", false
	}
	return challenge, true
}

// dedupKey is a request's de-duplication key: its header's value, or the string or number at its pointer; "" when
// the source has none or the request lacks it.
func dedupKey(src store.Source, h http.Header, data any) string {
	switch {
	case src.DedupHeader != nil:
		return h.Get(*src.DedupHeader)
	case src.DedupPointer != nil:
		v, _ := events.PointerValue(data, *src.DedupPointer)
		switch v := v.(type) {
		case string:
			return v
		case json.Number:
			return v.String()
		}
	}
	return ""
}

// logEntry is the log record of a request, before its outcome is known: headers with credential-like values
// redacted, the body truncated.
func (s *Service) logEntry(src store.Source, r IngestRequest, body []byte, now time.Time) store.SourceRequest {
	headers := map[string]string{}
	for name, vs := range r.Header {
		if len(headers) == maxLogHeaders {
			break
		}
		v := strings.Join(vs, ", ")
		if sensitiveHeader(name, src.Verification.Header) {
			v = "[redacted]"
		} else if len(v) > maxHeaderValue {
			v = truncateUTF8(v, maxHeaderValue)
		}
		headers[name] = v
	}
	// The excerpt is kept as bytes: it may hold anything, which is what a refusal of its text is about.
	excerpt := []byte(truncateUTF8(string(body), excerptBytes))
	return store.SourceRequest{SourceID: src.ID, WorkspaceID: src.WorkspaceID, ReceivedAt: now.UTC().Truncate(time.Microsecond),
		Method: r.Method, ContentType: text.Clean(truncateUTF8(r.Header.Get("Content-Type"), 256)), SizeBytes: len(body),
		Headers: headers, BodyExcerpt: excerpt, BodyTruncated: len(body) > len(excerpt)}
}

// sensitiveHeader reports whether a header's value may carry a credential (or a signature that would let someone
// replay the request), which the log must not keep.
func sensitiveHeader(name, schemeHeader string) bool {
	lower := strings.ToLower(name)
	if schemeHeader != "" && strings.EqualFold(name, schemeHeader) {
		return true
	}
	for _, word := range []string{"auth", "cookie", "signature", "token", "secret", "key", "hmac", "password", "session"} {
		if strings.Contains(lower, word) {
			return true
		}
	}
	return false
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SourceByToken returns the source of an ingest token (current, or previous within its grace period). Returns a
// NotFound problem if there is none.
func (s *Service) SourceByToken(ctx context.Context, token string) (store.Source, error) {
	src, err := s.db.Sources.ByToken(ctx, hashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return src, problem.New(problem.NotFound, "There is no source at this URL.")
	}
	return src, err
}
