package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// commandTimeout bounds how long a command waits for the process holding the session when its context has no
// deadline of its own.
const commandTimeout = 30 * time.Second

// Do runs a command on an instance's session: here when this process holds it, otherwise through instance_commands
// in the process that does. An instance nobody holds (or whose session is not open) answers ErrNotConnected.
func (h *Hub) Do(ctx context.Context, id string, c channels.Command) (json.RawMessage, error) {
	h.mu.Lock()
	x := h.held[id]
	h.mu.Unlock()
	if x != nil {
		return h.runLocal(ctx, x, c)
	}
	holder, err := h.db.InstanceLeases.Holder(ctx, id, time.Now())
	if err != nil {
		return nil, err
	}
	if holder == "" || holder == h.opts.Owner {
		return nil, fmt.Errorf("instance %s: %w", id, channels.ErrNotConnected)
	}
	args := string(c.Args)
	if args == "" {
		args = "null"
	}
	cmd := &store.InstanceCommand{ID: store.NewID("cmd"), InstanceID: id, Owner: holder, Op: c.Op, Args: args}
	if err := h.db.InstanceCommands.Put(ctx, cmd); err != nil {
		return nil, err
	}
	defer func() { _ = h.db.InstanceCommands.Delete(context.WithoutCancel(ctx), cmd.ID) }()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, commandTimeout)
		defer cancel()
	}
	wait := 2 * time.Millisecond
	for {
		got, err := h.db.InstanceCommands.Get(ctx, cmd.ID)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if err == nil && got.DoneAt != nil {
			return decodeResult(got)
		}
		if !sleep(ctx, wait) {
			return nil, fmt.Errorf("instance %s: the process holding its session did not answer in time: %w", id, channels.ErrNotConnected)
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// runLocal runs a command on a session this process holds.
func (h *Hub) runLocal(ctx context.Context, x *held, c channels.Command) (json.RawMessage, error) {
	switch c.Op {
	case opStop:
		h.stopLocal(x)
		return json.RawMessage(`{}`), nil
	case opStart:
		h.restart(x)
		return json.RawMessage(`{}`), nil
	}
	sess, _ := x.session()
	if sess == nil {
		return nil, fmt.Errorf("instance %s: %w", x.id, channels.ErrNotConnected)
	}
	return channels.Invoke(ctx, sess, c)
}

// runCommands runs the commands other processes leave for this one until ctx ends.
func (h *Hub) runCommands(ctx context.Context) {
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		if h.db.Dialect() == store.Postgres {
			h.db.Listen(ctx, store.Listener{Channel: store.CommandsChannel, Connected: h.wakeCommands,
				Notified: func(owner string) {
					if owner == h.opts.Owner {
						h.wakeCommands()
					}
				}})
			return
		}
		// SQLite: another process's commit shows in the WAL index.
		w := h.db.WatchCommits()
		if w == nil {
			return
		}
		w.Watch(ctx, 10*time.Millisecond, h.wakeCommands)
	}()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	running := map[string]bool{}
	finished := make(chan string, 64)
	expired := time.Now()
	for {
		cs, err := h.db.InstanceCommands.Pending(ctx, h.opts.Owner)
		if err != nil && ctx.Err() == nil {
			h.log.Warn("channel runtime: could not read commands", "error", err)
		}
		for _, c := range cs {
			if running[c.ID] {
				continue
			}
			running[c.ID] = true
			go func(c store.InstanceCommand) {
				defer func() { finished <- c.ID }()
				h.execute(ctx, c)
			}(c)
		}
		if time.Since(expired) > time.Minute {
			expired = time.Now()
			_ = h.db.InstanceCommands.Expire(ctx, time.Now().Add(-10*time.Minute))
		}
		select {
		case <-ctx.Done():
			for len(running) > 0 {
				delete(running, <-finished)
			}
			return
		case id := <-finished:
			delete(running, id)
		case <-h.commands:
		case <-poll.C:
		}
	}
}

func (h *Hub) wakeCommands() {
	select {
	case h.commands <- struct{}{}:
	default:
	}
}

// execute runs one command left by another process and stores its outcome.
func (h *Hub) execute(ctx context.Context, c store.InstanceCommand) {
	cctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	h.mu.Lock()
	x := h.held[c.InstanceID]
	h.mu.Unlock()
	var (
		res json.RawMessage
		err error
	)
	if x == nil {
		err = channels.ErrNotConnected
	} else {
		res, err = h.runLocal(cctx, x, channels.Command{Op: c.Op, Args: json.RawMessage(c.Args)})
	}
	encodeResult(&c, res, err)
	if err := h.db.InstanceCommands.Complete(context.WithoutCancel(ctx), &c); err != nil {
		h.log.Warn("channel runtime: could not store a command's result", "command", c.ID, "error", err)
	}
}

// The kinds of error a command's outcome carries across processes.
const (
	errFailure      = "failure"
	errUnsupported  = "unsupported"
	errNotConnected = "not_connected"
	errOther        = "error"
)

type wireFailure struct {
	Code       string `json:"code"`
	Detail     string `json:"detail"`
	Retryable  bool   `json:"retryable"`
	RetryAfter int64  `json:"retry_after_ms"`
}

func encodeResult(c *store.InstanceCommand, res json.RawMessage, err error) {
	if err == nil {
		s := string(res)
		if s == "" {
			s = "{}"
		}
		c.Result = &s
		return
	}
	kind, text := errOther, err.Error()
	var f *channels.Failure
	switch {
	case errors.As(err, &f):
		kind = errFailure
		b, _ := json.Marshal(wireFailure{Code: f.Code, Detail: f.Detail, Retryable: f.Retryable, RetryAfter: f.RetryAfter.Milliseconds()})
		text = string(b)
	case errors.Is(err, channels.ErrUnsupported):
		kind = errUnsupported
	case errors.Is(err, channels.ErrNotConnected):
		kind = errNotConnected
	}
	c.ErrorKind, c.Error = &kind, &text
}

func decodeResult(c store.InstanceCommand) (json.RawMessage, error) {
	if c.ErrorKind == nil {
		if c.Result == nil {
			return json.RawMessage(`{}`), nil
		}
		return json.RawMessage(*c.Result), nil
	}
	text := ""
	if c.Error != nil {
		text = *c.Error
	}
	switch *c.ErrorKind {
	case errFailure:
		var w wireFailure
		if err := json.Unmarshal([]byte(text), &w); err != nil {
			return nil, fmt.Errorf("channels: a command's failure does not decode: %w", err)
		}
		return nil, &channels.Failure{Code: w.Code, Detail: w.Detail, Retryable: w.Retryable,
			RetryAfter: time.Duration(w.RetryAfter) * time.Millisecond}
	case errUnsupported:
		return nil, channels.ErrUnsupported
	case errNotConnected:
		return nil, fmt.Errorf("instance %s: %w", c.InstanceID, channels.ErrNotConnected)
	}
	return nil, errors.New(text)
}
