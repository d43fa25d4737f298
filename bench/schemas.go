package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/switchboard/switchboard/internal/automation/schematest"
)

// The schema rows measure the bounds of custom event types with the costliest schema they accept (schematest's: a
// value checked against 61 subschemas, 32 patterns, 500 subschemas nested 30 levels deep): creating a type with
// it — the schema held to its meta-schema, measured against the bounds and compiled — and sending, without a key, a
// 256 KiB body to a source of that type, which validation answers within its budget of checks (for that schema and
// body: refused when the budget is spent). The goals are the issue's: any accepted schema compiles in ≤ 100 ms and
// validates a 256 KiB body in ≤ 50 ms, at the 99th percentile. Each row's name ends with the CPU time one request
// cost the process, which a shared machine does not inflate as it does the latencies.
const (
	schemaCreateGoal   = 100 * time.Millisecond
	schemaValidateGoal = 50 * time.Millisecond
	schemaSamples      = 40
	schemaBodySize     = 256 << 10
)

// measureSchemaBounds measures the schema rows of one database whose names match rows.
func measureSchemaBounds(ctx context.Context, s *switchboard, database string, rows *regexp.Regexp) ([]measurement, error) {
	create := "POST /api/v1/event-types, the costliest schema the bounds accept — " + database
	validate := "POST /in/{token}, 256 KiB body against that schema (check budget) — " + database
	var out []measurement
	if !rows.MatchString(create) && !rows.MatchString(validate) {
		return nil, nil
	}
	schema := json.RawMessage(schematest.Costliest())
	var created []time.Duration
	cpu := readCPU("")
	for i := range schemaSamples {
		body := map[string]any{"name": fmt.Sprintf("custom.bench.bounds_%d", i), "description": "bench",
			"schema": schema, "example": map[string]any{"items": []any{}}}
		start := time.Now()
		if err := s.api(ctx, http.MethodPost, "/api/v1/event-types", body, &json.RawMessage{}); err != nil {
			return nil, err
		}
		created = append(created, time.Since(start))
	}
	if rows.MatchString(create) {
		out = append(out, measurement{name: create + cpuEach(cpu), samples: created, goal: schemaCreateGoal, p99: true})
	}
	if !rows.MatchString(validate) {
		return out, nil
	}
	var src struct {
		IngestURL string `json:"ingest_url"`
	}
	if err := s.api(ctx, http.MethodPost, "/api/v1/sources", map[string]any{"name": "bench bounds",
		"event_type": "custom.bench.bounds_0", "verification": map[string]any{"scheme": "none"},
		"limits": map[string]any{"rate_limit_per_minute": 600000, "max_body_bytes": 1 << 20}}, &src); err != nil {
		return nil, err
	}
	body := []byte(schematest.Body(schemaBodySize))
	var validated []time.Duration
	cpu = readCPU("")
	for range schemaSamples {
		start := time.Now()
		if err := postExpecting(ctx, src.IngestURL, body, http.StatusUnprocessableEntity); err != nil {
			return nil, err
		}
		validated = append(validated, time.Since(start))
	}
	return append(out, measurement{name: validate + cpuEach(cpu), samples: validated, goal: schemaValidateGoal, p99: true}), nil
}

// cpuEach is the process's CPU time per sample since from, as a suffix of a row's name.
func cpuEach(from cpuUse) string {
	self, _ := from.perItem(readCPU(""), schemaSamples)
	return fmt.Sprintf(" (CPU %s each)", formatLatency(self))
}

// postExpecting POSTs a JSON body to url and fails unless the answer has the status.
func postExpecting(ctx context.Context, url string, body []byte, status int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != status {
		return fmt.Errorf("POST %s answered %d, want %d: %.300s", url, res.StatusCode, status, answer)
	}
	return nil
}
