package text_test

import (
	"reflect"
	"testing"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"":               "",
		"plain":          "plain",
		"caf\u00e9 😀":    "caf\u00e9 😀",
		"a\x00b":         "a\uFFFDb",
		"\x00\x00":       "\uFFFD\uFFFD",
		"a\xffb":         "a\uFFFDb",
		"a\xff\xfeb":     "a\uFFFDb",
		"cut \xe2\x82":   "cut \uFFFD",
		"'\\x00';--\x00": "'\\x00';--\uFFFD",
	} {
		if got := text.Clean(in); got != want || !text.Storable(got) {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// Check names every place of a decoded JSON value that cannot be stored, in a stable order.
func TestCheck(t *testing.T) {
	v := map[string]any{
		"ok":    "fine",
		"s":     "a\x00b",
		"a\x00": 1,
		"list":  []any{"x", map[string]any{"deep": "\xff"}},
		"~/":    "\x00",
	}
	var errs problem.Fields
	text.Check(v, "", &errs)
	want := problem.Fields{
		{Pointer: "/a\x00", Detail: "a member name must not contain the character U+0000"},
		{Pointer: "/list/1/deep", Detail: "must be valid UTF-8"},
		{Pointer: "/s", Detail: "must not contain the character U+0000"},
		{Pointer: "/~0~1", Detail: "must not contain the character U+0000"},
	}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("Check = %+v\nwant    %+v", errs, want)
	}
	errs = nil
	text.Check("\x00", "", &errs)
	if len(errs) != 1 || errs[0].Pointer != "/" {
		t.Errorf("a string body: %+v", errs)
	}
}

// Cleaned reaches every string of a value — through pointers, slices, maps and interfaces — and leaves the
// original, bytes, functions and unexported fields alone.
func TestCleaned(t *testing.T) {
	type inner struct {
		Name string
		IDs  []string
	}
	type report struct {
		Text    string
		Inner   *inner
		Parts   []inner
		Meta    map[string]any
		Raw     []byte
		Open    func() string
		private string
	}
	open := func() string { return "open" }
	in := report{Text: "a\x00", Inner: &inner{Name: "\xff", IDs: []string{"ok", "b\x00"}},
		Parts: []inner{{Name: "p\x00"}}, Meta: map[string]any{"k\x00": "v\x00", "n": 1}, Raw: []byte("r\x00"),
		Open: open, private: "x\x00"}
	got := text.Cleaned(in)
	if got.Text != "a\uFFFD" || got.Inner.Name != "\uFFFD" || got.Inner.IDs[1] != "b\uFFFD" ||
		got.Parts[0].Name != "p\uFFFD" || got.Meta["k\uFFFD"] != "v\uFFFD" || got.Meta["n"] != 1 ||
		string(got.Raw) != "r\x00" || got.Open() != "open" || got.private != "x\x00" {
		t.Errorf("Cleaned = %+v", got)
	}
	if in.Text != "a\x00" || in.Inner.Name != "\xff" || in.Inner.IDs[1] != "b\x00" || in.Parts[0].Name != "p\x00" {
		t.Errorf("the original changed: %+v", in)
	}
	var nothing *inner
	if text.Cleaned(nothing) != nil {
		t.Error("a nil pointer is not kept nil")
	}
}
