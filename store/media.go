package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Media is a file stored to send or received in a message. Its bytes are kept apart (see package channels'
// media store): in the database on PostgreSQL (MediaContent), in the data directory on SQLite.
type Media struct {
	bun.BaseModel `bun:"table:media,alias:md"`

	ID          string    `bun:"id,pk"`
	WorkspaceID string    `bun:"workspace_id"`
	Kind        string    `bun:"kind"`
	MIMEType    string    `bun:"mime_type"`
	Filename    *string   `bun:"filename"`
	Size        int64     `bun:"size"`
	SHA256      string    `bun:"sha256"`
	SourceURL   *string   `bun:"source_url"`
	CreatedAt   time.Time `bun:"created_at"`
}

type mediaContent struct {
	bun.BaseModel `bun:"table:media_content,alias:mc"`

	MediaID string `bun:"media_id,pk"`
	Content []byte `bun:"content"`
}

// MediaFiles is the repository of media.
type MediaFiles struct {
	workspaceScoped[Media]
}

// Create inserts a file's metadata (its ID given by the caller), and its bytes when content is not nil, in one
// transaction. Returns ErrNotFound if the workspace does not exist.
func (s *MediaFiles) Create(ctx context.Context, m *Media, content []byte) error {
	m.CreatedAt = now()
	return s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := s.create(ctx, tx, m); err != nil {
			return err
		}
		if content == nil {
			return nil
		}
		_, err := tx.NewInsert().Model(&mediaContent{MediaID: m.ID, Content: content}).Exec(ctx)
		return err
	})
}

// Get returns a file's metadata. Returns ErrNotFound if it is not in the workspace.
func (s *MediaFiles) Get(ctx context.Context, workspaceID, id string) (Media, error) {
	return s.get(ctx, workspaceID, id)
}

// ByID returns a file's metadata whatever its workspace. Returns ErrNotFound if there is none.
func (s *MediaFiles) ByID(ctx context.Context, id string) (Media, error) {
	var m Media
	err := s.db.r.NewSelect().Model(&m).Where("md.id = ?", id).Scan(ctx)
	return m, mapErr(err)
}

// Content returns the bytes of a file stored in the database. Returns ErrNotFound if there are none.
func (s *MediaFiles) Content(ctx context.Context, id string) ([]byte, error) {
	var c mediaContent
	err := s.db.r.NewSelect().Model(&c).Where("mc.media_id = ?", id).Scan(ctx)
	return c.Content, mapErr(err)
}
