package handlers

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// accessLine is what the access log says of one request.
type accessLine struct {
	requestID, method, path string
	status                  int
	elapsed                 time.Duration
	operation               string
	// keyID and workspaceID are empty on requests without an authenticated key.
	keyID, workspaceID string
}

// logAccess writes the request's access log line: formatted here when the logger is the process's JSON logger
// (telemetry.NewJSONLogger, whose writer s.accessOut is), else through the logger. Both give the same line; the
// first skips slog's generic work per attribute, a quarter of the middleware's cost per request.
func (s *Server) logAccess(ctx context.Context, l accessLine) {
	if s.accessOut == nil {
		attrs := make([]slog.Attr, 0, 8)
		attrs = append(attrs, slog.String("request_id", l.requestID), slog.String("method", l.method),
			slog.String("path", l.path), slog.Int("status", l.status),
			slog.Int64("duration_us", l.elapsed.Microseconds()), slog.String("operation", l.operation))
		if l.keyID != "" {
			attrs = append(attrs, slog.String("key_id", l.keyID), slog.String("workspace_id", l.workspaceID))
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
		return
	}
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	buf := accessBuffers.Get().(*[]byte)
	*buf = appendAccessLine((*buf)[:0], time.Now(), l)
	_, _ = s.accessOut.Write(*buf)
	if cap(*buf) <= 4<<10 { // an outsized line (a long path) does not pin its buffer
		accessBuffers.Put(buf)
	}
}

var accessBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendAccessLine appends the line slog's JSON handler writes for the access log's record at t: time, level,
// message and the attributes of logAccess, in that order (TestAccessLineIsSlogs holds the two together).
func appendAccessLine(b []byte, t time.Time, l accessLine) []byte {
	b = append(b, `{"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","request_id":`...)
	b = appendJSONString(b, l.requestID)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, l.method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, l.path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.status), 10)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, l.elapsed.Microseconds(), 10)
	b = append(b, `,"operation":`...)
	b = appendJSONString(b, l.operation)
	if l.keyID != "" {
		b = append(b, `,"key_id":`...)
		b = appendJSONString(b, l.keyID)
		b = append(b, `,"workspace_id":`...)
		b = appendJSONString(b, l.workspaceID)
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string the way slog's JSON handler escapes it: no HTML escaping, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
