package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/links/clicks"
	"github.com/switchboard/switchboard/internal/runner"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

// Every service of a process is built once and shares the process's parts: one outbox, one box, one limiter.
func TestNewBuildsEveryServiceOnce(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		a, err := app.New(context.Background(), db, app.Config{Logger: quiet, BaseURL: "https://sb.example/",
			Clicks: &clicks.Config{SpoolDir: filepath.Join(t.TempDir(), "spool")}})
		if err != nil {
			t.Fatal(err)
		}
		for name, missing := range map[string]bool{"DB": a.DB == nil, "Box": a.Box == nil, "Guard": a.Guard == nil,
			"Events": a.Events == nil, "Limiter": a.Limiter == nil, "Nonces": a.Nonces == nil,
			"Verifier": a.Verifier == nil, "Models": a.Models == nil, "Workspaces": a.Workspaces == nil,
			"Links": a.Links == nil, "Clicks": a.Clicks == nil, "Redirects": a.Redirects == nil,
			"Dispatcher": a.Dispatcher == nil, "Webhooks": a.Webhooks == nil, "Automation": a.Automation == nil,
			"Messaging": a.Messaging == nil, "Runtime": a.Runtime == nil, "Streams": a.Streams == nil} {
			if missing {
				t.Errorf("App.%s was not built", name)
			}
		}
		var names []string
		for _, p := range a.Messaging.Providers() {
			names = append(names, p.Name)
		}
		want := append([]string{"sandbox", "telegram", "whatsapp_cloud", "xmpp"}, taggedProviders...)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("providers %v, want %v", names, want)
		}
		if len(a.Collectors()) == 0 {
			t.Error("no metrics of the engines")
		}
	})
}

// A process without a click configuration answers no short links: nothing records clicks and no job runs for them.
func TestNoClicksNoRedirects(t *testing.T) {
	a, err := app.New(context.Background(), storetest.SQLite(t), app.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if a.Clicks != nil || a.Redirects != nil {
		t.Fatal("a recorder or a redirect cache without a click configuration")
	}
	var logs bytes.Buffer
	jobs := runner.New(slog.New(slog.NewTextHandler(&logs, nil)))
	a.Register(jobs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := jobs.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// The server key is what makes sealed secrets outlive a process: a secret sealed by one process opens in the next
// one built with the same key, and in no process built with another.
func TestSecretKeySealsAcrossProcesses(t *testing.T) {
	db := storetest.SQLite(t)
	key := make([]byte, sealbox.KeySize)
	_, _ = rand.Read(key)
	build := func(key []byte) *app.App {
		a, err := app.New(context.Background(), db, app.Config{Logger: quiet, SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sealed := build(key).Box.Seal([]byte("whsec_kept"), []byte("whk_1"))
	if plain, err := build(key).Box.Open(sealed, []byte("whk_1")); err != nil || string(plain) != "whsec_kept" {
		t.Fatalf("the same key: %q, %v", plain, err)
	}
	if _, err := build(nil).Box.Open(sealed, []byte("whk_1")); !errors.Is(err, sealbox.ErrOpen) {
		t.Fatalf("a random key opened it: %v", err)
	}
	if _, err := app.New(context.Background(), db, app.Config{Logger: quiet, SecretKey: []byte("short")}); err == nil {
		t.Fatal("a key of the wrong size was accepted")
	}
}

// The jobs Register adds run together and stop when their context ends, in stages, without an error, while the
// services they serve are used (a workspace created through the service the console uses).
func TestRegisteredJobsRunAndStop(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		a, err := app.New(context.Background(), db, app.Config{Logger: quiet, BaseURL: "https://sb.example",
			Clicks: &clicks.Config{SpoolDir: filepath.Join(t.TempDir(), "spool"), Interval: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		jobs := runner.New(quiet)
		a.Register(jobs)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- jobs.Run(ctx) }()
		ws, err := a.Workspaces.CreateWorkspace(context.Background(), "Jobs", "")
		if err != nil {
			t.Fatal(err)
		}
		if ws.ID == "" {
			t.Fatal("no workspace")
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(await.Timeout):
			t.Fatal("the jobs did not stop")
		}
	})
}
