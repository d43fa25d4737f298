package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Bot answers the inbound messages of an instance (see package bots). Settings is what the API shows of it, kept
// as one JSON document because the bot engine reads it whole; a workflow's signing secret is sealed apart.
type Bot struct {
	bun.BaseModel `bun:"table:bots,alias:bot"`

	ID           string         `bun:"id,pk"`
	WorkspaceID  string         `bun:"workspace_id"`
	InstanceID   string         `bun:"instance_id"`
	Name         string         `bun:"name"`
	Kind         string         `bun:"kind"`
	Enabled      bool           `bun:"enabled"`
	Settings     map[string]any `bun:"settings,type:json"`
	SealedSecret *string        `bun:"sealed_secret"`
	CreatedAt    time.Time      `bun:"created_at"`
	UpdatedAt    time.Time      `bun:"updated_at"`
}

// Bots is the repository of bots, their runs and the chats in takeover.
type Bots struct {
	workspaceScoped[Bot]
}

// Create stores a new bot on db; its ID, if empty, and times are set here. Returns ErrNotFound if the workspace or
// the instance does not exist.
func (s *Bots) Create(ctx context.Context, db bun.IDB, b *Bot) error {
	if b.ID == "" {
		b.ID = NewID("bot")
	}
	b.CreatedAt = now()
	b.UpdatedAt = b.CreatedAt
	return s.create(ctx, db, b)
}

// Get returns a bot of a workspace's instance. Returns ErrNotFound if it is not that instance's.
func (s *Bots) Get(ctx context.Context, workspaceID, instanceID, id string) (Bot, error) {
	b, err := s.get(ctx, workspaceID, id)
	if err == nil && b.InstanceID != instanceID {
		return Bot{}, ErrNotFound
	}
	return b, err
}

// List returns a page of an instance's bots, newest first. It returns no sentinel errors.
func (s *Bots) List(ctx context.Context, workspaceID, instanceID string, p Page) ([]Bot, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("bot.instance_id = ?", instanceID)
	})
}

// Update writes a bot's name, enabled flag and settings. Returns ErrNotFound if it is not in the workspace.
func (s *Bots) Update(ctx context.Context, b *Bot) error {
	b.UpdatedAt = now()
	res, err := s.db.w.NewUpdate().Model(b).Column("name", "enabled", "settings", "updated_at").
		Where("id = ? AND workspace_id = ?", b.ID, b.WorkspaceID).Exec(ctx)
	return affectedOne(res, err)
}

// Delete removes a bot of a workspace's instance. Returns ErrNotFound if it is not that instance's.
func (s *Bots) Delete(ctx context.Context, workspaceID, instanceID, id string) error {
	res, err := s.db.w.NewDelete().Model((*Bot)(nil)).
		Where("id = ? AND workspace_id = ? AND instance_id = ?", id, workspaceID, instanceID).Exec(ctx)
	return affectedOne(res, err)
}

// Enabled returns the enabled bots of an instance, oldest first (the order they answer in). It returns no sentinel
// errors.
func (s *Bots) Enabled(ctx context.Context, instanceID string) ([]Bot, error) {
	var out []Bot
	err := s.db.r.NewSelect().Model(&out).Where("bot.instance_id = ? AND bot.enabled", instanceID).
		Order("bot.created_at", "bot.id").Scan(ctx)
	return out, err
}

// InstancesWithBots returns the IDs of the instances that have an enabled bot. It returns no sentinel errors.
func (s *Bots) InstancesWithBots(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.db.r.NewSelect().Model((*Bot)(nil)).ColumnExpr("DISTINCT bot.instance_id").Where("bot.enabled").
		Scan(ctx, &ids)
	return ids, err
}

// BotTakeover is a chat in human takeover: no bot of its instance answers it until PausedUntil (nil: until resumed).
type BotTakeover struct {
	bun.BaseModel `bun:"table:bot_takeovers,alias:bt"`

	ChatID      string     `bun:"chat_id,pk"`
	WorkspaceID string     `bun:"workspace_id"`
	InstanceID  string     `bun:"instance_id"`
	Reason      string     `bun:"reason"`
	BotID       *string    `bun:"bot_id"`
	PausedUntil *time.Time `bun:"paused_until"`
	CreatedAt   time.Time  `bun:"created_at"`
}

// Pause puts a chat in takeover on db (the writer or a transaction); a later pause replaces an earlier one. Returns
// ErrNotFound if the chat does not exist.
func (s *Bots) Pause(ctx context.Context, db bun.IDB, t *BotTakeover) error {
	t.CreatedAt = now()
	_, err := db.NewInsert().Model(t).
		On("CONFLICT (chat_id) DO UPDATE").
		Set("reason = EXCLUDED.reason, bot_id = EXCLUDED.bot_id, paused_until = EXCLUDED.paused_until, created_at = EXCLUDED.created_at").
		Exec(ctx)
	if isForeignKeyViolation(err) {
		return ErrNotFound
	}
	return mapErr(err)
}

