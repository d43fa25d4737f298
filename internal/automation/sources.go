package automation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Verification is a source's verification scheme as a client configures it (see the spec's SourceScheme).
type Verification struct {
	Scheme, Secret, Algorithm, Header, Encoding, Prefix, Username string
	ToleranceSeconds                                              int
}

// Dedup is a source's de-duplication key: a header or a JSON pointer, remembered for Window (0: the default).
type Dedup struct {
	Header, Pointer string
	Window          time.Duration
}

// Limits are a source's limits; nil members keep their value (their defaults at creation).
type Limits struct {
	MaxBodyBytes, RatePerMinute *int
}

// NewSource is a source as a client describes it.
type NewSource struct {
	Name, EventType string
	Verification    Verification
	Dedup           *Dedup
	Limits          Limits
}

// SourceChange is a partial update of a source: nil members and a zero Dedup stay.
type SourceChange struct {
	Name, EventType *string
	Verification    *Verification
	Dedup           patch.Field[Dedup]
	Limits          Limits
}

// IngestURL is where a token's requests go.
func (s *Service) IngestURL(token string) string {
	return strings.TrimRight(s.base, "/") + "/in/" + token
}

// newToken returns a new ingest token ("in_" and 40 URL-safe characters of 240 random bits) and its hash.
func newToken() (token, hash string) {
	b := make([]byte, 30)
	_, _ = rand.Read(b)
	token = "in_" + base64.RawURLEncoding.EncodeToString(b)
	return token, hashToken(token)
}

func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// checkVerification checks a scheme's fields (each scheme takes only what it uses) and returns the stored form.
func checkVerification(errs *problem.Fields, v Verification) store.SourceVerification {
	out := store.SourceVerification{Scheme: v.Scheme}
	used := map[string]bool{"secret": v.Scheme != SchemeNone}
	switch v.Scheme {
	case SchemeHMAC:
		used["algorithm"], used["header"], used["encoding"], used["prefix"] = true, true, true, true
		if v.Header == "" {
			errs.Add("/verification/header", "is required for the hmac scheme")
		}
		out.Algorithm, out.Header, out.Encoding, out.Prefix = v.Algorithm, v.Header, v.Encoding, v.Prefix
		if out.Algorithm == "" {
			out.Algorithm = "sha256"
		}
		if out.Encoding == "" {
			out.Encoding = "hex"
		}
	case SchemeStandardWebhooks, SchemeStripe, SchemeSlack:
		used["tolerance_seconds"] = true
		out.ToleranceSeconds = v.ToleranceSeconds
	case SchemeBasic:
		used["username"] = true
		if v.Username == "" {
			errs.Add("/verification/username", "is required for the basic scheme")
		}
		out.Username = v.Username
	case SchemeAPIKey:
		used["header"] = true
		out.Header = v.Header
	case SchemeNone, SchemeGitHub, SchemeShopify:
	default:
		errs.Add("/verification/scheme", fmt.Sprintf("%q is not a verification scheme", v.Scheme))
	}
	given := map[string]bool{"secret": v.Secret != "", "algorithm": v.Algorithm != "", "header": v.Header != "",
		"encoding": v.Encoding != "", "prefix": v.Prefix != "", "username": v.Username != "",
		"tolerance_seconds": v.ToleranceSeconds != 0}
	for _, f := range []string{"secret", "algorithm", "header", "encoding", "prefix", "tolerance_seconds", "username"} {
		switch {
		case given[f] && !used[f]:
			errs.Add("/verification/"+f, fmt.Sprintf("is not used by the %s scheme", v.Scheme))
		case f == "secret" && used[f] && !given[f]:
			errs.Add("/verification/secret", fmt.Sprintf("is required for the %s scheme", v.Scheme))
		}
	}
	if v.Scheme == SchemeStandardWebhooks {
		if b64, ok := strings.CutPrefix(v.Secret, "whsec_"); ok {
			if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
				errs.Add("/verification/secret", "a whsec_ secret must be base64 after its prefix")
			}
		}
	}
	return presets(out)
}

// checkDedup checks a de-duplication key: exactly one of header and pointer.
func checkDedup(errs *problem.Fields, d Dedup) {
	if (d.Header == "") == (d.Pointer == "") {
		errs.Add("/dedup", "needs exactly one of header and pointer")
	}
}

