package apikey_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/apikey"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// keyShape is the pattern secret scanners are told to match: the prefix of a secret or a browser key, then 38
// base62 characters.
var keyShape = regexp.MustCompile(`^sb_[sp]k_[0-9A-Za-z]{38}$`)

// withChecksum builds a key from 32 random characters the way the key format is published (so secret scanners can check
// it offline), independently of the package: the CRC32 (IEEE) of the random part written as 6 base62 digits, most
// significant first.
func withChecksum(random string) string {
	c := crc32.ChecksumIEEE([]byte(random))
	var sum [6]byte
	for i := len(sum) - 1; i >= 0; i-- {
		sum[i] = base62[c%62]
		c /= 62
	}
	return "sb_sk_" + random + string(sum[:])
}

func generate(t *testing.T) apikey.Secret {
	t.Helper()
	s, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		s := generate(t)
		if !keyShape.MatchString(s.Plain) {
			t.Fatalf("Generate() = %q, want a match of %s", s.Plain, keyShape)
		}
		if len(s.Plain) != apikey.Len {
			t.Errorf("len(%q) = %d, want apikey.Len = %d", s.Plain, len(s.Plain), apikey.Len)
		}
		if err := apikey.Check(s.Plain); err != nil {
			t.Errorf("Check(Generate()) = %v, want nil", err)
		}
		if want := withChecksum(s.Plain[6:38]); s.Plain != want {
			t.Errorf("Generate() = %q, want the documented checksum: %q", s.Plain, want)
		}
		if s.Hash != apikey.Hash(s.Plain) {
			t.Errorf("Secret.Hash = %q, want Hash(Plain) = %q", s.Hash, apikey.Hash(s.Plain))
		}
		if want := s.Plain[:10]; s.DisplayPrefix != want {
			t.Errorf("DisplayPrefix = %q, want %q (prefix and four characters)", s.DisplayPrefix, want)
		}
		if want := s.Plain[len(s.Plain)-4:]; s.Last4 != want {
			t.Errorf("Last4 = %q, want %q", s.Last4, want)
		}
		if seen[s.Plain] {
			t.Fatalf("Generate() returned %q twice", s.Plain)
		}
		seen[s.Plain] = true
	}
}

// A browser key has the shape, checksum and length of a secret key, with its own prefix.
func TestGenerateBrowser(t *testing.T) {
	s, err := apikey.GenerateBrowser()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Plain, apikey.BrowserPrefix) || !keyShape.MatchString(s.Plain) || apikey.Check(s.Plain) != nil ||
		s.Plain[6:] != withChecksum(s.Plain[6:38])[6:] || s.DisplayPrefix != s.Plain[:10] || s.Hash != apikey.Hash(s.Plain) {
		t.Errorf("GenerateBrowser() = %+v", s)
	}
}

func TestGenerateUsesTheWholeAlphabet(t *testing.T) {
	// 500 keys carry 16,000 random characters: every one of the 62 must show up, or entropy is lost.
	used := map[rune]bool{}
	for range 500 {
		for _, r := range generate(t).Plain[6:38] {
			used[r] = true
		}
	}
	if len(used) != 62 {
		t.Errorf("random part used %d distinct characters, want all 62", len(used))
	}
}

// documentedRandoms are random parts whose keys, built as the format is published, Check accepts.
var documentedRandoms = []string{
	strings.Repeat("0", 32),
	strings.Repeat("z", 32),
	"0123456789ABCDEFGHIJKLMNOPQRSTUV",
	"WXYZabcdefghijklmnopqrstuvwxyz01",
}

func TestCheckAcceptsTheDocumentedFormat(t *testing.T) {
	for _, random := range documentedRandoms {
		if key := withChecksum(random); apikey.Check(key) != nil {
			t.Errorf("Check(%q) = %v, want nil", key, apikey.Check(key))
		}
	}
}

