package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/store"
)

// The bots of an instance, on its page: each bot with its trigger, its state and its latest runs (what it answered,
// handed over or failed on, and why), the chats a human has taken over with a button that gives them back to the
// bots, and a form that adds a model or a workflow bot. A workflow bot's signing secret is shown once, in the page
// that answers the form. Every change goes through the bot service, as the API's do.

func (c *Console) registerBots(g *echo.Group) {
	g.POST("/channels/:id/bots", c.createBot)
	g.POST("/channels/:id/bots/:bot/enable", c.botAction)
	g.POST("/channels/:id/bots/:bot/disable", c.botAction)
	g.POST("/channels/:id/bots/:bot/delete", c.botAction)
	g.POST("/channels/:id/chats/:chat/resume", c.resumeChat)
}

// botsShown bounds the bots the page lists with their runs (an instance has a handful).
const botsShown = 20

// runsShown is how many of a bot's latest runs the page shows.
const runsShown = 5

// botView is a bot as the instance page shows it.
type botView struct {
	gen.Bot
	Runs []gen.BotRun
}

// takeoverView is a chat in human takeover.
type takeoverView struct {
	gen.ChatBotState
	Address string
	Name    string
}

// botForm is the add-a-bot form as sent, to show again beside its errors.
type botForm struct {
	Name, Kind, Model, SystemPrompt, URL, Trigger, Pattern, Keyword, Minutes, RepliesPerMinute, TokensPerDay string
	Errors                                                                                                   map[string]string
	// Secret is the signing secret of the workflow bot just added, shown once.
	Secret string
}

// botsSection fills what the instance page shows of its bots; a console without the bot service shows none.
func (c *Console) botsSection(ec echo.Context, inst store.Instance, d *channelData) error {
	if c.bots == nil {
		return nil
	}
	ctx := ec.Request().Context()
	d.BotsOn = true
	rows, _, err := c.bots.List(ctx, inst.WorkspaceID, inst.ID, store.Page{Limit: botsShown})
	if err != nil {
		return err
	}
	for _, r := range rows {
		b, err := c.bots.WithRuns(ctx, r)
		if err != nil {
			return err
		}
		v := botView{Bot: b}
		if b.RecentRuns != nil {
			v.Runs = (*b.RecentRuns)[:min(len(*b.RecentRuns), runsShown)]
		}
		d.Bots = append(d.Bots, v)
	}
	states, err := c.bots.Takeovers(ctx, inst.WorkspaceID, inst.ID)
	if err != nil {
		return err
	}
	for _, st := range states {
		v := takeoverView{ChatBotState: st}
		if chat, err := c.channels.GetChat(ctx, inst.WorkspaceID, inst.ID, st.ChatId); err == nil {
			v.Address = chat.Address
			if chat.Name != nil {
				v.Name = *chat.Name
			}
		}
		d.Takeovers = append(d.Takeovers, v)
	}
	if c.llm != nil {
		for _, m := range c.llm.Models(ctx, inst.WorkspaceID) {
			d.Models = append(d.Models, m.ID)
		}
		slices.Sort(d.Models)
	}
	if d.BotForm.Kind == "" {
		d.BotForm.Kind, d.BotForm.Trigger = string(gen.BotKindModel), string(gen.BotTriggerTypeAll)
	}
	return nil
}

