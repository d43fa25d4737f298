package sealbox_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/internal/sealbox"
)

// sealedShape is the text Seal stores in a TEXT column.
var sealedShape = regexp.MustCompile(`^v1:[A-Za-z0-9+/]+={0,2}$`)

func newKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, sealbox.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return key
}

func newBox(t *testing.T, key []byte) *sealbox.Box {
	t.Helper()
	b, err := sealbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := sealbox.New(make([]byte, n)); err == nil {
			t.Errorf("New(%d-byte key) = nil error, want one", n)
		}
	}
	if _, err := sealbox.New(make([]byte, 32)); err != nil {
		t.Errorf("New(32-byte key) = %v", err)
	}
}

func TestBoxRoundTrip(t *testing.T) {
	box := newBox(t, newKey(t))
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	ad := []byte("whk_01JDW8Q6X4M6Z3V0H8B1N2C3D4")

	sealed := box.Seal(secret, ad)
	if !sealedShape.MatchString(sealed) {
		t.Fatalf("Seal() = %q, want a match of %s", sealed, sealedShape)
	}
	if strings.Contains(sealed, "MfKQ9r8G") {
		t.Fatalf("Seal() = %q contains the plaintext", sealed)
	}
	got, err := box.Open(sealed, ad)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open(Seal(x)) = %q, %v; want %q", got, err, secret)
	}
	if again := box.Seal(secret, ad); again == sealed {
		t.Errorf("Seal() twice gave the same text %q; want a fresh nonce each time", sealed)
	}
	empty, err := box.Open(box.Seal(nil, ad), ad)
	if err != nil || len(empty) != 0 {
		t.Errorf("Open(Seal(empty)) = %q, %v; want empty", empty, err)
	}
}

func TestBoxOpenFails(t *testing.T) {
	key := newKey(t)
	box := newBox(t, key)
	ad := []byte("whk_A")
	sealed := box.Seal([]byte("whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0cw=="), ad)
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:"))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 1

	tests := []struct {
		name   string
		box    *sealbox.Box
		sealed string
		ad     []byte
	}{
		{"another server key", newBox(t, newKey(t)), sealed, ad},
		{"another row", box, sealed, []byte("whk_B")},
		{"no associated data", box, sealed, nil},
		{"a flipped bit", box, "v1:" + base64.StdEncoding.EncodeToString(flipped), ad},
		{"truncated", box, "v1:" + base64.StdEncoding.EncodeToString(data[:len(data)-1]), ad},
		{"shorter than a nonce", box, "v1:" + base64.StdEncoding.EncodeToString(data[:8]), ad},
		{"no version", box, strings.TrimPrefix(sealed, "v1:"), ad},
		{"unknown version", box, "v2:" + strings.TrimPrefix(sealed, "v1:"), ad},
		{"not base64", box, "v1:***", ad},
		{"empty", box, "", ad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.box.Open(tt.sealed, tt.ad)
			if !errors.Is(err, sealbox.ErrOpen) || got != nil {
				t.Errorf("Open() = %q, %v; want ErrOpen", got, err)
			}
		})
	}
}

// envSpellings are the ways operators write a 32-byte key: openssl rand -base64 32, Python's urlsafe_b64encode,
// either without padding, and with the newline of `$(cat file)` or a Kubernetes secret.
func envSpellings(key []byte) map[string]string {
	return map[string]string{
		"standard":         base64.StdEncoding.EncodeToString(key),
		"standard, raw":    base64.RawStdEncoding.EncodeToString(key),
		"URL":              base64.URLEncoding.EncodeToString(key),
		"URL, raw":         base64.RawURLEncoding.EncodeToString(key),
		"trailing newline": base64.StdEncoding.EncodeToString(key) + "\n",
		"spaces around":    "  " + base64.StdEncoding.EncodeToString(key) + " ",
	}
}

func TestLoadOrCreateKeyFromEnv(t *testing.T) {
	// Bytes that differ between the standard and URL alphabets, so that both decoders are exercised.
	key := bytes.Repeat([]byte{0xfb, 0xff, 0xbe, 0x01}, 8)
	for name, env := range envSpellings(key) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			got, created, err := sealbox.LoadOrCreateKey(env, dir)
			if err != nil || created || !bytes.Equal(got, key) {
				t.Fatalf("LoadOrCreateKey() = %x, %v, %v; want %x, false, nil", got, created, err, key)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the data directory holds %v; the environment key must not be written anywhere", entries)
			}
		})
	}
}