// rejectedKeys are strings Check must refuse, by what is wrong with them.
func rejectedKeys() []struct{ name, key string } {
	valid := withChecksum("0123456789ABCDEFGHIJKLMNOPQRSTUV")
	return []struct{ name, key string }{
		{"empty", ""},
		{"prefix only", "sb_sk_"},
		{"another kind's letter", "sb_xk_" + valid[6:]},
		{"upper-case prefix", "SB_SK_" + valid[6:]},
		{"no prefix", valid[6:]},
		{"prefix without underscore", "sbsk_" + valid[6:] + "0"},
		{"one character short", valid[:len(valid)-1]},
		{"one character long", valid + "0"},
		{"trailing newline", valid + "\n"},
		{"leading space", " " + valid[:len(valid)-1]},
		{"hyphen in body", valid[:20] + "-" + valid[21:]},
		{"underscore in body", valid[:20] + "_" + valid[21:]},
		{"NUL in body", valid[:20] + "\x00" + valid[21:]},
		{"non-ASCII in body", valid[:20] + "é" + valid[22:]},
		{"checksum of another random part", valid[:38] + withChecksum(strings.Repeat("1", 32))[38:]},
		{"random part and checksum swapped", "sb_sk_" + valid[38:] + valid[6:38]},
	}
}

func TestCheckRejects(t *testing.T) {
	for _, tt := range rejectedKeys() {
		t.Run(tt.name, func(t *testing.T) {
			if err := apikey.Check(tt.key); !errors.Is(err, apikey.ErrMalformed) {
				t.Errorf("Check(%q) = %v, want ErrMalformed", tt.key, err)
			}
		})
	}
}

// Check never panics, and accepts exactly the strings of the key's shape whose last six characters are the
// checksum of the random part, computed independently of the package (withChecksum); everything else is
// ErrMalformed.
func FuzzCheck(f *testing.F) {
	for _, random := range documentedRandoms {
		f.Add(withChecksum(random))
	}
	for _, tt := range rejectedKeys() {
		f.Add(tt.key)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := keyShape.MatchString(s) && s[6:] == withChecksum(s[6:38])[6:]
		switch err := apikey.Check(s); {
		case valid && err != nil:
			t.Fatalf("Check(%q) = %v for a key of the right shape and checksum", s, err)
		case !valid && !errors.Is(err, apikey.ErrMalformed):
			t.Fatalf("Check(%q) = %v, want ErrMalformed", s, err)
		}
	})
}

// Any single changed character — in the prefix, the random part or the checksum — is caught without a lookup.
func TestCheckRejectsEverySingleCharacterChange(t *testing.T) {
	for range 5 {
		key := generate(t).Plain
		for i := range len(key) {
			for j := range len(base62) {
				c := base62[j]
				if c == key[i] || i == 3 && c == 'p' {
					// sb_pk_ with the same random part is a well-formed browser key: a different hash, never found.
					continue
				}
				changed := key[:i] + string(c) + key[i+1:]
				if err := apikey.Check(changed); !errors.Is(err, apikey.ErrMalformed) {
					t.Fatalf("Check(%q) (position %d changed from %q to %q) = %v, want ErrMalformed",
						changed, i, key[i], c, err)
				}
			}
		}
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	key := generate(t).Plain
	if n := testing.AllocsPerRun(100, func() { _ = apikey.Check(key) }); n != 0 {
		t.Errorf("Check allocates %v times per call, want 0 (its doc comment promises none)", n)
	}
}

func TestHash(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		if got := apikey.Hash(tt.in); got != tt.want {
			t.Errorf("Hash(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	key := generate(t).Plain
	sum := sha256.Sum256([]byte(key))
	if got, want := apikey.Hash(key), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash(key) = %s, want lower-case hex SHA-256 %s", got, want)
	}
}

func TestMask(t *testing.T) {
	if got, want := apikey.Mask("sb_sk_AbCd", "WxYz"), "sb_sk_AbCd…WxYz"; got != want {
		t.Errorf("Mask = %q, want %q", got, want)
	}
}
