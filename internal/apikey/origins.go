package apikey

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// MaxOrigins is how many origins one key may list.
const MaxOrigins = 20

// ErrOrigin is wrapped by every reason NormalizeOrigin refuses an origin.
var ErrOrigin = errors.New("not an origin")

// NormalizeOrigin checks one origin a key may list and returns it the way browsers send it in the Origin header:
// "https://www.example.com", "http://127.0.0.1:5173", or a pattern "https://*.example.com" that matches every
// subdomain (one label or more) of example.com but not example.com itself. Scheme and host are lowercased and a
// default port is dropped. Refused, with a reason wrapping ErrOrigin: anything but http and https, a path, query,
// fragment or user, a wildcard anywhere but as the whole leftmost label or over fewer than two labels
// ("https://*.com"), and "null" — the origin of sandboxed frames and local files of any site, which no key can
// tell apart.
func NormalizeOrigin(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", originErr("empty")
	}
	if raw == "null" {
		return "", originErr(`"null" is the origin of sandboxed frames and local files of any site; it cannot be allowed`)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || scheme != "http" && scheme != "https" {
		return "", originErr("must start with https:// or http://")
	}
	if rest = strings.TrimSuffix(rest, "/"); strings.ContainsAny(rest, "/?#@\\ ") || rest == "" {
		return "", originErr("an origin is a scheme and a host (and a port): no path, query, fragment or user")
	}
	host, port := rest, ""
	if h, p, err := net.SplitHostPort(rest); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", originErr("the port must be a number from 1 to 65535")
		}
	}
	host = strings.ToLower(host)
	if port == "443" && scheme == "https" || port == "80" && scheme == "http" {
		port = ""
	}
	wild := false
	if after, ok := strings.CutPrefix(host, "*."); ok {
		wild, host = true, after
		if strings.Count(host, ".") < 1 {
			return "", originErr("a wildcard must stand for subdomains of a registrable name, as in https://*.example.com")
		}
	}
	if strings.Contains(host, "*") {
		return "", originErr("a wildcard may only be the whole leftmost label, as in https://*.example.com")
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil && strings.Contains(host, ":") {
		host = "[" + strings.Trim(host, "[]") + "]"
	} else if u, err := url.Parse(scheme + "://" + host); err != nil || u.Hostname() != host || !validHost(host) {
		return "", originErr("the host is not a valid host name or address")
	}
	out := scheme + "://"
	if wild {
		out += "*."
	}
	out += host
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

type originError string

func (e originError) Error() string { return string(e) }
func (e originError) Unwrap() error { return ErrOrigin }

func originErr(reason string) error { return originError(reason) }

// OriginAllowed reports whether a request's Origin header value is one of origins (as NormalizeOrigin returns them):
// equal to an exact origin, or a subdomain of a pattern's name with the same scheme and port. "null" and the empty
// origin are never allowed.
func OriginAllowed(origins []string, origin string) bool {
	if origin == "" || origin == "null" {
		return false
	}
	for _, o := range origins {
		if o == origin {
			return true
		}
		scheme, rest, ok := strings.Cut(o, "://*")
		if !ok || len(origin) <= len(o)-1 || !strings.HasPrefix(origin, scheme+"://") || !strings.HasSuffix(origin, rest) {
			continue
		}
		// What the wildcard stands for: labels of a host name, nothing that could end the host early.
		sub := origin[len(scheme)+3 : len(origin)-len(rest)]
		if sub != "" && !strings.ContainsAny(sub, ":/?#@*") && sub[0] != '.' && sub[len(sub)-1] != '.' {
			return true
		}
	}
	return false
}
