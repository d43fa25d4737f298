package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrModelNotFound is returned for a model no upstream serves.
var ErrModelNotFound = errors.New("no upstream serves this model")

// UpstreamError is a completion the upstream did not give: it refused the request (Rejected: the request is at
// fault, Message says why), limited it (Status 429, RetryAfter), or failed (anything else, unreachable included).
type UpstreamError struct {
	Upstream   string
	Status     int
	Rejected   bool
	Message    string
	RetryAfter time.Duration
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("model upstream %s: %d %s", e.Upstream, e.Status, e.Message)
}

// Completion is an upstream's successful answer on its way to the caller. Body is the upstream's body, passed
// through unchanged; reading it to the end (and closing it) counts the tokens its usage reports.
type Completion struct {
	Status      int
	ContentType string
	Stream      bool
	Body        io.ReadCloser
}

// maxErrorBody bounds what is read of an upstream's error answer.
const maxErrorBody = 64 << 10

// maxCompletionBody bounds a non-streamed completion (a stream is bounded by completionTimeout instead).
const maxCompletionBody = 16 << 20

// completionTimeout bounds a whole completion, stream included.
const completionTimeout = 10 * time.Minute

// Complete passes an OpenAI chat-completions request body to the upstream of its model for a workspace, under the
// workspace's limits. A streamed request asks the upstream for its usage in the last chunk (stream_options
// include_usage) unless the caller chose, so that its tokens are counted; that chunk has no choices, which
// OpenAI's SDKs expect. Errors: ErrModelNotFound, *LimitError, *UpstreamError.
func (s *Service) Complete(ctx context.Context, workspaceID string, body []byte) (*Completion, error) {
	var head struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("chat completion body: %w", err)
	}
	_, u, ok := s.Lookup(ctx, workspaceID, head.Model)
	if !ok {
		return nil, ErrModelNotFound
	}
	if err := s.usage.admit(workspaceID, s.cfg.Now()); err != nil {
		return nil, err
	}
	if head.Stream && head.StreamOptions == nil {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(body, &all); err == nil {
			all["stream_options"] = json.RawMessage(`{"include_usage":true}`)
			if b, err := json.Marshal(all); err == nil {
				body = b
			}
		}
	}
	// The caller's cancellation still ends the call (a client that hangs up stops its stream), but the deadline
	// is this package's: a caller's request deadline would cut a long stream.
	parent := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), completionTimeout)
	stop := context.AfterFunc(parent, cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if head.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	authorize(req, u)
	res, err := s.cfg.Client.Do(req)
	if err != nil {
		cancel()
		stop()
		s.log.Warn("model upstream unreachable", "upstream", u.Name, "error", err)
		return nil, &UpstreamError{Upstream: u.Name, Status: http.StatusBadGateway, Message: "the model's upstream does not answer"}
	}
	if res.StatusCode/100 != 2 {
		defer cancel()
		defer res.Body.Close()
		return nil, upstreamError(u.Name, res)
	}
	ct := res.Header.Get("Content-Type")
	streamed := strings.HasPrefix(ct, "text/event-stream")
	var r io.ReadCloser = res.Body
	if !streamed {
		r = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(res.Body, maxCompletionBody), res.Body}
	}
	c := &Completion{Status: res.StatusCode, ContentType: ct, Stream: streamed}
	c.Body = &counted{r: r, stream: streamed, done: func(tokens int) {
		cancel()
		stop()
		s.usage.spend(workspaceID, tokens, s.cfg.Now())
	}}
	return c, nil
}

// upstreamError reads an upstream's refusal: OpenAI's {"error": {"message": …}} when it sends that.
func upstreamError(name string, res *http.Response) *UpstreamError {
	e := &UpstreamError{Upstream: name, Status: res.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Message = body.Error.Message
	}
	switch {
	case res.StatusCode == http.StatusTooManyRequests:
		if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		// The operator's key is wrong: nothing the caller can change, and the upstream's words may name the key.
		e.Message = "the model's upstream refused Switchboard's credentials"
	case res.StatusCode/100 == 4:
		e.Rejected = true
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("the model's upstream answered %d", res.StatusCode)
	}
	if len(e.Message) > 1024 {
		e.Message = e.Message[:1024]
	}
	return e
}

// counted passes a completion's body through and reads the `usage` it reports: the whole JSON object of a
// completion, or the `data:` lines of a stream (the last chunk carries it). done runs once, at Close, with the
// tokens seen.
type counted struct {
	r      io.ReadCloser
	stream bool
	done   func(tokens int)

	buf    bytes.Buffer // a non-streamed body, or the stream's unfinished line
	tokens int
	closed bool
}

// maxLine bounds the part of a stream line kept to find usage in (usage chunks are small).
const maxLine = 64 << 10

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if c.stream {
			c.scanLines(p[:n])
		} else {
			c.buf.Write(p[:n])
		}
	}
	return n, err
}

func (c *counted) scanLines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if c.buf.Len()+len(p) <= maxLine {
				c.buf.Write(p)
			}
			return
		}
		if c.buf.Len()+i <= maxLine {
			c.buf.Write(p[:i])
			c.line(c.buf.Bytes())
		}
		c.buf.Reset()
		p = p[i+1:]
	}
}

func (c *counted) line(l []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	if t := usageTokens(bytes.TrimSpace(data)); t > 0 {
		c.tokens = t
	}
}

// usageTokens reads total_tokens of a completion or chunk's usage (0 when it has none).
func usageTokens(b []byte) int {
	var v struct {
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return 0
	}
	return v.Usage.TotalTokens
}

func (c *counted) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.stream {
		sc := bufio.NewScanner(&c.buf) // a last line without its newline
		for sc.Scan() {
			c.line(sc.Bytes())
		}
	} else {
		c.tokens = usageTokens(c.buf.Bytes())
	}
	err := c.r.Close()
	c.done(c.tokens)
	return err
}