func applyDedup(src *store.Source, d *Dedup) {
	src.DedupHeader, src.DedupPointer, src.DedupWindowSeconds = nil, nil, int(DefaultDedupWindow/time.Second)
	if d == nil {
		return
	}
	if d.Header != "" {
		src.DedupHeader = &d.Header
	}
	if d.Pointer != "" {
		src.DedupPointer = &d.Pointer
	}
	if d.Window > 0 {
		src.DedupWindowSeconds = int(d.Window / time.Second)
	}
}

// seal stores a secret of the source sealed for its ID (nil for none).
func (s *Service) seal(sourceID, secret string) *string {
	if secret == "" {
		return nil
	}
	sealed := s.box.Seal([]byte(secret), []byte(sourceID))
	return &sealed
}

// CreateSource creates a source and returns it with its ingest token, shown this once. A custom event type the
// workspace lacks is created with it (schema: any object). Returns a ValidationFailed problem for a scheme's
// missing or unused fields, an event type outside the custom namespace, or a de-duplication key that is not exactly
// one of a header and a pointer.
func (s *Service) CreateSource(ctx context.Context, workspaceID string, n NewSource) (Source, string, error) {
	var errs problem.Fields
	checkTypeName(&errs, "/event_type", n.EventType)
	v := checkVerification(&errs, n.Verification)
	if n.Dedup != nil {
		checkDedup(&errs, *n.Dedup)
	}
	if err := errs.Err(); err != nil {
		return Source{}, "", err
	}
	token, hash := newToken()
	src := store.Source{ID: store.NewID("src"), WorkspaceID: workspaceID, Name: strings.TrimSpace(n.Name),
		EventType: n.EventType, TokenHash: hash, TokenLast4: token[len(token)-4:], Verification: v,
		MaxBodyBytes: DefaultMaxBodyBytes, RatePerMinute: DefaultRatePerMinute}
	src.SealedSecret = s.seal(src.ID, n.Verification.Secret)
	applyDedup(&src, n.Dedup)
	applyLimits(&src, n.Limits)
	var created *store.EventTypeDef
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if created, err = s.ensureType(ctx, tx, workspaceID, n.EventType, src.Name); err != nil {
			return err
		}
		return s.db.Sources.Create(ctx, tx, &src)
	})
	if err == nil {
		err = s.defineCreated(created)
	}
	if err != nil {
		return Source{}, "", sourceError(err, src.ID)
	}
	return sourceOf(src), token, nil
}

func applyLimits(src *store.Source, l Limits) {
	if l.MaxBodyBytes != nil {
		src.MaxBodyBytes = *l.MaxBodyBytes
	}
	if l.RatePerMinute != nil {
		src.RatePerMinute = *l.RatePerMinute
	}
}

// ensureType creates, inside tx, the custom type a source produces when the workspace does not have it yet, and
// returns it (nil when it existed). The caller defines it in the registry once tx has committed: a type of a
// transaction rolled back must not be listed.
func (s *Service) ensureType(ctx context.Context, tx store.Querier, workspaceID, name, sourceName string) (*store.EventTypeDef, error) {
	_, err := s.db.EventTypes.Get(ctx, tx, workspaceID, name)
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	def := store.EventTypeDef{WorkspaceID: workspaceID, Name: name, Schema: anyObject, Example: []byte(`{}`),
		Description: fmt.Sprintf("Requests received by the source %q.", sourceName)}
	if err := s.db.EventTypes.Create(ctx, tx, &def); err != nil {
		return nil, err
	}
	return &def, nil
}

// defineCreated defines a type ensureType created, once its transaction committed.
func (s *Service) defineCreated(def *store.EventTypeDef) error {
	if def == nil {
		return nil
	}
	_, err := s.define(*def)
	return err
}

// Source returns a source of a workspace. Returns a NotFound problem if it is not in that workspace.
func (s *Service) Source(ctx context.Context, workspaceID, id string) (Source, error) {
	src, err := s.db.Sources.Get(ctx, workspaceID, id)
	if err != nil {
		return Source{}, sourceError(err, id)
	}
	return sourceOf(src), nil
}

