package telegram

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/internal/channels"
)

// credentials is what a bot's session keeps between connects: the secret token Telegram sends with every push to
// the hook URL (sealed by the service like any credential).
type credentials struct {
	WebhookSecret string `json:"webhook_secret"`
}

// allowedUpdates are the updates the bot asks Telegram for.
var allowedUpdates = []string{models.AllowedUpdateMessage, models.AllowedUpdateEditedMessage,
	models.AllowedUpdateChannelPost, models.AllowedUpdateCallbackQuery, models.AllowedUpdateMyChatMember,
	models.AllowedUpdatePollAnswer}

type session struct {
	p                       *Provider
	inst                    channels.Instance
	sink                    channels.Sink
	api, token, mode, parse string
	b                       *bot.Bot
	http                    *http.Client
	secret                  string
	mu                      sync.Mutex
	lastChat                map[string]time.Time // when the last send to each chat ended (or is due to start)
	lastAny                 time.Time
}

func newSession(p *Provider, inst channels.Instance, sink channels.Sink, api, token, mode, parse string) *session {
	s := &session{p: p, inst: inst, sink: sink, api: api, token: token, mode: mode, parse: parse,
		http: inst.Client(p.opts.HTTP), lastChat: map[string]time.Time{}}
	s.b = s.botAPI().bot()
	return s
}

// botAPI is how a session, or a push of its instance, reaches the Bot API: its server, token and HTTP client
// (through the instance's proxy when it has one).
type botAPI struct {
	p          *Provider
	http       *http.Client
	api, token string
}

func (s *session) botAPI() botAPI { return botAPI{p: s.p, http: s.http, api: s.api, token: s.token} }

// bot is a Bot API client of the token (no call is made).
func (ba botAPI) bot() *bot.Bot {
	b, _ := bot.New(ba.token, bot.WithServerURL(ba.api), bot.WithSkipGetMe(), bot.WithHTTPClient(ba.p.opts.PollTimeout, ba.http),
		bot.WithErrorsHandler(func(error) {}))
	return b
}

// Run checks the token, reports the bot's account, and takes updates until ctx ends.
func (s *session) Run(ctx context.Context) error {
	me, err := s.b.GetMe(ctx)
	if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
		// Telegram answers 401 (and 404 for a malformed token): no retry will make it work.
		return s.sink.State(ctx, channels.StatusFailed, "auth_failed: Telegram refused the bot token; check it with @BotFather")
	}
	if err != nil {
		return s.redact(err)
	}
	var cred credentials
	if len(s.inst.Credentials) > 0 {
		_ = json.Unmarshal(s.inst.Credentials, &cred)
	}
	if cred.WebhookSecret == "" {
		cred.WebhookSecret = newSecret()
	}
	s.secret = cred.WebhookSecret
	raw, _ := json.Marshal(cred)
	// The secret is durable before Telegram knows it, so that no push is ever refused for a secret not yet stored.
	if err := s.sink.Connected(ctx, userParty(*me), raw); err != nil {
		return err
	}
	if s.mode == "webhook" {
		if err := s.setWebhook(ctx); err != nil {
			return err
		}
		check := time.NewTicker(s.p.opts.WebhookCheck)
		defer check.Stop()
	watch:
		for {
			select {
			case <-ctx.Done():
				break watch
			case <-check.C:
				info, err := s.b.GetWebhookInfo(ctx)
				if ctx.Err() != nil {
					break watch
				}
				if err != nil {
					return s.redact(err)
				}
				if info.URL != s.p.hookURL(s.inst.ID) {
					if err := s.setWebhook(ctx); err != nil {
						return err
					}
				}
			}
		}
		// Updates wait at Telegram (up to a day) until the instance connects again, here or in another process.
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.b.DeleteWebhook(stop, &bot.DeleteWebhookParams{})
		return nil
	}
	return s.poll(ctx)
}

// setWebhook points the bot's webhook at the instance's hook URL with its secret token.
func (s *session) setWebhook(ctx context.Context) error {
	_, err := s.b.SetWebhook(ctx, &bot.SetWebhookParams{URL: s.p.hookURL(s.inst.ID), SecretToken: s.secret,
		AllowedUpdates: allowedUpdates})
	return s.redact(err)
}