// createBot adds a bot from the form. A model bot's page follows by redirect; a workflow bot's page is the answer
// itself, since it shows the signing secret that is never shown again.
func (c *Console) createBot(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	f := botForm{Name: strings.TrimSpace(ec.FormValue("name")), Kind: ec.FormValue("kind"),
		Model: ec.FormValue("model"), SystemPrompt: ec.FormValue("system_prompt"), URL: strings.TrimSpace(ec.FormValue("url")),
		Trigger: ec.FormValue("trigger"), Pattern: ec.FormValue("pattern"), Keyword: strings.TrimSpace(ec.FormValue("keyword")),
		Minutes: strings.TrimSpace(ec.FormValue("minutes")), RepliesPerMinute: strings.TrimSpace(ec.FormValue("replies_per_minute")),
		TokensPerDay: strings.TrimSpace(ec.FormValue("tokens_per_day"))}
	in, errs := f.create()
	var b gen.Bot
	if len(errs) == 0 {
		b, err = c.bots.Create(ec.Request().Context(), inst.WorkspaceID, inst.ID, in)
		if fe := fieldErrors(err); fe != nil {
			errs = fe
		} else if p := problemOf(err); p != nil {
			errs = map[string]string{"": p.Detail}
		} else if err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		f.Errors = errs
		msg := "The bot was not added: " + joinErrors(errs) + "."
		return c.renderChannel(ec, http.StatusUnprocessableEntity, "", msg, channelData{BotForm: f})
	}
	if b.SigningSecret == nil {
		return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done=bot-added#bots")
	}
	return c.renderChannel(ec, http.StatusOK, "The workflow bot "+b.Name+" was added.", "",
		channelData{BotForm: botForm{Secret: *b.SigningSecret}})
}

// create is the API's request of the form, or the form's own errors by field (a number that is not one).
func (f botForm) create() (gen.BotCreate, map[string]string) {
	errs := map[string]string{}
	number := func(field, v string) *int {
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs["/"+field] = "must be a whole number"
			return nil
		}
		return &n
	}
	in := gen.BotCreate{Name: f.Name, Kind: gen.BotCreateKind(f.Kind), RepliesPerMinute: number("replies_per_minute", f.RepliesPerMinute)}
	in.Trigger = &gen.BotTrigger{Type: gen.BotTriggerType(f.Trigger)}
	if f.Pattern != "" {
		in.Trigger.Pattern = &f.Pattern
	}
	if f.Keyword != "" || f.Minutes != "" {
		in.Handoff = &gen.BotHandoff{Minutes: number("handoff/minutes", f.Minutes)}
		if f.Keyword != "" {
			in.Handoff.Keyword = &f.Keyword
		}
	}
	switch in.Kind {
	case gen.BotCreateKindModel:
		in.Model = &gen.BotModelSettings{Model: f.Model, TokensPerDay: number("model/tokens_per_day", f.TokensPerDay)}
		if f.SystemPrompt != "" {
			in.Model.SystemPrompt = &f.SystemPrompt
		}
	case gen.BotCreateKindWorkflow:
		in.Workflow = &gen.BotWorkflowSettings{Url: f.URL}
	default:
		errs["/kind"] = "choose a model or a workflow"
	}
	return in, errs
}

// joinErrors is a form's errors as one sentence, fields in order.
func joinErrors(errs map[string]string) string {
	var parts []string
	for k, v := range errs {
		parts = append(parts, strings.TrimSpace(strings.ReplaceAll(strings.TrimPrefix(k, "/"), "/", " ")+" "+v))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// botAction enables, disables or deletes a bot, then shows the instance's page again.
func (c *Console) botAction(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	ctx, id := ec.Request().Context(), ec.Param("bot")
	action := ec.Path()[strings.LastIndex(ec.Path(), "/")+1:]
	switch action {
	case "enable", "disable":
		on := action == "enable"
		_, err = c.bots.Update(ctx, inst.WorkspaceID, inst.ID, id, gen.BotUpdate{Enabled: &on})
	case "delete":
		err = c.bots.Delete(ctx, inst.WorkspaceID, inst.ID, id)
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, fmt.Sprintf("/user/channels/%s?done=bot-%s#bots", inst.ID, action))
}

// resumeChat ends a chat's takeover: the bots answer it again.
func (c *Console) resumeChat(ec echo.Context) error {
	inst, err := c.instanceOf(ec)
	if err != nil {
		return err
	}
	if _, err := c.bots.Control(ec.Request().Context(), inst.WorkspaceID, inst.ID, ec.Param("chat"),
		gen.ChatBotControl{Action: gen.ChatBotControlActionResume}); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, "/user/channels/"+inst.ID+"?done=bot-resumed#bots")
}