// Sources returns a page of a workspace's sources, newest first.
func (s *Service) Sources(ctx context.Context, workspaceID string, p store.Page) ([]Source, bool, error) {
	srcs, more, err := s.db.Sources.List(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	return sourcesOf(srcs), more, nil
}

// UpdateSource changes a source: read, changed and written in one transaction, so that concurrent changes of
// different fields all stay. Returns a NotFound problem if it is not in that workspace and a ValidationFailed
// problem as CreateSource does.
func (s *Service) UpdateSource(ctx context.Context, workspaceID, id string, c SourceChange) (Source, error) {
	var src store.Source
	var created *store.EventTypeDef
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if src, err = s.db.Sources.Lock(ctx, tx, workspaceID, id); err != nil {
			return err
		}
		if err := s.changeSource(&src, c); err != nil {
			return err
		}
		if c.EventType != nil {
			if created, err = s.ensureType(ctx, tx, workspaceID, src.EventType, src.Name); err != nil {
				return err
			}
		}
		return s.db.Sources.Update(ctx, tx, &src)
	})
	if err == nil {
		err = s.defineCreated(created)
	}
	if err != nil {
		return Source{}, sourceError(err, id)
	}
	return sourceOf(src), nil
}

// changeSource applies c to src. Returns a ValidationFailed problem as CreateSource does.
func (s *Service) changeSource(src *store.Source, c SourceChange) error {
	var errs problem.Fields
	if c.Name != nil {
		src.Name = strings.TrimSpace(*c.Name)
	}
	if c.EventType != nil {
		checkTypeName(&errs, "/event_type", *c.EventType)
		src.EventType = *c.EventType
	}
	if c.Verification != nil {
		src.Verification = checkVerification(&errs, *c.Verification)
		src.SealedSecret = s.seal(src.ID, c.Verification.Secret)
	}
	if c.Dedup.Given() {
		d, set := c.Dedup.Value()
		if set {
			checkDedup(&errs, d)
			applyDedup(src, &d)
		} else {
			applyDedup(src, nil)
		}
	}
	applyLimits(src, c.Limits)
	return errs.Err()
}

// DeleteSource removes a source with its request log; its events stay. Returns a NotFound problem if it is not in
// that workspace.
func (s *Service) DeleteSource(ctx context.Context, workspaceID, id string) error {
	return sourceError(s.db.Sources.Delete(ctx, workspaceID, id), id)
}

// RotateToken gives a source a new token, returned this once; the current one keeps working for grace (nil: the
// default). Returns a NotFound problem if it is not in that workspace.
func (s *Service) RotateToken(ctx context.Context, workspaceID, id string, grace *time.Duration) (Source, string, error) {
	g := DefaultTokenGrace
	if grace != nil {
		g = *grace
	}
	token, hash := newToken()
	src, err := s.db.Sources.RotateToken(ctx, workspaceID, id, hash, token[len(token)-4:], time.Now().UTC().Add(g))
	if err != nil {
		return Source{}, "", sourceError(err, id)
	}
	return sourceOf(src), token, nil
}

// Requests returns a page of a source's request log (of one outcome when outcome is not ""), newest first. Returns
// a NotFound problem if the source is not in that workspace.
func (s *Service) Requests(ctx context.Context, workspaceID, id, outcome string, p store.Page) ([]SourceRequest, bool, error) {
	if _, err := s.db.Sources.Get(ctx, workspaceID, id); err != nil {
		return nil, false, sourceError(err, id)
	}
	rs, more, err := s.db.SourceRequests.List(ctx, workspaceID, id, outcome, p)
	if err != nil {
		return nil, false, err
	}
	return sourceRequestsOf(rs), more, nil
}

// sourceError maps the store's errors about a source to the problems a client is told.
func sourceError(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return problem.Errorf(problem.NotFound, "There is no source %s in this workspace.", id)
	}
	return err
}

// Replay publishes again, as a new event of the source's type, the data of an event the source made: the way to
// send a recorded request to the subscribers again (a workflow fixed after it failed). The new event goes to the
// subscriptions and filters as they are now. Returns a NotFound problem if the source is not in the workspace or
// the event is not one of its events, and the problems of Publish.
func (s *Service) Replay(ctx context.Context, workspaceID, sourceID, eventID string) (events.Event, error) {
	src, err := s.Source(ctx, workspaceID, sourceID)
	if err != nil {
		return events.Event{}, err
	}
	made, err := s.db.SourceRequests.MadeEvent(ctx, src.ID, eventID)
	if err != nil {
		return events.Event{}, err
	}
	ev, err := s.db.Events.Get(ctx, workspaceID, eventID)
	if errors.Is(err, store.ErrNotFound) || !made {
		return events.Event{}, problem.Errorf(problem.NotFound,
			"The source %s made no event %s that is still kept.", sourceID, eventID)
	}
	if err != nil {
		return events.Event{}, err
	}
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return events.Event{}, fmt.Errorf("automation: event %s: %w", eventID, err)
	}
	return s.Publish(ctx, workspaceID, ev.Type, data)
}
