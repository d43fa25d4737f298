package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store/storetest"
)

// ownDatabases runs fn on a new SQLite file and on a PostgreSQL database of the test's own: the channel runtime of
// every server holds every instance of its database, so these tests keep theirs to themselves.
func ownDatabases(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.EmptyPostgresURL(t)) })
}

// unlimited lifts the API rate limits of a test's servers: the tests call the API faster than a client should.
var unlimited = []string{"SWITCHBOARD_RATE_LIMIT_PER_MINUTE=1000000", "SWITCHBOARD_WORKSPACE_RATE_LIMIT_PER_MINUTE=1000000"}

// apiClient calls a server's API with a key.
type apiClient struct {
	t   *testing.T
	url string
	key string
}

// newAPIClient makes a workspace and a messaging key with the CLI.
func newAPIClient(t *testing.T, dbURL, url string) *apiClient {
	t.Helper()
	out, stderr, code := cli(t, dbURL, "workspace", "create", "--name", "Channels", "--json")
	if code != 0 {
		t.Fatalf("workspace create: %s", stderr)
	}
	var ws struct{ ID string }
	mustJSON(t, out, &ws)
	out, stderr, code = cli(t, dbURL, "key", "create", "--workspace", ws.ID, "--name", "k",
		"--scopes", "messaging:read,messaging:write", "--json")
	if code != 0 {
		t.Fatalf("key create: %s", stderr)
	}
	var key struct{ Secret string }
	mustJSON(t, out, &key)
	return &apiClient{t: t, url: url, key: key.Secret}
}

// call sends a request and decodes a JSON answer into v; it returns the status.
func (c *apiClient) call(method, path, body string, v any) int {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if v != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, v); err != nil {
			c.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	if res.StatusCode >= 300 && v != nil {
		c.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode
}

type apiInstance struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Account *struct {
		Address string `json:"address"`
	} `json:"account"`
}

// sandbox creates a sandbox instance that pairs by itself and waits until it is connected.
func (c *apiClient) sandbox(name string) apiInstance {
	c.t.Helper()
	var inst apiInstance
	c.call("POST", "/api/v1/instances", fmt.Sprintf(`{"name":%q,"provider":"sandbox","config":{"auto_pair":true}}`, name), &inst)
	c.call("POST", "/api/v1/instances/"+inst.ID+"/connect", "", &inst)
	return c.connected(inst.ID)
}

func (c *apiClient) connected(id string) apiInstance {
	c.t.Helper()
	return await.Until(c.t, "instance "+id+" connected", func() apiInstance {
		var inst apiInstance
		c.call("GET", "/api/v1/instances/"+id, "", &inst)
		return inst
	}, func(i apiInstance) bool { return i.Status == "connected" && i.Account != nil })
}

