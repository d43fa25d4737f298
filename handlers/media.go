package handlers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
)

// UploadMedia answers POST /api/v1/media: the file part's bytes and media type, and a file name (the part's, or
// the filename field's).
func (s *Server) UploadMedia(ctx context.Context, req gen.UploadMediaRequestObject) (gen.UploadMediaResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	var (
		content        []byte
		name, mimeType string
		sawFile        bool
	)
	for {
		part, err := req.Body.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, problem.Invalid("", "the body is not a readable multipart/form-data message")
		}
		switch part.FormName() {
		case "file":
			if content, err = io.ReadAll(part); err != nil {
				return nil, err
			}
			sawFile, mimeType = true, part.Header.Get("Content-Type")
			if name == "" {
				name = part.FileName()
			}
		case "filename":
			b, err := io.ReadAll(io.LimitReader(part, 256))
			if err != nil {
				return nil, err
			}
			name = string(b)
		}
	}
	if !sawFile {
		return nil, problem.Invalid("/file", "a part named file is required")
	}
	m, err := s.channels.Upload(ctx, key.WorkspaceID, name, mimeType, content)
	if err != nil {
		return nil, err
	}
	loc := "/api/v1/media/" + m.ID
	return gen.UploadMedia201JSONResponse{Body: mediaAPI(m), Headers: gen.UploadMedia201ResponseHeaders{Location: &loc}}, nil
}

// GetMedia answers GET /api/v1/media/{media_id}.
func (s *Server) GetMedia(ctx context.Context, req gen.GetMediaRequestObject) (gen.GetMediaResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.channels.GetMedia(ctx, key.WorkspaceID, req.MediaId)
	if err != nil {
		return nil, err
	}
	return gen.GetMedia200JSONResponse{Body: mediaAPI(m)}, nil
}

// GetMediaContent answers GET /api/v1/media/{media_id}/content with the file's bytes and media type.
func (s *Server) GetMediaContent(ctx context.Context, req gen.GetMediaContentRequestObject) (gen.GetMediaContentResponseObject, error) {
	key, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, content, err := s.channels.MediaContent(ctx, key.WorkspaceID, req.MediaId)
	if err != nil {
		return nil, err
	}
	disposition := "attachment"
	if m.Filename != nil {
		disposition = mime.FormatMediaType("attachment", map[string]string{"filename": *m.Filename})
	}
	return gen.GetMediaContent200AsteriskResponse{Body: bytes.NewReader(content), ContentType: m.MIMEType,
		ContentLength: int64(len(content)), Headers: gen.GetMediaContent200ResponseHeaders{
			ContentDisposition: &disposition}}, nil
}

// mediaAPI is the API's Media of a file.
func mediaAPI(m channels.MediaFile) gen.Media {
	out := gen.Media{Id: m.ID, Object: gen.MediaObjectMedia, Kind: gen.MediaKind(m.Kind), MimeType: m.MIMEType,
		Filename: m.Filename, Size: m.Size, Sha256: m.SHA256, SourceUrl: m.Source, CreatedAt: m.Created}
	if m.DownloadURL != "" {
		out.DownloadUrl, out.DownloadUrlExpiresAt = &m.DownloadURL, &m.DownloadExpires
	}
	return out
}
