// Package apikey defines Switchboard's API keys: their format, checksum and hash, the scope catalogue, and the
// Verifier that authenticates a presented key with an in-process cache in front of the store.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math/big"
)

// Prefix starts every secret key. Secret scanners can match keys with `\bsb_sk_[0-9A-Za-z]{38}\b`.
const Prefix = "sb_sk_"

// BrowserPrefix starts every browser key, whose secret may be public: it works only from the pages of its origins
// and only for its one browser scope. Same length and checksum as a secret key.
const BrowserPrefix = "sb_pk_"

const (
	randomLen   = 32
	checksumLen = 6
	// Len is the length of a whole key.
	Len = len(Prefix) + randomLen + checksumLen
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrMalformed means the string cannot be a Switchboard key: wrong prefix, length, alphabet or checksum.
var ErrMalformed = errors.New("apikey: malformed key")

// Secret is a newly generated key: the plain text to show once, and what may be stored.
type Secret struct {
	Plain string
	// Hash is the hex SHA-256 of Plain, the only form in which the key is stored.
	Hash string
	// DisplayPrefix ("sb_sk_" and four characters) and Last4 let people recognise the key.
	DisplayPrefix string
	Last4         string
}

// Generate makes a new random secret key: Prefix, 32 base62 characters (190 bits) and 6 base62 characters of the CRC32 of
// those 32, so that typos and made-up strings are rejected without touching the database.
func Generate() (Secret, error) { return generate(Prefix) }

// GenerateBrowser makes a new random browser key: Generate with BrowserPrefix.
func GenerateBrowser() (Secret, error) { return generate(BrowserPrefix) }

func generate(prefix string) (Secret, error) {
	random := make([]byte, randomLen)
	max := big.NewInt(int64(len(base62)))
	for i := range random {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return Secret{}, err
		}
		random[i] = base62[n.Int64()]
	}
	plain := prefix + string(random) + checksum(random)
	return Secret{Plain: plain, Hash: Hash(plain), DisplayPrefix: plain[:len(Prefix)+4], Last4: plain[len(plain)-4:]}, nil
}

func checksum(random []byte) string {
	c := crc32.ChecksumIEEE(random)
	var out [checksumLen]byte
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = base62[c%62]
		c /= 62
	}
	return string(out[:])
}

// Check reports whether s has the shape and checksum of a key, secret or browser. It allocates nothing and never
// touches storage.
func Check(s string) error {
	if len(s) != Len || s[:len(Prefix)] != Prefix && s[:len(BrowserPrefix)] != BrowserPrefix {
		return ErrMalformed
	}
	body := s[len(Prefix):]
	for i := 0; i < len(body); i++ {
		if !isBase62(body[i]) {
			return ErrMalformed
		}
	}
	c := crc32String(body[:randomLen])
	for i := Len - 1; i >= Len-checksumLen; i-- {
		if s[i] != base62[c%62] {
			return ErrMalformed
		}
		c /= 62
	}
	return nil
}

// crc32String is crc32.ChecksumIEEE of a string without converting it to []byte, which would escape to the heap.
func crc32String(s string) uint32 {
	c := ^uint32(0)
	for i := 0; i < len(s); i++ {
		c = crc32.IEEETable[byte(c)^s[i]] ^ c>>8
	}
	return ^c
}

func isBase62(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z'
}

// Hash is the stored form of a key: hex SHA-256. Keys carry 190 random bits, so a slow KDF would add latency to
// every request without adding security.
func Hash(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// Mask shows a stored key the way people recognise it: "sb_sk_ABCD…WXYZ" (or "sb_pk_…").
func Mask(displayPrefix, last4 string) string {
	return displayPrefix + "…" + last4
}
