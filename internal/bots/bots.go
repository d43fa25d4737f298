// Package bots runs the bots of messaging instances: a bot answers an instance's inbound messages from a model of
// the operator's upstreams (package llm) or from a workflow (an HTTP service that receives each message as a signed
// Standard Webhooks request), and hands a chat to a human when the person asks. It follows the event log's
// message.received events, and sends its replies through the channels service's ordinary send, so that pacing,
// statuses and message events apply to them as to any message.
package bots

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// Config is what the service needs; zero durations take the defaults.
type Config struct {
	Events   *events.Outbox
	Channels *channels.Service
	LLM      *llm.Service
	Box      *sealbox.Box
	// Guard checks workflow URLs and carries their requests.
	Guard  *egress.Guard
	Logger *slog.Logger
	// Attempts is how many times a failing model or workflow is tried for one message (default DefaultAttempts);
	// RetryDelay is the wait before the second try, doubled before each next (default DefaultRetryDelay).
	Attempts   int
	RetryDelay time.Duration
	// Poll is how often the event log is read for new messages (default DefaultPoll).
	Poll time.Duration
}

// Defaults of Config.
const (
	DefaultAttempts   = 3
	DefaultRetryDelay = 2 * time.Second
	DefaultPoll       = 500 * time.Millisecond
)

// Defaults of a new bot.
const (
	defaultRepliesPerMinute = 6
	defaultMemory           = 10
	defaultHandoffMinutes   = 60
	defaultWorkflowTimeout  = 15
	maxWorkflowTimeout      = 60
)

// Service manages bots and runs them.
type Service struct {
	db   *store.DB
	cfg  Config
	log  *slog.Logger
	http *http.Client
}

// New returns the bot service over db.
func New(db *store.DB, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	return &Service{db: db, cfg: cfg, log: cfg.Logger, http: cfg.Guard.Client(maxWorkflowTimeout * time.Second)}
}

// settings is what store.Bot.Settings holds: the API's fields of a bot, with the defaults filled in.
type settings struct {
	Trigger          gen.BotTrigger           `json:"trigger"`
	Handoff          gen.BotHandoff           `json:"handoff"`
	RepliesPerMinute int                      `json:"replies_per_minute"`
	Model            *gen.BotModelSettings    `json:"model,omitempty"`
	Workflow         *gen.BotWorkflowSettings `json:"workflow,omitempty"`
}

func settingsOf(b store.Bot) (settings, error) {
	var st settings
	raw, err := json.Marshal(b.Settings)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

func (st settings) store() (map[string]any, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m)
}

// check validates settings a schema cannot judge, for a bot of kind: its kind's settings are there, the model is
// served, the URL is allowed, the pattern compiles. Returns a ValidationFailed problem.
func (s *Service) check(ctx context.Context, workspaceID, kind string, st *settings) error {
	var invalid problem.Fields
	switch kind {
	case string(gen.BotKindModel):
		switch {
		case st.Model == nil:
			invalid.Add("/model", "a model bot needs its model settings")
		case !s.served(ctx, workspaceID, st.Model.Model):
			invalid.Add("/model/model", "no upstream of this server serves this model (GET /api/v1/models lists them)")
		}
		if st.Workflow != nil {
			invalid.Add("/workflow", "a model bot has no workflow settings")
		}
	case string(gen.BotKindWorkflow):
		switch {
		case st.Workflow == nil:
			invalid.Add("/workflow", "a workflow bot needs its workflow settings")
		default:
			if err := s.cfg.Guard.CheckURL(ctx, st.Workflow.Url); err != nil {
				invalid.Add("/workflow/url", err.Error())
			}
		}
		if st.Model != nil {
			invalid.Add("/model", "a workflow bot has no model settings")
		}
	}
	switch st.Trigger.Type {
	case gen.BotTriggerTypeKeyword, gen.BotTriggerTypeRegex:
		if st.Trigger.Pattern == nil {
			invalid.Add("/trigger/pattern", "a keyword or regex trigger needs its pattern")
		} else if st.Trigger.Type == gen.BotTriggerTypeRegex {
			if _, err := regexp.Compile(*st.Trigger.Pattern); err != nil {
				invalid.Add("/trigger/pattern", "not a regular expression: "+err.Error())
			}
		}
	default:
		st.Trigger.Pattern = nil
	}
	if len(invalid) > 0 {
		return &problem.Error{Code: problem.ValidationFailed, Detail: "The bot's settings are not valid.", Fields: invalid}
	}
	return nil
}

func (s *Service) served(ctx context.Context, workspaceID, model string) bool {
	_, _, ok := s.cfg.LLM.Lookup(ctx, workspaceID, model)
	return ok
}

