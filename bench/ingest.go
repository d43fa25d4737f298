package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
)

// The ingest rows POST one signed JSON body to a source's public URL: the source verifies its HMAC-SHA256 over the
// raw body and writes the event (with its request-log row) before it answers 200. Their goal is absolute —
// accepted events a second on each database with the run's connections — and the ratio to a bare Echo handler that
// reads the same body and answers an ingest result is shown beside it.
const (
	ingestPath   = "/bare-ingest"
	ingestHeader = "X-Signature"
	ingestSecret = "bench-ingest-secret-0123456789abcdef"
	ingestBody   = `{"id":"ord_1042","type":"order.paid","amount":1200,"currency":"EUR","customer":{"email":"ada@example.com","name":"Ada Lovelace"},"items":[{"sku":"SB-1","qty":2},{"sku":"SB-7","qty":1}]}`
)

// ingestGoal is the least acceptable accepted requests a second per database.
var ingestGoal = map[string]float64{"SQLite": 5000, "PostgreSQL": 2000}

// setupIngest creates a source verified by HMAC-SHA256 in the header X-Signature (its event type comes with it)
// with a rate limit wrk cannot reach, and returns its ingest URL.
func setupIngest(ctx context.Context, s *switchboard) (string, error) {
	var src struct {
		IngestURL string `json:"ingest_url"`
	}
	err := s.api(ctx, http.MethodPost, "/api/v1/sources", map[string]any{"name": "bench", "event_type": "custom.bench.order_paid",
		"verification": map[string]any{"scheme": "hmac", "secret": ingestSecret, "header": ingestHeader},
		"limits":       map[string]any{"rate_limit_per_minute": 600000}}, &src)
	if err != nil {
		return "", fmt.Errorf("creating the source: %w", err)
	}
	return src.IngestURL, nil
}

// ingestSignature is the header line of the body's signature.
func ingestSignature() string {
	mac := hmac.New(sha256.New, []byte(ingestSecret))
	mac.Write([]byte(ingestBody))
	return ingestHeader + ": " + hex.EncodeToString(mac.Sum(nil))
}

// writeIngestScript writes the wrk script that POSTs the signed body.
func writeIngestScript(dir string) (string, error) {
	path := filepath.Join(dir, "ingest.lua")
	name, value, _ := strings.Cut(ingestSignature(), ": ")
	script := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[%q] = %q\n",
		ingestBody, name, value)
	return path, os.WriteFile(path, []byte(script), 0o600)
}

// startBareIngest reads a POSTed body and answers an ingest result of the same shape, from an Echo router with no
// middleware: the baseline of the ingest rows.
func startBareIngest() (*httpServer, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	answer := []byte(`{"object":"ingest_result","event_id":"evt_01JDAB3C4D5E6F7G8H9J0K1M2P","duplicate":false}` + "\n")
	e.POST(ingestPath, func(c echo.Context) error {
		if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
			return err
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, answer)
	})
	return serve(ln, e), nil
}

// The ingest → delivery row: signed requests at ingestDeliveryRate a second to the source for the round's duration,
// with a webhook dispatcher (production settings) delivering each event to a receiver on loopback; the samples are
// the time from sending a request to the receiver seeing its event.
const (
	ingestDeliveryRate = 1000
	ingestDeliveryGoal = 500 * time.Millisecond // at the 99th percentile
)

// measureIngestDelivery runs the ingest → delivery row on one server.
func measureIngestDelivery(ctx context.Context, s *switchboard, ingestURL string, d time.Duration) ([]time.Duration, error) {
	arrivals := &arrivals{seen: map[string]time.Time{}}
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	rc := serve(ln, arrivals)
	defer rc.close()
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	if _, err := s.db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: s.ws.ID, URL: rc.url + "/hook",
		Events: []string{"custom.bench.order_paid"}, SealSecret: func(id string) string { return s.box.Seal([]byte(secret), []byte(id)) }}); err != nil {
		return nil, err
	}
	guard := egress.NewGuard(egress.Policy{AllowHTTP: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	dispatcher := webhook.NewDispatcher(s.db, s.box, guard, webhook.Config{Events: s.outbox, Logger: quietLog()})
	running, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = dispatcher.Run(running); close(stopped) }()
	defer func() { stop(); <-stopped }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 10 * time.Second}
	name, value, _ := strings.Cut(ingestSignature(), ": ")
	type sent struct {
		id string
		at time.Time
	}
	var (
		mu     sync.Mutex
		sents  []sent
		failed []string
		wg     sync.WaitGroup
	)
	slots := make(chan struct{}, 128)
	tick := time.NewTicker(time.Second / ingestDeliveryRate)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			at := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ingestURL, strings.NewReader(ingestBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(name, value)
			res, err := client.Do(req)
			if err != nil {
				mu.Lock()
				failed = append(failed, err.Error())
				mu.Unlock()
				return
			}
			var out struct {
				EventID string `json:"event_id"`
			}
			err = json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if res.StatusCode != http.StatusOK || err != nil {
				failed = append(failed, fmt.Sprintf("HTTP %d", res.StatusCode))
				return
			}
			sents = append(sents, sent{out.EventID, at})
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		return nil, fmt.Errorf("%d of %d ingest requests failed, first: %s", len(failed), len(failed)+len(sents), failed[0])
	}
	deadline := time.Now().Add(2 * time.Minute)
	out := make([]time.Duration, 0, len(sents))
	for _, s := range sents {
		for {
			if seen, ok := arrivals.at(s.id); ok {
				out = append(out, max(seen.Sub(s.at), 0))
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("event %s was accepted but never delivered", s.id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out, nil
}