func TestLoadOrCreateKeyEnvWinsOverFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := sealbox.LoadOrCreateKey("", dir); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	got, created, err := sealbox.LoadOrCreateKey(base64.StdEncoding.EncodeToString(key), dir)
	if err != nil || created || !bytes.Equal(got, key) {
		t.Fatalf("LoadOrCreateKey() = %x, %v, %v; want the environment's key %x", got, created, err, key)
	}
}

func TestLoadOrCreateKeyBadEnv(t *testing.T) {
	tests := map[string]string{
		"not base64":     "correct horse battery staple",
		"16 bytes":       base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"31 bytes":       base64.StdEncoding.EncodeToString(make([]byte, 31)),
		"33 bytes":       base64.StdEncoding.EncodeToString(make([]byte, 33)),
		"hex of 32":      strings.Repeat("ab", 32),
		"whitespace":     "   ",
		"mixed alphabet": "+" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))[1:42] + "_",
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			key, created, err := sealbox.LoadOrCreateKey(env, dir)
			if err == nil || key != nil || created {
				t.Fatalf("LoadOrCreateKey(%q) = %x, %v, %v; want an error", env, key, created, err)
			}
			if !strings.Contains(err.Error(), "SWITCHBOARD_SECRET_KEY") {
				t.Errorf("error %q does not name SWITCHBOARD_SECRET_KEY", err)
			}
			if trimmed := strings.TrimSpace(env); trimmed != "" && strings.Contains(err.Error(), trimmed) {
				t.Errorf("error %q echoes the value", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a bad environment key must not fall back to a key file; the data directory holds %v", entries)
			}
		})
	}
}

func TestLoadOrCreateKeyWithoutDataDir(t *testing.T) {
	key, created, err := sealbox.LoadOrCreateKey("", "")
	if err == nil || key != nil || created {
		t.Fatalf("LoadOrCreateKey(\"\", \"\") = %x, %v, %v; want an error", key, created, err)
	}
	if !strings.Contains(err.Error(), "set SWITCHBOARD_SECRET_KEY") {
		t.Errorf("error %q does not tell the operator to set SWITCHBOARD_SECRET_KEY", err)
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested") // does not exist yet
	key, created, err := sealbox.LoadOrCreateKey("", dir)
	if err != nil || !created || len(key) != sealbox.KeySize {
		t.Fatalf("first LoadOrCreateKey() = %d bytes, %v, %v; want a new 32-byte key", len(key), created, err)
	}
	path := filepath.Join(dir, "secret.key")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, perm)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.StdEncoding.EncodeToString(key) + "\n"; string(text) != want {
		t.Errorf("%s holds %q, want %q", path, text, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the data directory holds %v, want only secret.key (no temporary file left behind)", entries)
	}

	again, created, err := sealbox.LoadOrCreateKey("", dir)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("second LoadOrCreateKey() = %x, %v, %v; want the same key %x, not created", again, created, err, key)
	}
}

func TestLoadOrCreateKeyFileWrittenByOperator(t *testing.T) {
	key := newKey(t)
	for name, text := range envSpellings(key) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "secret.key"), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, created, err := sealbox.LoadOrCreateKey("", dir)
			if err != nil || created || !bytes.Equal(got, key) {
				t.Fatalf("LoadOrCreateKey() = %x, %v, %v; want %x from the file", got, created, err, key)
			}
		})
	}
}

func TestLoadOrCreateKeyNeverReplacesABadFile(t *testing.T) {
	for name, text := range map[string]string{
		"empty":    "",
		"16 bytes": base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"garbage":  "not a key",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret.key")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			key, created, err := sealbox.LoadOrCreateKey("", filepath.Dir(path))
			if err == nil || key != nil || created {
				t.Fatalf("LoadOrCreateKey() = %x, %v, %v; want an error", key, created, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if after, _ := os.ReadFile(path); string(after) != text {
				t.Errorf("the key file was changed to %q; a bad key file must be left for the operator to restore", after)
			}
		})
	}
}

// TestLoadOrCreateKeyConcurrent stands for several replicas starting at once on one data directory: all must end
// up with the same key, and exactly one of them reports creating it.
func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		keys    [n][]byte
		created [n]bool
		errs    [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			keys[i], created[i], errs[i] = sealbox.LoadOrCreateKey("", dir)
		})
	}
	close(start)
	wg.Wait()

	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("LoadOrCreateKey() #%d = %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Errorf("LoadOrCreateKey() #%d = %x, #0 = %x; want one key", i, keys[i], keys[0])
		}
		if created[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Errorf("%d calls reported creating the key, want 1", creators)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the data directory holds %v, want only secret.key", entries)
	}
}
