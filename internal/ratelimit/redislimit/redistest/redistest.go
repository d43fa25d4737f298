// Package redistest gives tests the Redis of the machine: a database number of the test binary's own and a key
// prefix of each test's own, whose keys are deleted when the test ends.
//
// Redis is found at SWITCHBOARD_TEST_REDIS_URL (default redis://127.0.0.1:6379). When it cannot be reached the test
// is skipped, unless CI is set: then it fails.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the server tests use unless SWITCHBOARD_TEST_REDIS_URL says otherwise.
const DefaultURL = "redis://127.0.0.1:6379"

// URL returns the URL of a Redis database for this test binary (one of databases 1 to 15, chosen by process ID, so
// that runs side by side rarely share one), or skips (fails under CI) when Redis does not answer.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("SWITCHBOARD_TEST_REDIS_URL")
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SWITCHBOARD_TEST_REDIS_URL: %v", err)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/" + strconv.Itoa(1+os.Getpid()%15)
	}
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatalf("SWITCHBOARD_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis is required when CI is set: %v", err)
		}
		t.Skipf("Redis not available (set SWITCHBOARD_TEST_REDIS_URL): %v", err)
	}
	return u.String()
}

// Prefix returns a key prefix of the test's own; the keys under it are deleted when the test ends.
func Prefix(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "switchboard-test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}
