package eventstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/switchboard/switchboard/internal/sealbox"
	"strings"
	"time"
)

// TokenTTL is how long a stream token opens streams.
const TokenTTL = 5 * time.Minute

// tokenPrefix starts every stream token, so that secret scanners and people can tell one from an API key.
const tokenPrefix = "sbst_"

// tokenPurpose binds sealed tokens to their use: nothing else sealed with the server key opens as one.
var tokenPurpose = []byte("switchboard event stream token")

// ErrToken is returned for a stream token that is malformed, was not made with this server key, or expired.
var ErrToken = errors.New("eventstream: invalid stream token")

// token is what a stream token carries, sealed with the server key: the key it acts for (by its hash, so that the
// key's revocation and expiry apply) and its expiry. Every replica with the same server key opens it.
type token struct {
	KeyHash string `json:"k"`
	Expires int64  `json:"e"`
}

// IssueToken returns a token that opens streams for the API key with this hash until the returned time.
func IssueToken(box *sealbox.Box, keyHash string, now time.Time) (string, time.Time) {
	expires := now.Add(TokenTTL).UTC().Truncate(time.Second)
	plain, _ := json.Marshal(token{KeyHash: keyHash, Expires: expires.Unix()}) // cannot fail: strings and a number
	sealed := box.Seal(plain, tokenPurpose)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:")) // Seal's own encoding
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw), expires
}

// OpenToken returns the hash of the API key a stream token acts for. Returns ErrToken if it is malformed, was made
// with another server key, or expired at now.
func OpenToken(box *sealbox.Box, s string, now time.Time) (string, error) {
	encoded, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok || len(encoded) > 512 {
		return "", ErrToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return "", ErrToken
	}
	plain, err := box.Open("v1:"+base64.StdEncoding.EncodeToString(raw), tokenPurpose)
	if err != nil {
		return "", ErrToken
	}
	var t token
	if err := json.Unmarshal(plain, &t); err != nil || t.KeyHash == "" || !now.Before(time.Unix(t.Expires, 0)) {
		return "", ErrToken
	}
	return t.KeyHash, nil
}