func withDefaults(st *settings) {
	if st.Trigger.Type == "" {
		st.Trigger.Type = gen.BotTriggerTypeAll
	}
	if st.Handoff.Minutes == nil {
		m := defaultHandoffMinutes
		st.Handoff.Minutes = &m
	}
	if st.RepliesPerMinute == 0 {
		st.RepliesPerMinute = defaultRepliesPerMinute
	}
	if st.Model != nil && st.Model.Memory == nil {
		m := defaultMemory
		st.Model.Memory = &m
	}
	if st.Workflow != nil && st.Workflow.TimeoutSeconds == nil {
		t := defaultWorkflowTimeout
		st.Workflow.TimeoutSeconds = &t
	}
}

func notFound(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "No such "+what+" in this workspace.")
	}
	return err
}

// Create adds a bot to an instance. A workflow bot gets a signing secret, returned in the answer only. Errors:
// NotFound (no such instance), ValidationFailed.
func (s *Service) Create(ctx context.Context, workspaceID, instanceID string, in gen.BotCreate) (gen.Bot, error) {
	if _, err := s.cfg.Channels.Get(ctx, workspaceID, instanceID); err != nil {
		return gen.Bot{}, err
	}
	st := settings{Model: in.Model, Workflow: in.Workflow}
	if in.Trigger != nil {
		st.Trigger = *in.Trigger
	}
	if in.Handoff != nil {
		st.Handoff = *in.Handoff
	}
	if in.RepliesPerMinute != nil {
		st.RepliesPerMinute = *in.RepliesPerMinute
	}
	withDefaults(&st)
	if err := s.check(ctx, workspaceID, string(in.Kind), &st); err != nil {
		return gen.Bot{}, err
	}
	m, err := st.store()
	if err != nil {
		return gen.Bot{}, err
	}
	b := store.Bot{ID: store.NewID("bot"), WorkspaceID: workspaceID, InstanceID: instanceID, Name: in.Name, Kind: string(in.Kind),
		Enabled: in.Enabled == nil || *in.Enabled, Settings: m}
	var secret string
	if in.Kind == gen.BotCreateKindWorkflow {
		if secret, err = webhook.NewSecret(); err != nil {
			return gen.Bot{}, err
		}
		// Sealed for this bot only: a sealed secret copied to another row does not open.
		sealed := s.cfg.Box.Seal([]byte(secret), []byte(b.ID))
		b.SealedSecret = &sealed
	}
	if err := s.db.Bots.Create(ctx, s.db.Bun(), &b); err != nil {
		return gen.Bot{}, notFound(err, "instance")
	}
	out, err := apiBot(b)
	if secret != "" {
		out.SigningSecret = &secret
	}
	return out, err
}

// Get returns a bot with its latest runs. Errors: NotFound.
func (s *Service) Get(ctx context.Context, workspaceID, instanceID, id string) (gen.Bot, error) {
	b, err := s.db.Bots.Get(ctx, workspaceID, instanceID, id)
	if err != nil {
		return gen.Bot{}, notFound(err, "bot")
	}
	return s.WithRuns(ctx, b)
}

// WithRuns renders a bot of List for the API with its latest runs, as Get answers it.
func (s *Service) WithRuns(ctx context.Context, b store.Bot) (gen.Bot, error) {
	out, err := apiBot(b)
	if err != nil {
		return out, err
	}
	runs, err := s.db.Bots.Runs(ctx, b.ID, 20)
	if err != nil {
		return out, err
	}
	list := make([]gen.BotRun, len(runs))
	for i, r := range runs {
		list[i] = gen.BotRun{MessageId: r.MessageID, ChatId: r.ChatID, Status: gen.BotRunStatus(r.Status),
			Attempts: r.Attempts, Tokens: r.Tokens, ReplyMessageId: r.ReplyMessageID, Reason: r.Reason, CreatedAt: r.CreatedAt}
	}
	out.RecentRuns = &list
	return out, nil
}

// List returns a page of an instance's bots. Errors: NotFound (no such instance).
func (s *Service) List(ctx context.Context, workspaceID, instanceID string, p store.Page) ([]store.Bot, bool, error) {
	if _, err := s.cfg.Channels.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, false, err
	}
	return s.db.Bots.List(ctx, workspaceID, instanceID, p)
}

// Update changes the fields of in that are set. Errors: NotFound, ValidationFailed.
func (s *Service) Update(ctx context.Context, workspaceID, instanceID, id string, in gen.BotUpdate) (gen.Bot, error) {
	b, err := s.db.Bots.Get(ctx, workspaceID, instanceID, id)
	if err != nil {
		return gen.Bot{}, notFound(err, "bot")
	}
	st, err := settingsOf(b)
	if err != nil {
		return gen.Bot{}, err
	}
	if in.Name != nil {
		b.Name = *in.Name
	}
	if in.Enabled != nil {
		b.Enabled = *in.Enabled
	}
	if in.Trigger != nil {
		st.Trigger = *in.Trigger
	}
	if in.Handoff != nil {
		st.Handoff = *in.Handoff
	}
	if in.RepliesPerMinute != nil {
		st.RepliesPerMinute = *in.RepliesPerMinute
	}
	if in.Model != nil {
		st.Model = in.Model
	}
	if in.Workflow != nil {
		st.Workflow = in.Workflow
	}
	withDefaults(&st)
	if err := s.check(ctx, workspaceID, b.Kind, &st); err != nil {
		return gen.Bot{}, err
	}
	if b.Settings, err = st.store(); err != nil {
		return gen.Bot{}, err
	}
	if err := s.db.Bots.Update(ctx, &b); err != nil {
		return gen.Bot{}, notFound(err, "bot")
	}
	return apiBot(b)
}

