package automation

import (
	"time"

	"github.com/switchboard/switchboard/store"
)

// Source is a source as the service hands it out to its adapters (the API, the console): what its owner set, and
// of its token only the last characters, never its hash or its sealed secret.
type Source struct {
	ID          string
	WorkspaceID string
	Name        string
	EventType   string
	// TokenLast4 is what a list shows of the token.
	TokenLast4 string
	// PreviousTokenExpiresAt is when a rotated token stops working beside the current one; nil when none does.
	PreviousTokenExpiresAt *time.Time
	// Verification is the scheme without its Secret, which is never handed out.
	Verification Verification
	// Dedup is the de-duplication key, its Window always given; nil for none.
	Dedup         *Dedup
	MaxBodyBytes  int
	RatePerMinute int
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// SourceRequest is one request a source received, as its log shows it.
type SourceRequest struct {
	ID          string
	SourceID    string
	WorkspaceID string
	ReceivedAt  time.Time
	Method      string
	ContentType string
	SizeBytes   int
	// Outcome is what became of the request (an event, a duplicate, a refusal); Status the HTTP status answered.
	Outcome string
	Status  int
	Reason  *string
	Detail  *string
	// EventID is the event the request made, if it made one.
	EventID *string
	Headers map[string]string
	// BodyExcerpt is the start of the body as its bytes came in (any bytes at all); BodyTruncated says it is not
	// the whole body.
	BodyExcerpt   []byte
	BodyTruncated bool
}

func sourceOf(src store.Source) Source {
	v := src.Verification
	out := Source{ID: src.ID, WorkspaceID: src.WorkspaceID, Name: src.Name, EventType: src.EventType,
		TokenLast4: src.TokenLast4, Verification: Verification{Scheme: v.Scheme, Algorithm: v.Algorithm,
			Header: v.Header, Encoding: v.Encoding, Prefix: v.Prefix, Username: v.Username,
			ToleranceSeconds: v.ToleranceSeconds},
		MaxBodyBytes: src.MaxBodyBytes, RatePerMinute: src.RatePerMinute, CreatedAt: src.CreatedAt,
		UpdatedAt: src.UpdatedAt}
	if src.PreviousTokenUntil != nil && src.PreviousTokenUntil.After(time.Now()) {
		out.PreviousTokenExpiresAt = src.PreviousTokenUntil
	}
	if src.DedupHeader != nil || src.DedupPointer != nil {
		d := Dedup{Window: time.Duration(src.DedupWindowSeconds) * time.Second}
		if src.DedupHeader != nil {
			d.Header = *src.DedupHeader
		}
		if src.DedupPointer != nil {
			d.Pointer = *src.DedupPointer
		}
		out.Dedup = &d
	}
	return out
}

func sourcesOf(srcs []store.Source) []Source {
	out := make([]Source, len(srcs))
	for i, src := range srcs {
		out[i] = sourceOf(src)
	}
	return out
}

func sourceRequestsOf(rs []store.SourceRequest) []SourceRequest {
	out := make([]SourceRequest, len(rs))
	for i, r := range rs {
		out[i] = SourceRequest{ID: r.ID, SourceID: r.SourceID, WorkspaceID: r.WorkspaceID, ReceivedAt: r.ReceivedAt,
			Method: r.Method, ContentType: r.ContentType, SizeBytes: r.SizeBytes, Outcome: r.Outcome, Status: r.Status,
			Reason: r.Reason, Detail: r.Detail, EventID: r.EventID, Headers: r.Headers, BodyExcerpt: r.BodyExcerpt,
			BodyTruncated: r.BodyTruncated}
	}
	return out
}
