package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/internal/automation"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// A server killed (SIGKILL) right after answering ingest requests has every answered event, with its delivery, in
// the database: a 200 is only sent once the event is durable. Requests cut off by the kill got no 2xx, and their
// senders retry them.
func TestIngestKilledAfterAnswerLosesNothing(t *testing.T) {
	databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL)
		f.endpoint("http://127.0.0.1:9/unreachable")
		svc, err := automation.New(f.db, events.NewOutbox(f.db, events.Builtin()), automation.Config{Box: f.box})
		if err != nil {
			t.Fatal(err)
		}
		rate := 600000
		src, token, err := svc.CreateSource(context.Background(), f.ws.ID, automation.NewSource{Name: "crash",
			EventType: "custom.crash.test", Verification: automation.Verification{Scheme: automation.SchemeNone},
			Limits: automation.Limits{RatePerMinute: &rate}})
		if err != nil {
			t.Fatal(err)
		}
		s := runServer(t, dbURL, "", webhookEnv...)

		const senders, killAfter = 8, 150
		var (
			mu       sync.Mutex
			answered []string
			once     sync.Once
			wg       sync.WaitGroup
		)
		killed := make(chan struct{})
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-killed:
						return
					default:
					}
					res, err := http.Post(s.url+"/in/"+token, "application/json", strings.NewReader(`{"n":1}`))
					if err != nil {
						return // the server is gone
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						continue
					}
					var out struct {
						EventID string `json:"event_id"`
					}
					if json.Unmarshal(body, &out) != nil || out.EventID == "" {
						continue
					}
					mu.Lock()
					answered = append(answered, out.EventID)
					n := len(answered)
					mu.Unlock()
					if n >= killAfter {
						once.Do(func() { s.kill(); close(killed) })
					}
				}
			}()
		}
		wg.Wait()
		if len(answered) < killAfter {
			t.Fatalf("only %d requests were answered before the server went away", len(answered))
		}
		ctx := context.Background()
		for _, id := range answered {
			if _, err := f.db.Events.Get(ctx, f.ws.ID, id); err != nil {
				t.Fatalf("event %s was answered with 200 but is not stored: %v", id, err)
			}
			n, err := f.db.Bun().NewSelect().Table("webhook_deliveries").Where("event_id = ?", id).Count(ctx)
			if err != nil || n != 1 {
				t.Fatalf("event %s has %d deliveries (%v), want 1", id, n, err)
			}
		}
		logged, err := f.db.Bun().NewSelect().Table("source_requests").
			Where("source_id = ? AND outcome = ?", src.ID, store.SourceRequestAccepted).Count(ctx)
		if err != nil || int(logged) < len(answered) {
			t.Errorf("%d accepted requests logged (%v), want at least %d", logged, err, len(answered))
		}
		t.Logf("%d events answered before the kill, all stored", len(answered))
	})
}
