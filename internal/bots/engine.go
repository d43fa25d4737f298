package bots

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// readBatch is how many events one read of the log takes.
const readBatch = 200

// maxWorkers bounds the messages answered at once by this process (each holds a model or workflow call).
const maxWorkers = 8

// Run follows the event log from its end and answers the inbound messages of instances with bots, until ctx ends;
// then it waits for the answers under way. Messages that arrived while no process ran are not answered late: a
// reply minutes after the question would surprise more than help. Every replica may run it: a message is taken up
// by one (store.Bots.Claim).
func (s *Service) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	// Where to start: a database that does not answer yet is waited for, as the other jobs of the process do.
	pos, err := s.db.Events.LastPosition(ctx)
	for err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: a shutdown, not a failure of the job
		}
		s.log.Warn("bots: find the end of the event log", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pos, err = s.db.Events.LastPosition(ctx)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxWorkers)
	for {
		evs, _, err := s.db.Events.ReadEvents(ctx, "", pos, readBatch)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("bots: read the event log", "error", err)
		}
		var others map[string]bool
		for _, ev := range evs {
			pos = ev.Position
			if ev.Type != "message.received" {
				continue
			}
			if others == nil {
				if others, err = s.botAddresses(ctx); err != nil {
					s.log.Warn("bots: read the instances with bots", "error", err)
					others = map[string]bool{}
				}
			}
			job, err := s.consider(ctx, ev.Event, others)
			if err != nil {
				s.log.Warn("bots: consider a message", "event", ev.ID, "error", err)
			}
			if job == nil {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				s.answer(context.WithoutCancel(ctx), job)
			}()
		}
		if len(evs) == readBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// botAddresses returns the account addresses of this server's instances that have an enabled bot: a message from
