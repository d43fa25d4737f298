package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// sqliteFaults are what SQLite reports when a process lost its locks and another reset the WAL index under it (disk
// I/O errors — 8714 is SQLITE_IOERR_IN_PAGE, a fault reading a mapped page —, "locking protocol (15)"), or worse.
var sqliteFaults = regexp.MustCompile(`disk I/O error|\(8714\)|locking protocol|database disk image is malformed`)

// An embedded database shared by a loaded server and the operator's CLI — `key list` several times a second and a
// `backup` now and then, each a process of its own — stays whole: no process resets the WAL index under another
// (no I/O or locking-protocol error anywhere), every CLI run succeeds, /readyz stays ready, and the database and
// its backups pass SQLite's integrity check. (PostgreSQL has no shared-memory file to lose; this is SQLite's test.)
func TestSQLiteSharedWithTheCLIUnderLoad(t *testing.T) {
	duration := 60 * time.Second
	if testing.Short() {
		duration = 10 * time.Second
	}
	dbURL := storetest.SQLiteURL(t)
	srv := runServer(t, dbURL, "", append([]string{"SWITCHBOARD_SEND_RATE_PER_MINUTE=0"}, unlimited...)...)
	link := newLinkFixture(t, dbURL, srv)
	c := newAPIClient(t, dbURL, srv.url)
	alice, bob := c.sandbox("alice"), c.sandbox("bob")
	out, _, code := cli(t, dbURL, "workspace", "list", "--json")
	if code != 0 {
		t.Fatalf("workspace list: %d", code)
	}
	var workspaces []struct{ ID string }
	mustJSON(t, out, &workspaces)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	redirects := startHammer(srv.url, link.slug)

	// Messages from alice to bob, about fifty a second: sends, the sandbox's inbound messages and receipts, and
	// their webhooks' outbox rows all write.
	var accepted, refused atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			body := fmt.Sprintf(`{"to":%q,"type":"text","text":"m%d"}`, bob.Account.Address, i)
			req, _ := http.NewRequest(http.MethodPost, srv.url+"/api/v1/instances/"+alice.ID+"/messages", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+c.key)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err == nil && res.StatusCode == http.StatusAccepted {
				accepted.Add(1)
			} else {
				refused.Add(1)
			}
			if err == nil {
				res.Body.Close()
			}
		}
	})

	// Readiness, asked as a load balancer would.
	var unready atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			res, err := http.Get(srv.url + "/readyz")
			if err != nil || res.StatusCode != http.StatusOK {
				unready.Add(1)
			}
			if err == nil {
				res.Body.Close()
			}
		}
	})

	// The operator: key list four times a second, a backup every tenth run.
	backups := t.TempDir()
	var runs, failed int
	var failures []string
	deadline := time.Now().Add(duration)
	for i := 0; time.Now().Before(deadline); i++ {
		args := []string{"key", "list", "--workspace", workspaces[0].ID, "--json"}
		if i%10 == 9 {
			args = []string{"backup", "--to", filepath.Join(backups, fmt.Sprintf("b%03d.db", i))}
		}
		runs++
		if _, stderr, code := cli(t, dbURL, args...); code != 0 {
			failed++
			failures = append(failures, fmt.Sprintf("%s: exit %d: %s", args[0], code, strings.TrimSpace(stderr)))
		}
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	served := redirects.finish()

	await.Until(t, "every accepted message sent", func() int {
		time.Sleep(200 * time.Millisecond) // a page of a hundred is no query to run every 10 ms
		return len(c.messages(alice.ID, "&status=queued"))
	}, func(n int) bool { return n == 0 })
	faults := metric(t, srv.url, "switchboard_store_faults_total")
	logs := srv.stop()
	t.Logf("%v: %d redirects, %d messages accepted (%d refused), %d CLI runs", duration, served, accepted.Load(), refused.Load(), runs)

	if found := sqliteFaults.FindAllString(logs, -1); len(found) > 0 {
		t.Errorf("the server logged %d SQLite faults, the first: %q", len(found), found[0])
	}
	if faults != 0 {
		t.Errorf("the server counted %v store faults", faults)
	}
	if failed > 0 {
		t.Errorf("%d of %d CLI runs failed: %s", failed, runs, strings.Join(failures, "; "))
	}
	if n := unready.Load(); n > 0 {
		t.Errorf("/readyz answered other than 200 %d times", n)
	}
	if refused.Load() > 0 {
		t.Errorf("%d messages were refused", refused.Load())
	}
	integrity(t, "file:"+strings.TrimPrefix(dbURL, "file:"))
	matches, _ := filepath.Glob(filepath.Join(backups, "*.db"))
	if len(matches) == 0 {
		t.Fatal("no backup was written")
	}
	integrity(t, "file:"+matches[len(matches)-1])
}

// integrity runs SQLite's integrity check on the database at dbURL.
func integrity(t *testing.T, dbURL string) {
	t.Helper()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.Bun().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check of %s: %q %v", dbURL, check, err)
	}
}
