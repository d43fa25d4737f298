package console

import (
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/internal/workspaces"
)

var templateFuncs = template.FuncMap{
	"ago":  ago,
	"date": func(t time.Time) string { return t.UTC().Format("2 Jan 2006") },
	"rfc":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"join": strings.Join,
	// list is its arguments as a list, for a template's own options.
	"list": func(s ...string) []string { return s },
	// has reports whether a list of strings (a form's checked values) holds one.
	"has":   func(list []string, v string) bool { return slices.Contains(list, v) },
	"upper": strings.ToUpper,
	// on reports whether an optional setting is set and true.
	"on": func(b *bool) bool { return b != nil && *b },
	// deref is an optional text, or "" when it is not set.
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"eq2": func(a, b string) bool { return a == b },
	// bytesText shows bytes kept as they came in (a request log's body) as text a page can hold.
	"bytesText": text.Bytes,
	// maxName is the longest name of a workspace or key, for the forms' maxlength (the service judges names).
	"maxName": func() int { return workspaces.MaxNameLength },
}

// ago renders a past time the way people read it: "just now", "2 minutes ago", "3 days ago", then a date.
func ago(t time.Time) string {
	d := time.Since(t)
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit + " ago"
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d.Minutes()), "minute")
	case d < 24*time.Hour:
		return plural(int(d.Hours()), "hour")
	case d < 30*24*time.Hour:
		return plural(int(d.Hours()/24), "day")
	}
	return t.UTC().Format("2 Jan 2006")
}

func init() {
	for name, fn := range map[string]any{
		"hasPrefix": strings.HasPrefix,
		// num writes a limit of the spec (a JSON number) as HTML attributes want it: 1000000000, not 1e+09.
		"num": func(f *float64) string {
			if f == nil {
				return ""
			}
			return strconv.FormatFloat(*f, 'f', -1, 64)
		},
		"add":  func(a, b any) float64 { return number(a) + number(b) },
		"sub":  func(a, b any) float64 { return number(a) - number(b) },
		"half": func(a any) float64 { return number(a) / 2 },
		"flag": func(b bool) string {
			if b {
				return "1"
			}
			return ""
		},
		"pageURL": pageURL,
	} {
		templateFuncs[name] = fn
	}
}

// number is a template's numeric argument as a float64 (0 for anything else).
func number(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// pageURL is path with the query parameters given as name, value pairs; empty values are left out.
func pageURL(path string, pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
