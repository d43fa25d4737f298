package channels_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// s3rver starts npm's s3rver (installed by the Makefile into e2e/s3rver) with a bucket named media, and returns
// its address. Without it the test is skipped, and fails under CI.
func s3rver(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../e2e/s3rver/node_modules/.bin/s3rver")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("s3rver is not installed (make e2e/s3rver/node_modules/.package-lock.json): %v", err)
		}
		t.Skipf("s3rver is not installed (npm ci in e2e/s3rver): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "-d", t.TempDir(), "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s",
		"--configure-bucket", "media")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	await.Until(t, "s3rver to listen", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, func(up bool) bool { return up })
	return addr
}

// Media in an S3-compatible bucket (a real S3 server, npm's s3rver): the bytes are an object under the prefix,
// read back whole; the media's download URL is presigned and downloads the file, with its name, without a key;
// what the bucket lacks is not found; and a URL that names no bucket, no keys or a missing bucket is refused at start.
func TestMediaInABucket(t *testing.T) {
	addr := s3rver(t)
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		for _, bad := range []string{"s3://S3RVER:S3RVER@" + addr + "/media", "http://" + addr + "/media",
			"http://S3RVER:S3RVER@" + addr + "/", "http://S3RVER:S3RVER@" + addr + "/nobucket?path_style=true",
			"http://S3RVER:S3RVER@" + addr + "/media?url_ttl=1y"} {
			if _, err := channels.NewS3Media(ctx, db, bad); err == nil {
				t.Errorf("NewS3Media(%q) accepted it", bad)
			} else if strings.Contains(err.Error(), "S3RVER:") {
				t.Errorf("the error shows the secret: %v", err)
			}
		}
		bucket, err := channels.NewS3Media(ctx, db, "http://S3RVER:S3RVER@"+addr+"/media/switchboard?path_style=true&region=us-east-1&url_ttl=2m")
		if err != nil {
			t.Fatal(err)
		}
		box, err := sealbox.New(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := channels.NewRecorder(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box, Media: bucket})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := channels.New(rec, channels.NoRuntime)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := db.Workspaces.Create(ctx, "media")
		if err != nil {
			t.Fatal(err)
		}
		content := bytes.Repeat([]byte("invoice "), 1000)
		up, err := svc.Upload(ctx, ws.ID, "invoice 11/2026.pdf", "application/pdf", content)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := svc.MediaContent(ctx, ws.ID, up.ID)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("content read back: %d bytes, %v", len(got), err)
		}
		// The object is in the bucket, under the prefix (path-style, unsigned reads are refused).
		res, err := http.Get("http://" + addr + "/media/switchboard/" + up.ID)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusOK {
			t.Errorf("GET of the object without a signature: %d", res.StatusCode)
		}

		before := time.Now()
		m, err := svc.GetMedia(ctx, ws.ID, up.ID)
		if err != nil {
			t.Fatal(err)
		}
		if m.DownloadURL == "" || m.DownloadExpires.Before(before.Add(2*time.Minute-time.Second)) ||
			m.DownloadExpires.After(time.Now().Add(2*time.Minute)) {
			t.Fatalf("download URL %q until %v, want one for two minutes", m.DownloadURL, m.DownloadExpires)
		}
		if strings.Contains(m.DownloadURL, "S3RVER:S3RVER") {
			t.Errorf("the download URL carries the secret key: %s", m.DownloadURL)
		}
		res, err = http.Get(m.DownloadURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != 200 || !bytes.Equal(body, content) {
			t.Fatalf("download: %d, %d bytes", res.StatusCode, len(body))
		}
		if cd := res.Header.Get("Content-Disposition"); !strings.Contains(cd, "attachment") || !strings.Contains(cd, "invoice") {
			t.Errorf("Content-Disposition %q", cd)
		}

		if _, err := bucket.Read(ctx, "med_01JDAD5A1B2C3D4E5F6G7H8J9K"); err != store.ErrNotFound {
			t.Errorf("a file the bucket lacks: %v, want ErrNotFound", err)
		}
		// A file stored before the bucket was configured is read from where it was.
		earlier := channels.DatabaseMedia{DB: db}
		old := &store.Media{ID: store.NewID("med"), WorkspaceID: ws.ID, Kind: "document", MIMEType: "text/plain", Size: 3,
			SHA256: strings.Repeat("0", 64)}
		if err := earlier.Save(ctx, old, []byte("old")); err != nil {
			t.Fatal(err)
		}
		bucket.Earlier = earlier
		if b, err := bucket.Read(ctx, old.ID); err != nil || string(b) != "old" {
			t.Errorf("a file from before the bucket: %q, %v", b, err)
		}
	})
}