// Delete removes a bot. Errors: NotFound.
func (s *Service) Delete(ctx context.Context, workspaceID, instanceID, id string) error {
	return notFound(s.db.Bots.Delete(ctx, workspaceID, instanceID, id), "bot")
}

// APIBot renders a stored bot for the API (without its secret).
func APIBot(b store.Bot) (gen.Bot, error) { return apiBot(b) }

func apiBot(b store.Bot) (gen.Bot, error) {
	st, err := settingsOf(b)
	if err != nil {
		return gen.Bot{}, err
	}
	return gen.Bot{Id: b.ID, Object: gen.BotObjectBot, InstanceId: b.InstanceID, Name: b.Name, Kind: gen.BotKind(b.Kind),
		Enabled: b.Enabled, Trigger: st.Trigger, Handoff: st.Handoff, RepliesPerMinute: st.RepliesPerMinute,
		Model: st.Model, Workflow: st.Workflow, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}, nil
}

// Control pauses or resumes the bots of a chat by hand. Errors: NotFound (no such chat of the instance).
func (s *Service) Control(ctx context.Context, workspaceID, instanceID, chatID string, in gen.ChatBotControl) (gen.ChatBotState, error) {
	if _, err := s.cfg.Channels.GetChat(ctx, workspaceID, instanceID, chatID); err != nil {
		return gen.ChatBotState{}, err
	}
	if in.Action == gen.ChatBotControlActionResume {
		if err := s.db.Bots.Resume(ctx, workspaceID, chatID); err != nil {
			return gen.ChatBotState{}, err
		}
		return gen.ChatBotState{Object: gen.ChatBotStateObjectChatBot, ChatId: chatID}, nil
	}
	var until *time.Time
	if in.Minutes != nil {
		t := time.Now().UTC().Add(time.Duration(*in.Minutes) * time.Minute).Truncate(time.Second)
		until = &t
	}
	if err := s.pause(ctx, workspaceID, instanceID, chatID, "", "", gen.ChatBotStateReasonManual, until); err != nil {
		return gen.ChatBotState{}, err
	}
	reason := gen.ChatBotStateReasonManual
	return gen.ChatBotState{Object: gen.ChatBotStateObjectChatBot, ChatId: chatID, Paused: true, PausedUntil: until,
		Reason: &reason}, nil
}

// takeoversShown bounds the chats in takeover Takeovers returns.
const takeoversShown = 100

// Takeovers returns the chats of an instance in human takeover now, the latest first (at most 100). Errors:
// NotFound (no such instance).
func (s *Service) Takeovers(ctx context.Context, workspaceID, instanceID string) ([]gen.ChatBotState, error) {
	if _, err := s.cfg.Channels.Get(ctx, workspaceID, instanceID); err != nil {
		return nil, err
	}
	rows, err := s.db.Bots.Takeovers(ctx, workspaceID, instanceID, time.Now(), takeoversShown)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ChatBotState, len(rows))
	for i, t := range rows {
		reason := gen.ChatBotStateReason(t.Reason)
		out[i] = gen.ChatBotState{Object: gen.ChatBotStateObjectChatBot, ChatId: t.ChatID, Paused: true,
			PausedUntil: t.PausedUntil, Reason: &reason}
	}
	return out, nil
}

// pause puts a chat in takeover and emits bot.handoff, in one transaction.
func (s *Service) pause(ctx context.Context, workspaceID, instanceID, chatID, botID, messageID string,
	reason gen.ChatBotStateReason, until *time.Time) error {
	t := store.BotTakeover{ChatID: chatID, WorkspaceID: workspaceID, InstanceID: instanceID, Reason: string(reason),
		PausedUntil: until}
	ev := gen.BotHandoffEvent{InstanceId: instanceID, ChatId: chatID, Reason: gen.BotHandoffEventReason(reason),
		PausedUntil: until}
	if botID != "" {
		t.BotID = &botID
		ev.BotId = &botID
	}
	if messageID != "" {
		ev.MessageId = &messageID
	}
	return s.db.RunInTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := s.db.Bots.Pause(ctx, tx, &t); err != nil {
			return notFound(err, "chat")
		}
		return s.emit(ctx, tx, store.Bot{WorkspaceID: workspaceID, InstanceID: instanceID}, ev)
	})
}