// post sends a request body without failing the test, for use outside the test's goroutine.
func (c *apiClient) post(path, body string) (int, error) {
	req, err := http.NewRequest("POST", c.url+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Body.Close()
}

// queueTexts sends n texts from one instance to another, "m000" to "m<n-1>", each answered 202 (queued).
func (c *apiClient) queueTexts(from, to apiInstance, n int) {
	c.t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"to":%q,"type":"text","text":"m%03d"}`, to.Account.Address, i)
		if code := c.call("POST", "/api/v1/instances/"+from.ID+"/messages", body, nil); code != 202 {
			c.t.Fatalf("send %d: %d", i, code)
		}
	}
}

type apiMessage struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	Status    string `json:"status"`
	Direction string `json:"direction"`
}

// messages lists every message of an instance, oldest first.
func (c *apiClient) messages(instanceID, query string) []apiMessage {
	c.t.Helper()
	var all []apiMessage
	cursor := ""
	for {
		var page struct {
			Data       []apiMessage `json:"data"`
			NextCursor *string      `json:"next_cursor"`
		}
		path := "/api/v1/instances/" + instanceID + "/messages?limit=100" + query
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		c.call("GET", path, "", &page)
		all = append(all, page.Data...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	slices.Reverse(all)
	return all
}

// A server killed with messages in its send queue sends each of them once after a restart, in order per chat: at
// most the messages in flight at the kill are sent again, with the same IDs, and the network drops the repeats.
// 2,000 messages of 50 instances, each sending 40 to the next in a ring, so that many instances and chats share the
// queue, its claims and its batched records.
func TestKilledWithQueuedMessagesSendsEachOnce(t *testing.T) {
	ownDatabases(t, func(t *testing.T, dbURL string) {
		const instances, each = 50, 40
		const n = instances * each
		// Paced at one every 5 s per instance (10 a second in all), so that most of the messages still wait when the
		// kill comes.
		a := runServer(t, dbURL, "", "SWITCHBOARD_SEND_RATE_PER_MINUTE=12", "SWITCHBOARD_SEND_BURST=1",
			"SWITCHBOARD_INSTANCE_LEASE=2s", "SWITCHBOARD_RECONNECT_STAGGER=100ms", unlimited[0], unlimited[1])
		c := newAPIClient(t, dbURL, a.url)
		ring := make([]apiInstance, instances)
		for i := range ring {
			ring[i] = c.sandbox(fmt.Sprint("i", i))
		}
		// Each instance's texts are queued in order by one client, the instances in parallel.
		var wg sync.WaitGroup
		failures := make(chan string, instances)
		for i, from := range ring {
			to := ring[(i+1)%instances]
			wg.Go(func() {
				for k := range each {
					body := fmt.Sprintf(`{"to":%q,"type":"text","text":"m%03d"}`, to.Account.Address, k)
					if code, err := c.post("/api/v1/instances/"+from.ID+"/messages", body); err != nil || code != 202 {
						failures <- fmt.Sprintf("send %d of %s: %d %v", k, from.ID, code, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(failures)
		for f := range failures {
			t.Fatal(f)
		}
		a.kill()

		b := runServer(t, dbURL, "", "SWITCHBOARD_SEND_RATE_PER_MINUTE=0", "SWITCHBOARD_INSTANCE_LEASE=2s",
			"SWITCHBOARD_RECONNECT_STAGGER=100ms", unlimited[0], unlimited[1])
		c.url = b.url
		depth := func() int {
			total := 0
			for _, inst := range ring {
				var q struct {
					Depth int `json:"depth"`
				}
				c.call("GET", "/api/v1/instances/"+inst.ID+"/queue", "", &q)
				total += q.Depth
			}
			return total
		}
		queued := depth()
		if queued < n/2 {
			t.Errorf("only %d of %d messages were still queued after the kill: the test did not test much", queued, n)
		}
		// Correctness, not speed: wait while the queues keep shrinking (a loaded CI machine sends slower), and fail
		// when 30 s pass without one more message sent.
		for last := -1; ; {
			left := await.Until(t, "one more message sent", func() int {
				time.Sleep(200 * time.Millisecond)
				return depth()
			}, func(d int) bool { return d == 0 || last < 0 || d < last })
			if left == 0 {
				break
			}
			last = left
		}
		for i, inst := range ring {
			var texts []string
			for _, m := range c.messages(inst.ID, "&direction=inbound") {
				texts = append(texts, m.Text)
			}
			if len(texts) != each {
				t.Fatalf("%s received %d messages from %s, want %d: %v", inst.ID, len(texts), ring[(i+instances-1)%instances].ID, each, texts)
			}
			for k, text := range texts {
				if text != fmt.Sprintf("m%03d", k) {
					t.Fatalf("%s's message %d is %q: out of order or repeated (%v)", inst.ID, k, text, texts[max(0, k-3):min(each, k+3)])
				}
			}
		}
		for _, inst := range ring {
			for _, m := range c.messages(inst.ID, "&direction=outbound") {
				if m.Status != "sent" && m.Status != "delivered" && m.Status != "read" {
					t.Fatalf("message %s of %s is %s after its queue emptied", m.ID, inst.ID, m.Status)
				}
			}
		}
		t.Logf("%d of %d messages were queued at the kill", queued, n)
	})
}

// Two servers on one PostgreSQL hold each instance's session once between them; when the one holding them dies,
// the other takes every instance over within the lease time and sends their messages.
func TestTwoServersHoldEachInstanceOnce(t *testing.T) {
	dbURL := storetest.EmptyPostgresURL(t)
	env := []string{"SWITCHBOARD_SEND_RATE_PER_MINUTE=0", "SWITCHBOARD_INSTANCE_LEASE=2s", "SWITCHBOARD_RECONNECT_STAGGER=200ms", unlimited[0], unlimited[1]}
	a := runServer(t, dbURL, "", env...)
	c := newAPIClient(t, dbURL, a.url)
	b := runServer(t, dbURL, "", env...)
	var ids []string
	for i := range 6 {
		ids = append(ids, c.sandbox(fmt.Sprint("i", i)).ID)
	}
	held := func() [2]int {
		return [2]int{int(metric(t, a.url, "switchboard_channel_sessions")), int(metric(t, b.url, "switchboard_channel_sessions"))}
	}
	got := await.Until(t, "six sessions between the servers", held, func(h [2]int) bool { return h[0]+h[1] == 6 })
	t.Logf("sessions held: a %d, b %d", got[0], got[1])
	// The holder changes nothing while both live: over several lease renewals the sum stays six.
	for range 5 {
		if h := held(); h[0]+h[1] != 6 {
			t.Fatalf("sessions held: %v, want six in all", h)
		}
	}
	a.kill()
	await.Until(t, "b holds every session", func() int { return int(metric(t, b.url, "switchboard_channel_sessions_connected")) },
		func(n int) bool { return n == 6 })
	c.url = b.url
	to := c.connected(ids[1]).Account.Address
	var m apiMessage
	c.call("POST", "/api/v1/instances/"+ids[0]+"/messages", fmt.Sprintf(`{"to":%q,"type":"text","text":"after"}`, to), &m)
	await.Until(t, "the message sent after the takeover", func() string {
		var got apiMessage
		c.call("GET", "/api/v1/instances/"+ids[0]+"/messages/"+m.ID, "", &got)
		return got.Status
	}, func(s string) bool { return s == "sent" || s == "delivered" || s == "read" })
}

// A server killed with kill -9 and started again in its place (its data directory on SQLite, its host on
// PostgreSQL) takes the instances it held at once, without waiting for their leases (30 s) to run out, and sends
// what was queued and what was in flight (with the same message ID).
func TestRestartTakesItsInstancesAtOnce(t *testing.T) {
	ownDatabases(t, func(t *testing.T, dbURL string) {
		// Paced at one a second, so that the queue is long at the kill; the default lease of 30 s.
		a := runServer(t, dbURL, "", "SWITCHBOARD_SEND_RATE_PER_MINUTE=60", "SWITCHBOARD_SEND_BURST=1",
			"SWITCHBOARD_RECONNECT_STAGGER=100ms", unlimited[0], unlimited[1])
		c := newAPIClient(t, dbURL, a.url)
		alice, bob := c.sandbox("alice"), c.sandbox("bob")
		const n = 20
		c.queueTexts(alice, bob, n)
		a.kill()

		b := runServer(t, dbURL, "", "SWITCHBOARD_SEND_RATE_PER_MINUTE=0", "SWITCHBOARD_RECONNECT_STAGGER=100ms",
			unlimited[0], unlimited[1])
		started := time.Now()
		c.url = b.url
		sent := func() int {
			k := 0
			for _, m := range c.messages(alice.ID, "") {
				if m.Status == "sent" || m.Status == "delivered" || m.Status == "read" {
					k++
				}
			}
			return k
		}
		before := sent()
		if before == n {
			t.Fatal("every message was sent before the kill: the test tested nothing")
		}
		// Without the slot the queue would wait for the dead server's leases: 30 s.
		for sent() < n {
			if time.Since(started) > 15*time.Second {
				t.Fatalf("%d of %d messages sent 15 s after the restart: the restart waited for its own leases", sent(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%d messages queued at the kill were all sent %v after the restart", n-before, time.Since(started).Round(10*time.Millisecond))
	})
}