// Resume ends a chat's takeover; a chat not in takeover is left as it is. It returns no sentinel errors.
func (s *Bots) Resume(ctx context.Context, workspaceID, chatID string) error {
	_, err := s.db.w.NewDelete().Model((*BotTakeover)(nil)).Where("chat_id = ? AND workspace_id = ?", chatID, workspaceID).
		Exec(ctx)
	return err
}

// Takeover returns a chat's takeover while it lasts at now. Returns ErrNotFound if the chat is not in takeover.
func (s *Bots) Takeover(ctx context.Context, workspaceID, chatID string, at time.Time) (BotTakeover, error) {
	var t BotTakeover
	err := s.db.r.NewSelect().Model(&t).Where("bt.chat_id = ? AND bt.workspace_id = ?", chatID, workspaceID).
		Where("bt.paused_until IS NULL OR bt.paused_until > ?", at.UTC()).Scan(ctx)
	return t, mapErr(err)
}

// BotRun is a bot's handling of one inbound message.
type BotRun struct {
	bun.BaseModel `bun:"table:bot_runs,alias:br"`

	BotID          string    `bun:"bot_id,pk"`
	MessageID      string    `bun:"message_id,pk"`
	WorkspaceID    string    `bun:"workspace_id"`
	ChatID         string    `bun:"chat_id"`
	Status         string    `bun:"status"`
	ReplyMessageID *string   `bun:"reply_message_id"`
	Reason         *string   `bun:"reason"`
	Attempts       int       `bun:"attempts"`
	Tokens         int       `bun:"tokens"`
	CreatedAt      time.Time `bun:"created_at"`
	UpdatedAt      time.Time `bun:"updated_at"`
}

// Claim records that a bot takes up a message; false when it (in this or another process) already did. It
// returns no sentinel errors.
func (s *Bots) Claim(ctx context.Context, r *BotRun) (bool, error) {
	r.CreatedAt = now()
	r.UpdatedAt = r.CreatedAt
	res, err := s.db.w.NewInsert().Model(r).On("CONFLICT (bot_id, message_id) DO NOTHING").Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Finish records the outcome of a run. It returns no sentinel errors.
func (s *Bots) Finish(ctx context.Context, r *BotRun) error {
	r.UpdatedAt = now()
	_, err := s.db.w.NewUpdate().Model(r).Column("status", "reply_message_id", "reason", "attempts", "tokens", "updated_at").
		WherePK().Exec(ctx)
	return err
}

// Runs returns a bot's latest runs, newest first. It returns no sentinel errors.
func (s *Bots) Runs(ctx context.Context, botID string, limit int) ([]BotRun, error) {
	var out []BotRun
	err := s.db.r.NewSelect().Model(&out).Where("br.bot_id = ?", botID).Order("br.created_at DESC").Limit(int64(limit)).Scan(ctx)
	return out, err
}

// RepliesSince counts the runs of a bot in a chat since a time, failed ones included (they spent a try): what
// the per-chat reply limit counts. It returns no sentinel errors.
func (s *Bots) RepliesSince(ctx context.Context, botID, chatID string, since time.Time) (int, error) {
	n, err := s.db.r.NewSelect().Model((*BotRun)(nil)).
		Where("br.bot_id = ? AND br.chat_id = ? AND br.created_at > ?", botID, chatID, since.UTC()).Count(ctx)
	return int(n), err
}

// TokensSince sums the tokens of a bot's runs since a time, and returns when the oldest of those runs that cost
// any began (zero when none did): what the bot's tokens per day counts, and from when tokens come free again. It
// returns no sentinel errors.
func (s *Bots) TokensSince(ctx context.Context, botID string, since time.Time) (int, time.Time, error) {
	var out struct {
		Tokens int        `bun:"tokens"`
		Oldest *time.Time `bun:"oldest"`
	}
	err := s.db.r.NewSelect().Model((*BotRun)(nil)).
		ColumnExpr("COALESCE(SUM(br.tokens), 0) AS tokens").ColumnExpr("MIN(br.created_at) AS oldest").
		Where("br.bot_id = ? AND br.created_at > ? AND br.tokens > 0", botID, since.UTC()).Scan(ctx, &out)
	if err != nil || out.Oldest == nil {
		return out.Tokens, time.Time{}, err
	}
	return out.Tokens, *out.Oldest, nil
}

// Takeovers returns the chats of an instance in takeover at a time, latest first. It returns no sentinel errors.
func (s *Bots) Takeovers(ctx context.Context, workspaceID, instanceID string, at time.Time, limit int) ([]BotTakeover, error) {
	var out []BotTakeover
	err := s.db.r.NewSelect().Model(&out).Where("bt.workspace_id = ? AND bt.instance_id = ?", workspaceID, instanceID).
		Where("bt.paused_until IS NULL OR bt.paused_until > ?", at.UTC()).
		Order("bt.created_at DESC").Limit(int64(limit)).Scan(ctx)
	return out, err
}