// poll takes updates by getUpdates: each batch is stored before the next call confirms it to Telegram, so a crash
// gets the unconfirmed ones handed over again (and the sink applies them once).
func (s *session) poll(ctx context.Context) error {
	if _, err := s.b.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil {
		return s.redact(err)
	}
	var offset int64
	for {
		updates, err := s.getUpdates(ctx, offset)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, bot.ErrorUnauthorized) {
			return s.sink.State(ctx, channels.StatusFailed, "auth_failed: Telegram no longer accepts the bot token")
		}
		if err != nil {
			return err
		}
		for _, u := range updates {
			if _, err := apply(ctx, s.botAPI(), s.sink, u); err != nil {
				return err
			}
			offset = u.ID + 1
		}
	}
}

// getUpdates long-polls Telegram for updates after offset.
func (s *session) getUpdates(ctx context.Context, offset int64) ([]models.Update, error) {
	form := url.Values{"offset": {strconv.FormatInt(offset, 10)},
		"timeout": {strconv.Itoa(int(s.p.opts.PollTimeout.Seconds()))}}
	allowed, _ := json.Marshal(allowedUpdates)
	form.Set("allowed_updates", string(allowed))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/bot"+s.token+"/getUpdates", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, s.redact(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := s.http.Do(req)
	if err != nil {
		return nil, s.redact(err)
	}
	defer res.Body.Close()
	var out struct {
		OK          bool            `json:"ok"`
		Result      []models.Update `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("telegram: getUpdates: HTTP %d with an unreadable body: %w", res.StatusCode, err)
	}
	switch {
	case out.OK:
		return out.Result, nil
	case out.ErrorCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%w, %s", bot.ErrorUnauthorized, out.Description)
	case out.ErrorCode == http.StatusTooManyRequests && out.Parameters.RetryAfter > 0:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(out.Parameters.RetryAfter) * time.Second):
		}
		return nil, nil
	}
	return nil, fmt.Errorf("telegram: getUpdates: %d %s", out.ErrorCode, out.Description)
}

// Logout stops the bot's pushes; the token itself is the user's to revoke with @BotFather.
func (s *session) Logout(ctx context.Context) error {
	_, err := s.b.DeleteWebhook(ctx, &bot.DeleteWebhookParams{})
	return s.redact(err)
}

// redact removes the bot token from an error's text: a token in a log line is a stolen bot.
func (s *session) redact(err error) error {
	if err == nil || !strings.Contains(err.Error(), s.token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), s.token, "<bot-token>"))
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Receive verifies a push to an instance's hook URL by the secret token Telegram sends with it, then applies its
// update.
func (p *Provider) Receive(ctx context.Context, inst channels.Instance, sink channels.Sink, push channels.Push) (channels.PushAnswer, error) {
	var cred credentials
	if len(inst.Credentials) > 0 {
		_ = json.Unmarshal(inst.Credentials, &cred)
	}
	got := http.Header(push.Header).Get("X-Telegram-Bot-Api-Secret-Token")
	if push.Method != http.MethodPost || cred.WebhookSecret == "" ||
		subtle.ConstantTimeCompare([]byte(got), []byte(cred.WebhookSecret)) != 1 {
		return channels.PushAnswer{}, fmt.Errorf("%w: X-Telegram-Bot-Api-Secret-Token does not match", channels.ErrPushUnverified)
	}
	var u models.Update
	if err := json.Unmarshal(push.Body, &u); err != nil {
		return channels.PushAnswer{}, &channels.Failure{Code: "invalid_push", Detail: "the body is not a Telegram Update: " + err.Error()}
	}
	token, _ := inst.Config["bot_token"].(string)
	api := DefaultAPIURL
	if s, _ := inst.Config["api_url"].(string); s != "" {
		api = strings.TrimRight(s, "/")
	}
	n, err := apply(ctx, botAPI{p: p, http: inst.Client(p.opts.HTTP), api: api, token: token}, sink, u)
	return channels.PushAnswer{Applied: n}, err
}
