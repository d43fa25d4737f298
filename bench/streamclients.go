package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"
)

// The stream rows' clients run in a process of their own (this binary, started again with streamClientsEnv set), as
// real subscribers do: the server's CPU time and memory per stream are then its own, and what the clients cost is
// measured apart, from their process. In the server's process they shared its garbage collector and its two cores'
// scheduler, and a client made cheaper there would have flattered the server.
const (
	// streamClientsEnv holds the stream's URL; set, the binary is the client process.
	streamClientsEnv = "SWITCHBOARD_BENCH_STREAM_CLIENTS"
	// streamKeyEnv holds the API key the clients open their streams with.
	streamKeyEnv = "SWITCHBOARD_BENCH_STREAM_KEY"
	// streamReadBuffer is what a client reads the stream into: a batch of events (20 ms of 1,000 a second, about
	// 13 KiB) in one read, as a browser's EventSource reads whatever arrived, where bufio's default of 4 KiB took
	// several reads (system calls and wake-ups) per batch.
	streamReadBuffer = 64 << 10
)

// streamClientReport is what one client read: how many events and a running hash of their IDs, and for the sampled
// clients the IDs with when each arrived (Unix nanoseconds: the two processes share the wall clock).
type streamClientReport struct {
	N    int      `json:"n"`
	Hash uint64   `json:"hash"`
	IDs  []string `json:"ids,omitempty"`
	At   []int64  `json:"at,omitempty"`
}

// streamClientsMain is the client process: it opens streamClients streams, writes "ready <bytes per client>" on
// stdout once every stream is registered, reads them until its stdin closes, then writes every client's report as
// JSON.
func streamClientsMain() error {
	url, key := os.Getenv(streamClientsEnv), os.Getenv(streamKeyEnv)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	transport := &http.Transport{MaxIdleConnsPerHost: streamClients, DisableCompression: true}
	client := &http.Client{Transport: transport}
	reports := make([]streamClientReport, streamClients)
	var readers sync.WaitGroup
	ctx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	for i := range reports {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("stream answered %d", res.StatusCode)
		}
		r := bufio.NewReaderSize(res.Body, streamReadBuffer)
		if _, err := r.ReadString('\n'); err != nil { // "retry: …": the stream is registered
			return err
		}
		c := &reports[i]
		sampled := i%streamSampleEvery == 0
		readers.Go(func() {
			defer res.Body.Close()
			// The client reads lines in place and keeps a count and a hash of the IDs (the sampled ones the IDs
			// too), as a consumer that parses every line and keeps little would.
			continued, h := false, idHashStart
			for {
				line, err := r.ReadSlice('\n')
				if errors.Is(err, bufio.ErrBufferFull) {
					continued = true // the rest of a long data line follows
					continue
				}
				if err != nil {
					return
				}
				if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok && !continued {
					id = bytes.TrimSpace(id)
					c.N++
					h = h.add(id)
					c.Hash = uint64(h)
					if sampled {
						c.IDs = append(c.IDs, string(id))
						c.At = append(c.At, time.Now().UnixNano())
					}
				}
				continued = false
			}
		})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	fmt.Printf("ready %d\n", (after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse)/streamClients)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stopReading()
	readers.Wait()
	return json.NewEncoder(os.Stdout).Encode(reports)
}
