package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/workspaces"
)

var templateFuncs = template.FuncMap{
	"ago":   ago,
	"date":  func(t time.Time) string { return t.UTC().Format("2 Jan 2006") },
	"rfc":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"join":  strings.Join,
	"upper": strings.ToUpper,
	"eq2":   func(a, b string) bool { return a == b },
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
