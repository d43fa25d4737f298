package channels

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/switchboard/switchboard/store"
)

// DefaultMediaURLTTL is how long a presigned download URL of media in a bucket works.
const DefaultMediaURLTTL = 15 * time.Minute

// S3Media keeps media bytes as objects of an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …), one object per
// file named by its ID under a prefix; the metadata row stays in the database and is written after the object, so
// a file is never visible without its bytes. Every process of a deployment shares the bucket, and the database
// holds none of the bytes.
type S3Media struct {
	DB *store.DB
	// Earlier, when set, is where media stored before the bucket was configured live: a file the bucket lacks is
	// read from there, so that switching to a bucket loses no file.
	Earlier MediaStore
	client  *minio.Client
	bucket  string
	prefix  string
	ttl     time.Duration
}

// NewS3Media connects to the bucket a URL names:
//
//	https://ACCESS_KEY:SECRET_KEY@host[:port]/bucket[/prefix]?region=us-east-1&url_ttl=15m&path_style=true
//
// (http:// for a server without TLS). The URL holds a secret: it comes from the environment, never a flag, and is
// never logged. The bucket must exist.
func NewS3Media(ctx context.Context, db *store.DB, rawURL string) (*S3Media, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("media bucket: the URL is not http(s)://ACCESS_KEY:SECRET_KEY@host/bucket")
	}
	access, secret := u.User.Username(), ""
	if s, ok := u.User.Password(); ok {
		secret = s
	}
	if access == "" || secret == "" {
		return nil, errors.New("media bucket: the URL names no access key and secret key (https://ACCESS_KEY:SECRET_KEY@host/bucket)")
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	if bucket == "" {
		return nil, errors.New("media bucket: the URL names no bucket (https://…@host/bucket)")
	}
	q := u.Query()
	ttl := DefaultMediaURLTTL
	if v := q.Get("url_ttl"); v != "" {
		if ttl, err = time.ParseDuration(v); err != nil || ttl < time.Second || ttl > 7*24*time.Hour {
			return nil, fmt.Errorf("media bucket: url_ttl %q is not a duration between 1s and 168h (S3's limit)", v)
		}
	}
	lookup := minio.BucketLookupAuto
	if v := q.Get("path_style"); v != "" {
		path, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("media bucket: path_style %q is not true or false", v)
		}
		if path {
			lookup = minio.BucketLookupPath
		} else {
			lookup = minio.BucketLookupDNS
		}
	}
	client, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""),
		Secure: u.Scheme == "https", Region: q.Get("region"), BucketLookup: lookup})
	if err != nil {
		return nil, fmt.Errorf("media bucket: %w", err)
	}
	check, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, err := client.BucketExists(check, bucket)
	if err != nil {
		return nil, fmt.Errorf("media bucket %s at %s: %w", bucket, u.Host, err)
	}
	if !ok {
		return nil, fmt.Errorf("media bucket %s does not exist at %s", bucket, u.Host)
	}
	if prefix != "" {
		prefix += "/"
	}
	return &S3Media{DB: db, client: client, bucket: bucket, prefix: prefix, ttl: ttl}, nil
}

func (s *S3Media) key(id string) string { return s.prefix + path.Base(id) }

func (s *S3Media) Save(ctx context.Context, m *store.Media, content []byte) error {
	// One signed request with the body's MD5 rather than a chunked streaming upload: files are at most a few MiB
	// and already in memory, and S3-compatible servers other than AWS do not all take streaming signatures.
	_, err := s.client.PutObject(ctx, s.bucket, s.key(m.ID), bytes.NewReader(content), int64(len(content)),
		minio.PutObjectOptions{ContentType: m.MIMEType, DisableContentSha256: true, SendContentMd5: true})
	if err != nil {
		return fmt.Errorf("media bucket: storing %s: %w", m.ID, err)
	}
	return s.DB.Media.Create(ctx, m, nil)
}

func (s *S3Media) Read(ctx context.Context, id string) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, s.key(id), minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		if s.Earlier != nil {
			return s.Earlier.Read(ctx, id)
		}
		return nil, store.ErrNotFound
	}
	return b, err
}

// DownloadURL is a presigned URL that downloads a file from the bucket without an API key, as an attachment with
// its file name, until the returned time.
func (s *S3Media) DownloadURL(ctx context.Context, id, filename string) (string, time.Time, error) {
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	}
	expires := time.Now().Add(s.ttl)
	u, err := s.client.PresignedGetObject(ctx, s.bucket, s.key(id), s.ttl, params)
	if err != nil {
		return "", time.Time{}, err
	}
	return u.String(), expires, nil
}

// MediaLinker is a MediaStore whose files can be downloaded without the API, by a URL that expires.
type MediaLinker interface {
	DownloadURL(ctx context.Context, id, filename string) (string, time.Time, error)
}
