// Package sealbox seals secrets at rest with the server secret key (AES-256-GCM): webhook signing secrets and
// headers, broker credentials, instance configs and sessions, source secrets and stored idempotent answers. A copy of
// the database alone reveals none of them; the associated data binds a sealed value to its row.
package sealbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of the server secret key that seals signing secrets at rest (AES-256).
const KeySize = 32

// KeyFile is the name of the server secret key file in the data directory.
const KeyFile = "secret.key"

// sealedPrefix versions the sealed text, so that a later scheme (another cipher, a rotated server key) can be told
// apart from this one in the same column.
const sealedPrefix = "v1:"

// ErrOpen means a sealed secret does not open: it was sealed with another server key or for another row, or its
// text was altered or truncated.
var ErrOpen = errors.New("sealbox: sealed secret does not open (wrong server key, wrong row or altered text)")

// Box seals secrets with the server secret key (AES-256-GCM), so that a copy of the database
// alone does not reveal them. A Box is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// New returns a Box sealing with key. Returns an error if key is not KeySize bytes long.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealbox: the server secret key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealbox: %w", err)
	}
	// A fresh random nonce per seal (prepended to the ciphertext) is safe far beyond the number of secrets one
	// server will ever seal (the limit is 2^32 seals per key).
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("sealbox: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext bound to associatedData (the ID of the row it is stored in) and returns text fit for a TEXT column:
// "v1:" and the standard base64 of nonce, ciphertext and tag. The binding means a sealed secret copied into another
// row does not open there.
func (b *Box) Seal(plaintext, associatedData []byte) string {
	return sealedPrefix + base64.StdEncoding.EncodeToString(b.aead.Seal(nil, nil, plaintext, associatedData))
}

// Open decrypts text made by Seal with the same key and associatedData. Returns ErrOpen if it does not open.
func (b *Box) Open(sealed string, associatedData []byte) ([]byte, error) {
	encoded, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, ErrOpen
	}
	data, err := base64.StdEncoding.Strict().DecodeString(encoded)
	if err != nil {
		return nil, ErrOpen
	}
	plaintext, err := b.aead.Open(nil, nil, data, associatedData)
	if err != nil {
		return nil, ErrOpen
	}
	return plaintext, nil
}

// LoadOrCreateKey returns the server secret key and whether it was just generated (the caller should then tell the
// operator to back up the key file: without it no sealed secret can be opened again).
//
// env is the value of SWITCHBOARD_SECRET_KEY; when set it wins and must be the base64 (standard or URL alphabet,
// padded or not) of KeySize bytes. Otherwise the key is read from KeyFile in dataDir, or generated and written
// there with mode 0600. The file appears complete or not at all and is never replaced, so when two processes start
// at once the second uses the key of the first.
//
// Returns an error if env is set but malformed, if dataDir is empty (there is nowhere to keep a generated key: the
// operator must set SWITCHBOARD_SECRET_KEY), if the key file exists but does not hold a key, or if the file cannot
// be read or written. Error messages never contain key material.
func LoadOrCreateKey(env, dataDir string) (key []byte, created bool, err error) {
	if env != "" {
		key, ok := decodeKey(env)
		if !ok {
			return nil, false, errors.New("sealbox: SWITCHBOARD_SECRET_KEY must be the base64 of 32 bytes (make one with: openssl rand -base64 32)")
		}
		return key, false, nil
	}
	if dataDir == "" {
		return nil, false, errors.New("sealbox: no server secret key: set SWITCHBOARD_SECRET_KEY to the base64 of 32 random bytes (openssl rand -base64 32) and keep it safe; without a data directory there is nowhere to store a generated one")
	}
	path := filepath.Join(dataDir, KeyFile)
	key, err = readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("sealbox: generating the server secret key: %w", err)
	}
	err = createKeyFile(path, key)
	switch {
	case err == nil:
		return key, true, nil
	case errors.Is(err, fs.ErrExist):
		// Another process won the race: its key is the one, or the secrets it seals would not open here.
		key, err = readKeyFile(path)
		return key, false, err
	default:
		return nil, false, err
	}
}

// decodeKey accepts every common base64 spelling, since operators paste keys from openssl, Python or Kubernetes.
func decodeKey(s string) ([]byte, bool) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.Strict().DecodeString(s); err == nil && len(key) == KeySize {
			return key, true
		}
	}
	return nil, false
}

// readKeyFile returns the key in path; the error wraps fs.ErrNotExist when there is no such file.
func readKeyFile(path string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sealbox: reading the server secret key: %w", err)
	}
	key, ok := decodeKey(string(text))
	if !ok {
		return nil, fmt.Errorf("sealbox: %s does not hold the base64 of 32 bytes; restore it from a backup (secrets sealed with another key cannot be opened)", path)
	}
	return key, nil
}

// createKeyFile writes key to path unless path exists (the error then wraps fs.ErrExist). The key is written to a
// temporary file first, so no reader ever sees a partial key.
func createKeyFile(path string, key []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sealbox: creating the data directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+KeyFile+"-*") // mode 0600
	if err != nil {
		return fmt.Errorf("sealbox: writing the server secret key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sealbox: writing the server secret key: %w", err)
	}
	// A hard link, unlike a rename, fails when path exists: a key another process has started using must never be
	// replaced.
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("sealbox: writing the server secret key: %w", err)
	}
	// Persist the new directory entry, or a crash could lose the key after secrets were sealed with it. Best
	// effort: the key file itself is synced, and not every platform can sync a directory.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
