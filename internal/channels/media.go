package channels

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// Media limits.
const (
	// DefaultMaxMedia is the largest file uploaded or fetched by URL.
	DefaultMaxMedia = 16 << 20
	// mediaFetchTimeout bounds fetching a file by URL, body included.
	mediaFetchTimeout = 30 * time.Second
)

// MediaStore keeps the bytes of media. The one abstraction has two homes: the database (DatabaseMedia, what
// several processes on one PostgreSQL share) and files in the data directory (DirMedia, what serve uses on SQLite,
// so that large files stay out of the single-writer database).
type MediaStore interface {
	// Save stores a file's bytes and its metadata row.
	Save(ctx context.Context, m *store.Media, content []byte) error
	// Read returns a file's bytes. Returns store.ErrNotFound if they are not there.
	Read(ctx context.Context, id string) ([]byte, error)
}

// DatabaseMedia keeps media bytes in the database, beside their metadata, in one transaction.
type DatabaseMedia struct{ DB *store.DB }

func (d DatabaseMedia) Save(ctx context.Context, m *store.Media, content []byte) error {
	return d.DB.Media.Create(ctx, m, content)
}

func (d DatabaseMedia) Read(ctx context.Context, id string) ([]byte, error) {
	return d.DB.Media.Content(ctx, id)
}

// DirMedia keeps media bytes in files of a directory (mode 0600 in a 0700 directory), written and synced before
// the metadata row that makes them visible.
type DirMedia struct {
	DB  *store.DB
	Dir string
}

func (d DirMedia) Save(ctx context.Context, m *store.Media, content []byte) error {
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(d.Dir, m.ID), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return d.DB.Media.Create(ctx, m, nil)
}

func (d DirMedia) Read(_ context.Context, id string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(d.Dir, filepath.Base(id)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, store.ErrNotFound
	}
	return b, err
}

// kindOf is the kind of a media type.
func kindOf(mimeType string) string {
	switch major, _, _ := strings.Cut(mimeType, "/"); major {
	case "image":
		return "image"
	case "video":
		return "video"
	case "audio":
		return "audio"
	}
	return "document"
}

// MediaFile is a file of a workspace that messages carry: uploaded, fetched by URL, or received.
type MediaFile struct {
	ID       string
	Kind     string // image, video, audio or document, by its media type
	MIMEType string
	Filename *string
	Size     int64
	SHA256   string  // hex
	Source   *string // the URL it was fetched from
	Created  time.Time
	// DownloadURL downloads it without an API key until DownloadExpires, where the media store can link to it
	// (GetMedia on a bucket); empty otherwise.
	DownloadURL     string
	DownloadExpires time.Time
}

func mediaFileOf(m store.Media) MediaFile {
	return MediaFile{ID: m.ID, Kind: m.Kind, MIMEType: m.MIMEType, Filename: m.Filename, Size: m.Size, SHA256: m.SHA256,
		Source: m.SourceURL, Created: m.CreatedAt}
}

// Upload stores a file of a workspace. Returns a ValidationFailed problem for an empty file or one larger than the
// limit.
func (s *Service) Upload(ctx context.Context, workspaceID, filename, mimeType string, content []byte) (MediaFile, error) {
	m, err := s.storeMedia(ctx, workspaceID, filename, mimeType, content, nil, "/file")
	return mediaFileOf(m), err
}

func (s *Recorder) storeMedia(ctx context.Context, workspaceID, filename, mimeType string, content []byte, source *string, pointer string) (store.Media, error) {
	if len(content) == 0 {
		return store.Media{}, problem.Invalid(pointer, "the file is empty")
	}
	if int64(len(content)) > s.maxMedia {
		return store.Media{}, problem.Invalid(pointer, fmt.Sprintf("the file has %d bytes; the limit is %d", len(content), s.maxMedia))
	}
	if t, _, err := mime.ParseMediaType(mimeType); err == nil && t != "application/octet-stream" {
		mimeType = t
	} else {
		mimeType = http.DetectContentType(content)
		if t, _, err := mime.ParseMediaType(mimeType); err == nil {
			mimeType = t
		}
	}
	sum := sha256.Sum256(content)
	m := store.Media{ID: store.NewID("med"), WorkspaceID: workspaceID, Kind: kindOf(mimeType), MIMEType: mimeType,
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), SourceURL: source}
	// A file's name comes from a multipart header or a network's message: any bytes at all.
	if filename = text.Clean(filename); filename != "" {
		m.Filename = &filename
	}
	if err := s.media.Save(ctx, &m, content); err != nil {
		return store.Media{}, storeError(err, "workspace", workspaceID)
	}
	return m, nil
}

// GetMedia returns a file's metadata. Returns a NotFound problem if it is not in the workspace.
func (s *Service) GetMedia(ctx context.Context, workspaceID, id string) (MediaFile, error) {
	m, err := s.mediaRow(ctx, workspaceID, id)
	if err != nil {
		return MediaFile{}, err
	}
	f := mediaFileOf(m)
	if l, ok := s.media.(MediaLinker); ok {
		if f.DownloadURL, f.DownloadExpires, err = l.DownloadURL(ctx, m.ID, deref(m.Filename)); err != nil {
			return MediaFile{}, err
		}
	}
	return f, nil
}

// mediaRow reads a file's row. Returns a NotFound problem if it is not in the workspace.
func (s *Service) mediaRow(ctx context.Context, workspaceID, id string) (store.Media, error) {
	m, err := s.db.Media.Get(ctx, workspaceID, id)
	return m, storeError(err, "media", id)
}

// MediaContent returns a file's metadata and bytes. Returns a NotFound problem if it is not in the workspace.
func (s *Service) MediaContent(ctx context.Context, workspaceID, id string) (MediaFile, []byte, error) {
	m, err := s.mediaRow(ctx, workspaceID, id)
	if err != nil {
		return MediaFile{}, nil, err
	}
	b, err := s.media.Read(ctx, id)
	return mediaFileOf(m), b, storeError(err, "media", id)
}

// mediaFor returns the file a message's media names: an uploaded media_id of the workspace, or a URL fetched now
// through the egress guard (public https targets only, the size limit, a 30 s bound).
func (s *Service) mediaFor(ctx context.Context, workspaceID string, in MediaInput) (store.Media, error) {
	switch {
	case (in.MediaID == nil) == (in.URL == nil):
		return store.Media{}, problem.Invalid("/media", "give exactly one of media_id and url")
	case in.MediaID != nil:
		return s.mediaRow(ctx, workspaceID, *in.MediaID)
	}
	url := *in.URL
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return store.Media{}, problem.Invalid("/media/url", "is not a URL")
	}
	res, err := s.fetch.Do(req)
	if err != nil {
		return store.Media{}, problem.Invalid("/media/url", "could not be fetched: the host is not allowed, does not resolve or did not answer")
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return store.Media{}, problem.Invalid("/media/url", fmt.Sprintf("answered %d, not 200", res.StatusCode))
	}
	content, err := io.ReadAll(io.LimitReader(res.Body, s.maxMedia+1))
	if err != nil {
		return store.Media{}, problem.Invalid("/media/url", "the download broke off")
	}
	name := deref(in.Filename)
	if name == "" {
		name = filepath.Base(req.URL.Path)
		if name == "/" || name == "." {
			name = ""
		}
	}
	return s.storeMedia(ctx, workspaceID, name, res.Header.Get("Content-Type"), content, &url, "/media/url")
}
