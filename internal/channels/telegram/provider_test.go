package telegram

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"

	"github.com/switchboard/switchboard/internal/channels"
)

func TestNormalizeAddress(t *testing.T) {
	p := New(Options{})
	for in, want := range map[string]string{"123456789": "123456789", "-1001234567890": "-1001234567890", "@Acme_Bot": "@acme_bot", " 42 ": "42"} {
		if got, err := p.NormalizeAddress(in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "@ab", "@1abc", "12a", "+15550100", "@" + string(make([]byte, 40))} {
		if got, err := p.NormalizeAddress(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

// The Bot API's errors become the failures clients act on, and the bot token never survives into one.
func TestFailures(t *testing.T) {
	s := &session{token: "123:secret-token"}
	for _, tc := range []struct {
		err       error
		code      string
		retryable bool
	}{
		{&bot.TooManyRequestsError{Message: "too many requests", RetryAfter: 7}, "rate_limited", true},
		{errors.Join(bot.ErrorForbidden, errors.New("Forbidden: bot was blocked by the user")), "recipient_blocked", false},
		{errors.Join(bot.ErrorForbidden, errors.New("Forbidden: user is deactivated")), "recipient_not_on_network", false},
		{errors.Join(bot.ErrorBadRequest, errors.New("Bad Request: chat not found")), "recipient_not_on_network", false},
		{errors.Join(bot.ErrorBadRequest, errors.New("Bad Request: message to edit not found")), "message_not_found", false},
		{errors.Join(bot.ErrorUnauthorized, errors.New("Unauthorized")), "not_connected", false},
	} {
		var f *channels.Failure
		if !errors.As(s.failure(tc.err, channels.Outbound{Type: channels.TypeText}), &f) || f.Code != tc.code || f.Retryable != tc.retryable {
			t.Errorf("%v → %+v, want %s", tc.err, f, tc.code)
		}
	}
	var f *channels.Failure
	_ = errors.As(s.failure(&bot.TooManyRequestsError{RetryAfter: 7}, channels.Outbound{}), &f)
	if f.RetryAfter != 7*time.Second {
		t.Errorf("retry after %v", f.RetryAfter)
	}
	// A transport error stays a plain (retried) error, without the token.
	err := s.failure(errors.New("Post https://api.telegram.org/bot123:secret-token/sendMessage: timeout"), channels.Outbound{})
	if errors.As(err, new(*channels.Failure)) || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("a transport error: %v", err)
	}
}