// one of them is a bot's (or may be), and answering it could start a loop between two bots.
func (s *Service) botAddresses(ctx context.Context) (map[string]bool, error) {
	ids, err := s.db.Bots.InstancesWithBots(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, id := range ids {
		inst, err := s.db.Instances.ByID(ctx, s.db.Reader(), id)
		if err == nil && inst.Account != nil && inst.Account.Address != "" {
			out[inst.Account.Address] = true
		}
	}
	return out, nil
}

// job is one message a bot answers.
type job struct {
	bot      store.Bot
	st       settings
	msg      gen.Message
	instance store.Instance
}

// consider decides whether a bot of the message's instance answers it: only inbound text from people, outside a
// takeover. The handoff keyword of the first bot that has one puts the chat in takeover instead; otherwise the
// first bot whose trigger matches answers, within its replies per minute in the chat.
func (s *Service) consider(ctx context.Context, ev store.Event, others map[string]bool) (*job, error) {
	var data gen.MessageReceivedEvent
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return nil, err
	}
	msg := data.Message
	if msg.Direction != gen.MessageDirectionInbound || msg.Text == nil || strings.TrimSpace(*msg.Text) == "" ||
		others[string(msg.From.Address)] {
		return nil, nil
	}
	bots, err := s.db.Bots.Enabled(ctx, data.InstanceId)
	if err != nil || len(bots) == 0 {
		return nil, err
	}
	if _, err := s.db.Bots.Takeover(ctx, ev.WorkspaceID, msg.ChatId, time.Now()); err == nil {
		return nil, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	inst, err := s.db.Instances.ByID(ctx, s.db.Reader(), data.InstanceId)
	if err != nil {
		return nil, err
	}
	text := *msg.Text
	for _, b := range bots {
		st, err := settingsOf(b)
		if err != nil {
			return nil, err
		}
		if k := st.Handoff.Keyword; k != nil && strings.EqualFold(strings.TrimSpace(text), *k) {
			return nil, s.handoff(ctx, b, st, msg, gen.ChatBotStateReasonKeyword)
		}
	}
	for _, b := range bots {
		st, _ := settingsOf(b)
		ok, err := s.triggered(ctx, st, inst, msg)
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		n, err := s.db.Bots.RepliesSince(ctx, b.ID, msg.ChatId, time.Now().Add(-time.Minute))
		if err != nil {
			return nil, err
		}
		if n >= st.RepliesPerMinute {
			s.log.Info("bots: reply limit of the chat reached", "bot", b.ID, "chat", msg.ChatId)
			return nil, nil
		}
		claimed, err := s.db.Bots.Claim(ctx, &store.BotRun{BotID: b.ID, MessageID: msg.Id, WorkspaceID: b.WorkspaceID,
			ChatID: msg.ChatId, Status: string(gen.BotRunStatusWorking)})
		if err != nil || !claimed {
			return nil, err
		}
		return &job{bot: b, st: st, msg: msg, instance: inst}, nil
	}
	return nil, nil
}

// triggered reports whether a bot's trigger takes a message.
func (s *Service) triggered(ctx context.Context, st settings, inst store.Instance, msg gen.Message) (bool, error) {
	text := *msg.Text
	switch st.Trigger.Type {
	case gen.BotTriggerTypeKeyword:
		return strings.Contains(strings.ToLower(text), strings.ToLower(*st.Trigger.Pattern)), nil
	case gen.BotTriggerTypeRegex:
		re, err := regexp.Compile(*st.Trigger.Pattern)
		return err == nil && re.MatchString(text), nil
	case gen.BotTriggerTypeMention:
		chat, err := s.db.Chats.Get(ctx, inst.WorkspaceID, inst.ID, msg.ChatId)
		if err != nil {
			return false, err
		}
		if chat.Type != "group" {
			return true, nil
		}
		lower := strings.ToLower(text)
		if inst.Account != nil && inst.Account.Address != "" && strings.Contains(lower, strings.ToLower(inst.Account.Address)) {
			return true, nil
		}
		return strings.Contains(lower, "@"+strings.ToLower(inst.Name)), nil
	}
	return true, nil
}

// handoff pauses the chat's bots for the bot's handoff time and records the run.
func (s *Service) handoff(ctx context.Context, b store.Bot, st settings, msg gen.Message, reason gen.ChatBotStateReason) error {
	var until *time.Time
	if m := st.Handoff.Minutes; m != nil && *m > 0 {
		t := time.Now().UTC().Add(time.Duration(*m) * time.Minute).Truncate(time.Second)
		until = &t
	}
	if err := s.pause(ctx, b.WorkspaceID, b.InstanceID, msg.ChatId, b.ID, msg.Id, reason, until); err != nil {
		return err
	}
	r := store.BotRun{BotID: b.ID, MessageID: msg.Id, WorkspaceID: b.WorkspaceID, ChatID: msg.ChatId,
		Status: string(gen.BotRunStatusHandoff)}
	if claimed, err := s.db.Bots.Claim(ctx, &r); err != nil || claimed {
		return err
	}
	return s.db.Bots.Finish(ctx, &r)
}

// answer makes a bot's reply to a message, with retries, and sends it; or records why it could not.
func (s *Service) answer(ctx context.Context, j *job) {
	run := store.BotRun{BotID: j.bot.ID, MessageID: j.msg.Id, WorkspaceID: j.bot.WorkspaceID, ChatID: j.msg.ChatId}
	if reason, err := s.tokensSpent(ctx, j); err != nil || reason != "" {
		if err != nil {
			reason = "the bot's token use could not be read: " + err.Error()
		}
		s.fail(ctx, j, &run, reason)
		return
	}
	stopTyping := s.showTyping(ctx, j)
	var out reply
	var err error
	delay := s.cfg.RetryDelay
	for run.Attempts < s.cfg.Attempts {
		run.Attempts++
		out, err = s.generate(ctx, j)
		run.Tokens += out.tokens
		if err == nil || !retryable(err) {
			break
		}
		if run.Attempts < s.cfg.Attempts {
			time.Sleep(delay)
			delay *= 2
		}
	}
	// A reply ends the typing on every network; without one the chat is told the account stopped.
	stopTyping(err != nil || out.handoff || len(out.texts) == 0)
	switch {
	case err != nil:
		s.fail(ctx, j, &run, err.Error())
		return
	case out.handoff:
		if err := s.handoff(ctx, j.bot, j.st, j.msg, gen.ChatBotStateReasonWorkflow); err != nil {
			s.log.Warn("bots: hand a chat over", "bot", j.bot.ID, "error", err)
		}
		return
	case len(out.texts) == 0:
		run.Status = string(gen.BotRunStatusReplied)
		_ = s.db.Bots.Finish(ctx, &run)
		return
	}
	var sent []string
	for i, text := range out.texts {
		// The client message ID makes a send repeated after a crash answer the first one instead of sending twice.
		cid := fmt.Sprintf("bot:%s:%s:%d", j.bot.ID, j.msg.Id, i)
		m, _, err := s.cfg.Channels.Send(ctx, j.bot.WorkspaceID, j.bot.InstanceID, channels.MessageDraft{
			ChatID: &j.msg.ChatId, Type: channels.TypeText, Text: &text, ClientMessageID: &cid,
			Metadata: map[string]any{"bot_id": j.bot.ID}})
		if err != nil {
			s.fail(ctx, j, &run, "the reply was refused: "+err.Error())
			return
		}
		sent = append(sent, m.ID)
	}
	run.Status, run.ReplyMessageID = string(gen.BotRunStatusReplied), &sent[0]
	if err := s.db.Bots.Finish(ctx, &run); err != nil {
		s.log.Warn("bots: record a reply", "bot", j.bot.ID, "error", err)
	}
	if err := s.emit(ctx, s.db.Bun(), j.bot, gen.BotRepliedEvent{BotId: j.bot.ID,
		InstanceId: j.bot.InstanceID, ChatId: j.msg.ChatId, MessageId: j.msg.Id, ReplyMessageIds: sent}); err != nil {
		s.log.Warn("bots: emit bot.replied", "bot", j.bot.ID, "error", err)
	}
}

// fail records a run that gave up and emits bot.failed.
func (s *Service) fail(ctx context.Context, j *job, run *store.BotRun, reason string) {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	run.Status, run.Reason = string(gen.BotRunStatusFailed), &reason
	if err := s.db.Bots.Finish(ctx, run); err != nil {
		s.log.Warn("bots: record a failure", "bot", j.bot.ID, "error", err)
	}
	if err := s.emit(ctx, s.db.Bun(), j.bot, gen.BotFailedEvent{BotId: j.bot.ID,
		InstanceId: j.bot.InstanceID, ChatId: j.msg.ChatId, MessageId: j.msg.Id, Reason: reason,
		Attempts: run.Attempts}); err != nil {
		s.log.Warn("bots: emit bot.failed", "bot", j.bot.ID, "error", err)
	}
}

// typingEvery is how often a bot that is still working says again that it types: networks drop a chat state after
// a few seconds (WhatsApp and Telegram after about 5 to 10).
const typingEvery = 4 * time.Second

// showTyping shows the chat that the instance's account is typing while the bot works, where the instance's network
// shows it (capability chats.typing), and repeats it until the returned stop is called; stop(true) also says
// "paused" (the bot answers nothing). Failures are logged and never hold the answer up.
func (s *Service) showTyping(ctx context.Context, j *job) (stop func(paused bool)) {
	say := func(state string) bool {
		err := s.cfg.Channels.SendChatPresence(ctx, j.bot.WorkspaceID, j.bot.InstanceID, j.msg.ChatId, state)
		var p *problem.Error
		switch {
		case errors.As(err, &p) && p.Code == problem.CapabilityNotSupported:
			return false
		case err != nil:
			s.log.Debug("bots: show typing", "bot", j.bot.ID, "state", state, "error", err)
		}
		return true
	}
	if !say(channels.StateTyping) {
		return func(bool) {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(typingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				say(channels.StateTyping)
			}
		}
	}()
	return func(paused bool) {
		close(done)
		<-finished
		if paused {
			say(channels.StatePaused)
		}
	}
}

// reply is what a model or workflow answered, and the tokens a model spent on it.
type reply struct {
	texts   []string
	handoff bool
	tokens  int
}

// tokensDay is the window a bot's tokens_per_day counts over.
const tokensDay = 24 * time.Hour

// tokensSpent says why a model bot may not answer now: its tokens of the last 24 hours reached its
// tokens_per_day. Empty when it may (or has no limit of its own). Runs that are working at the same time may take
// the bot past its limit by what they spend: each is admitted on what was spent before it.
func (s *Service) tokensSpent(ctx context.Context, j *job) (string, error) {
	if j.st.Model == nil || j.st.Model.TokensPerDay == nil {
		return "", nil
	}
	limit := *j.st.Model.TokensPerDay
	spent, oldest, err := s.db.Bots.TokensSince(ctx, j.bot.ID, time.Now().Add(-tokensDay))
	if err != nil || spent < limit {
		return "", err
	}
	return fmt.Sprintf("the bot's tokens_per_day (%d) are spent: %d in the last 24 hours; tokens come free again from %s",
		limit, spent, oldest.Add(tokensDay).UTC().Format(time.RFC3339)), nil
}

// permanent marks an error no retry can mend (the workspace's quota, a request the upstream refused).
type permanent struct{ error }

func retryable(err error) bool {
	var p permanent
	return !errors.As(err, &p)
}

func (s *Service) generate(ctx context.Context, j *job) (reply, error) {
	history, err := s.history(ctx, j)
	if err != nil {
		return reply{}, err
	}
	if j.st.Model != nil {
		return s.fromModel(ctx, j, history)
	}
	return s.fromWorkflow(ctx, j, history)
}

// history returns the chat's last messages up to the one answered, oldest first: the model's memory, or what a
// workflow receives (at most its last 20).
func (s *Service) history(ctx context.Context, j *job) ([]store.Message, error) {
	n := 20
	if j.st.Model != nil && j.st.Model.Memory != nil {
		n = *j.st.Model.Memory
	}
	page := store.Page{Limit: min(n+10, 100), Before: nextID(j.msg.Id)}
	rows, _, err := s.db.Messages.List(ctx, j.bot.WorkspaceID, j.bot.InstanceID, store.MessageFilter{ChatID: j.msg.ChatId}, page)
	if err != nil {
		return nil, err
	}
	var out []store.Message
	for _, m := range rows {
		if m.Text != nil && m.ID <= j.msg.Id {
			out = append(out, m)
		}
		if len(out) == n {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// nextID is an ID just after id in the order of IDs, so that a page before it includes id itself.
func nextID(id string) string { return id + "~" }

func (s *Service) fromModel(ctx context.Context, j *job, history []store.Message) (reply, error) {
	m := j.st.Model
	msgs := []map[string]string{}
	if m.SystemPrompt != nil && *m.SystemPrompt != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": *m.SystemPrompt})
	}
	for _, h := range history {
		role := "user"
		if h.Direction == "outbound" {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": *h.Text})
	}
	body := map[string]any{"model": m.Model, "messages": msgs}
	if m.Temperature != nil {
		body["temperature"] = *m.Temperature
	}
	if m.MaxTokens != nil {
		body["max_tokens"] = *m.MaxTokens
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return reply{}, err
	}
	c, err := s.cfg.LLM.Complete(ctx, j.bot.WorkspaceID, raw)
	if err != nil {
		return reply{}, modelError(err)
	}
	defer c.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(c.Body).Decode(&out); err != nil {
		return reply{}, fmt.Errorf("the model's answer is not a chat completion: %w", err)
	}
	_, _ = io.Copy(io.Discard, c.Body) // to the end, so that its usage is counted
	spent := max(out.Usage.TotalTokens, 0)
	if len(out.Choices) == 0 || strings.TrimSpace(out.Choices[0].Message.Content) == "" {
		return reply{tokens: spent}, errors.New("the model answered nothing")
	}
	return reply{texts: []string{strings.TrimSpace(out.Choices[0].Message.Content)}, tokens: spent}, nil
}

// maxWorkflowAnswer bounds a workflow's answer.
const maxWorkflowAnswer = 256 << 10

// maxReplies bounds the messages one workflow answer sends.
const maxReplies = 5

func (s *Service) fromWorkflow(ctx context.Context, j *job, history []store.Message) (reply, error) {
	secret, err := s.cfg.Box.Open(*j.bot.SealedSecret, []byte(j.bot.ID))
	if err != nil {
		return reply{}, permanent{fmt.Errorf("the bot's signing secret does not open: %w", err)}
	}
	key, err := webhook.ParseSecret(string(secret))
	if err != nil {
		return reply{}, permanent{err}
	}
	hist, err := s.cfg.Channels.MessagesAPI(ctx, s.db.Reader(), history)
	if err != nil {
		return reply{}, err
	}
	body, err := json.Marshal(map[string]any{"type": "bot.message", "bot_id": j.bot.ID, "instance_id": j.bot.InstanceID,
		"chat_id": j.msg.ChatId, "message": j.msg, "history": hist})
	if err != nil {
		return reply{}, err
	}
	timeout := time.Duration(*j.st.Workflow.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.st.Workflow.Url, bytes.NewReader(body))
	if err != nil {
		return reply{}, permanent{err}
	}
	// The message ID signs each try alike, so that the workflow can tell a retry from a new message.
	msgID, now := "bot_"+j.msg.Id, time.Now()
	for name, values := range webhook.Headers(msgID, now, webhook.Sign([][]byte{key}, msgID, now, body)) {
		req.Header[name] = values
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("the workflow does not answer: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return reply{}, fmt.Errorf("the workflow answered %d", res.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxWorkflowAnswer))
	if err != nil {
		return reply{}, fmt.Errorf("the workflow's answer broke off: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return reply{}, nil
	}
	var out struct {
		Reply   string   `json:"reply"`
		Replies []string `json:"replies"`
		Handoff bool     `json:"handoff"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return reply{}, permanent{fmt.Errorf(`the workflow's answer is not {"reply": "…"}: %w`, err)}
	}
	r := reply{handoff: out.Handoff}
	for _, t := range append([]string{out.Reply}, out.Replies...) {
		if t = strings.TrimSpace(t); t != "" && len(r.texts) < maxReplies {
			r.texts = append(r.texts, t)
		}
	}
	return r, nil
}

// modelError sorts the llm service's refusals: a spent quota or a request the upstream refuses as invalid does not
// mend by trying again; a failing or limiting upstream may.
func modelError(err error) error {
	var le *llm.LimitError
	var ue *llm.UpstreamError
	switch {
	case errors.Is(err, llm.ErrModelNotFound):
		return permanent{errors.New("no upstream serves the bot's model any more")}
	case errors.As(err, &le):
		return permanent{fmt.Errorf("the workspace's model quota %s is exhausted", le.Policies[0])}
	case errors.As(err, &ue) && ue.Rejected:
		return permanent{fmt.Errorf("the model's upstream refused the request: %s", ue.Message)}
	case errors.As(err, &ue):
		return fmt.Errorf("the model's upstream failed: %s", ue.Message)
	}
	return err
}

// emit records an event of a bot, as one of its instance (endpoints and streams filtered by instance receive it).
func (s *Service) emit(ctx context.Context, tx store.Querier, b store.Bot, payload any) error {
	_, err := s.cfg.Events.EmitMany(ctx, tx, []events.Pending{{WorkspaceID: b.WorkspaceID, InstanceID: b.InstanceID,
		Payload: payload}})
	return err
}
