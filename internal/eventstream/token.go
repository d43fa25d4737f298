package eventstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/sealbox"
)

// TokenTTL is how long a stream token opens streams.
const TokenTTL = 5 * time.Minute

// tokenPrefix starts every stream token, so that secret scanners and people can tell one from an API key.
const tokenPrefix = "sbst_"

// tokenPurpose binds sealed tokens to their use: nothing else sealed with the server key opens as one.
var tokenPurpose = []byte("switchboard event stream token")

// ErrToken is returned for a stream token that is malformed, was not made with this server key, or expired.
var ErrToken = errors.New("eventstream: invalid stream token")

// token is what a stream token carries, sealed with the server key: whom it acts for and its expiry. Every replica
// with the same server key opens it.
type token struct {
	// KeyHash is the API key's hash, so that the key's revocation and expiry apply.
	KeyHash string `json:"k,omitempty"`
	// Session and Workspace: a console token acts for a signed-in session, in one workspace of its user; signing
	// out, or leaving the workspace, ends it.
	Session   string `json:"s,omitempty"`
	Workspace string `json:"w,omitempty"`
	Expires   int64  `json:"e"`
}

// Grant is whom an open stream token acts for: an API key (KeyHash), or a console session in a workspace.
type Grant struct {
	KeyHash              string
	SessionID, Workspace string
}

// IssueToken returns a token that opens streams for the API key with this hash until the returned time.
func IssueToken(box *sealbox.Box, keyHash string, now time.Time) (string, time.Time) {
	return issue(box, token{KeyHash: keyHash}, now)
}

// IssueConsoleToken returns a token that opens streams of a workspace for a console session until the returned
// time: the console's pages follow events with it without holding an API key. Whoever opens it must check that
// the session still lives and its user still belongs to the workspace.
func IssueConsoleToken(box *sealbox.Box, sessionID, workspaceID string, now time.Time) (string, time.Time) {
	return issue(box, token{Session: sessionID, Workspace: workspaceID}, now)
}

func issue(box *sealbox.Box, t token, now time.Time) (string, time.Time) {
	expires := now.Add(TokenTTL).UTC().Truncate(time.Second)
	t.Expires = expires.Unix()
	plain, _ := json.Marshal(t) // cannot fail: strings and a number
	sealed := box.Seal(plain, tokenPurpose)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:")) // Seal's own encoding
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw), expires
}

// OpenToken returns whom a stream token acts for. Returns ErrToken if it is malformed, was made with another server
// key, or expired at now.
func OpenToken(box *sealbox.Box, s string, now time.Time) (Grant, error) {
	encoded, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok || len(encoded) > 512 {
		return Grant{}, ErrToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return Grant{}, ErrToken
	}
	plain, err := box.Open("v1:"+base64.StdEncoding.EncodeToString(raw), tokenPurpose)
	if err != nil {
		return Grant{}, ErrToken
	}
	var t token
	if err := json.Unmarshal(plain, &t); err != nil || !now.Before(time.Unix(t.Expires, 0)) {
		return Grant{}, ErrToken
	}
	key, console := t.KeyHash != "", t.Session != "" && t.Workspace != ""
	if key == console { // neither, or both: not a token this server made
		return Grant{}, ErrToken
	}
	return Grant{KeyHash: t.KeyHash, SessionID: t.Session, Workspace: t.Workspace}, nil
}
