package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/labstack/echo/v4"
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
