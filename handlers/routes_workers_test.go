package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Three route workers at once — the env's and two other replicas' over the same database — carry on 30 routes
// whose first step times out (the sandbox reports no receipts, so "delivered" is never met), each created while
// every worker already sees it due: every route starts each step exactly once (one message per attempt, one copy
// at the recipient's instance), and ends completed or failed with one event.
func TestRoutesWorkersReplicas(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, alice, bob, carol, person := newRouteScene(t, db, (*msgEnv).connected, "Carol")
		for range 2 {
			runRoutes(t, routeReplica(t, db))
		}

		// Even routes fail over from Alice (delivered within 1 s, never met) to Carol (sent); odd ones have Alice's
		// step only, and fail when it times out.
		const n = 30
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				steps := []string{routeStep(alice.Id, "delivered", 1)}
				if i%2 == 0 {
					steps = append(steps, routeStep(carol.Id, "sent", 30))
				}
				r, err := e.postRoute(person, fmt.Sprintf("replicas %d", i), steps...)
				if err != nil {
					t.Errorf("route %d: %v", i, err)
					return
				}
				ids[i] = r.Id
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		routes := e.routesEnded(ids)
		for i, r := range routes {
			want, wantStatus := "timed_out", gen.RouteStatusFailed
			if i%2 == 0 {
				want, wantStatus = "timed_out,succeeded", gen.RouteStatusCompleted
			}
			if r.Status != wantStatus || routeStepStatuses(r) != want {
				t.Errorf("route %d = %s %s, want %s %s", i, r.Status, routeStepStatuses(r), wantStatus, want)
			}
		}
		attempts := routeAttempts(t, db, ids)
		for i, r := range routes {
			want := []string{alice.Id}
			if i%2 == 0 {
				want = append(want, carol.Id)
			}
			checkAttempts(t, i, r, attempts[r.Id], want)
		}
		// Bob gets each attempt that left once: Alice's of every route and Carol's of the even ones, less those still
		// queued when their step timed out, which were canceled with it (on a loaded machine, some of Alice's).
		left := map[string]int{}
		for i, r := range routes {
			for _, m := range attempts[r.Id] {
				if m.Status != "canceled" && m.Status != "failed" {
					left[fmt.Sprintf("replicas %d", i)]++
				}
			}
		}
		await.Until(t, "bob to receive every attempt that left", func() map[string]int { return inboundTexts(t, db, bob.Id) },
			func(m map[string]int) bool { return sumCounts(m) >= sumCounts(left) })
		time.Sleep(time.Second) // a duplicate would arrive by now
		got := inboundTexts(t, db, bob.Id)
		for i := range n {
			text := fmt.Sprintf("replicas %d", i)
			if got[text] != left[text] {
				t.Errorf("bob received route %d's message %d times; %d of its attempts left", i, got[text], left[text])
			}
		}
		if sumCounts(left) < n {
			t.Logf("%d of %d attempts were canceled at their step's deadline before they left", n+n/2-sumCounts(left), n+n/2)
		}
		checkRouteEvents(t, db, e.ws.ID, routes)
	})
}

// A route worker stopped while routes are due — their first step's message still queued behind Erin's pacing, or
// failed — and started again later, over and over, then replaced by another replica's: no route is left pending,
// none starts a step twice, and each timed-out attempt is canceled once, with one message.status_updated.
func TestRoutesWorkersRestart(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		// Erin sends one message a minute and has just sent hers: what a route queues on her waits there.
		e, alice, _, erin, person := newRouteScene(t, db, (*msgEnv).connectedOnePerMinute, "Erin")
		e.stopRoutes() // no worker until the test starts one

		const n = 20
		ids := make([]string, n)
		for i := range n {
			r, err := e.postRoute(person, fmt.Sprintf("restart %d", i), routeStep(erin.Id, "sent", 1), routeStep(alice.Id, "sent", 30))
			if err != nil {
				t.Fatalf("route %d: %v", i, err)
			}
			if r.Steps[0].Status != "active" {
				t.Fatalf("route %d's first step did not start: %+v", i, r.Steps[0])
			}
			ids[i] = r.Id
		}
		// Alice's next sends fail: these routes' first attempts fail, and their second step is due at once.
		const failing = 5
		if res := e.post("/api/v1/instances/"+alice.Id+"/sandbox/fail-sends", fmt.Sprintf(`{"count":%d,"code":"recipient_not_on_network"}`, failing)); res.StatusCode != 200 {
			t.Fatalf("fail-sends: %d %s", res.StatusCode, res.body)
		}
		failed := make([]string, failing)
		for i := range failing {
			r, err := e.postRoute(person, fmt.Sprintf("failed %d", i), routeStep(alice.Id, "sent", 30), routeStep(alice.Id, "sent", 30))
			if err != nil {
				t.Fatalf("failing route %d: %v", i, err)
			}
			failed[i] = r.Id
		}
		await.Until(t, "the failing routes' first attempts to fail", func() map[string][]store.Message { return routeAttempts(t, db, failed) },
			func(as map[string][]store.Message) bool {
				for _, id := range failed {
					if len(as[id]) != 1 || as[id][0].Status != string(gen.MessageStatusFailed) {
						return false
					}
				}
				return true
			})
		// With no worker, the deadlines pass and nothing moves: every route waits on Erin's queued attempt or its
		// failed one.
		time.Sleep(1500 * time.Millisecond)
		var l gen.RouteList
		e.get("/api/v1/routes?person_id="+person+"&status=pending&limit=100", &l)
		if len(l.Data) != n+failing {
			t.Fatalf("%d routes pending without a worker, want %d", len(l.Data), n+failing)
		}

		// A replica's worker started and stopped again and again, each run cut short, as a process being
		// restarted (its transactions under way roll back), then another's that stays.
		replica := routeReplica(t, db)
		for i := range 6 {
			stop := runRoutes(t, replica)
			time.Sleep(time.Duration(i*7) * time.Millisecond)
			stop()
		}
		runRoutes(t, routeReplica(t, db))

		routes := e.routesEnded(ids)
		attempts := routeAttempts(t, db, ids)
		for i, r := range routes {
			if r.Status != gen.RouteStatusCompleted || routeStepStatuses(r) != "timed_out,succeeded" {
				t.Errorf("route %d = %s %s", i, r.Status, routeStepStatuses(r))
			}
			checkAttempts(t, i, r, attempts[r.Id], []string{erin.Id, alice.Id})
			if a := attempts[r.Id]; len(a) > 0 && a[0].Status != string(gen.MessageStatusCanceled) {
				t.Errorf("route %d's attempt on erin is %s, want canceled", i, a[0].Status)
			}
		}
		canceled := map[string]int{}
		for _, ev := range workspaceEvents(t, db, e.ws.ID, "message.status_updated") {
			var d struct {
				Message struct{ Id string }
				Status  string
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Status == "canceled" {
				canceled[d.Message.Id]++
			}
		}
		for i, r := range routes {
			if c := canceled[deref(r.Steps[0].MessageId)]; c != 1 {
				t.Errorf("route %d's attempt on erin was canceled %d times", i, c)
			}
		}
		checkRouteEvents(t, db, e.ws.ID, routes)

		routes = e.routesEnded(failed)
		attempts = routeAttempts(t, db, failed)
		for i, r := range routes {
			if r.Status != gen.RouteStatusCompleted || routeStepStatuses(r) != "failed,succeeded" {
				t.Errorf("failing route %d = %s %s", i, r.Status, routeStepStatuses(r))
			}
			checkAttempts(t, i, r, attempts[r.Id], []string{alice.Id, alice.Id})
		}
		checkRouteEvents(t, db, e.ws.ID, routes)
	})
}

// routeReplica is the messaging service of another server process over db: records of its own and a channel
// runtime that sends nothing (it holds no instance while the env's runtime does), as a second replica has.
func routeReplica(t *testing.T, db *store.DB) *channels.Service {
	t.Helper()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	rec, err := channels.NewRecorder(db, events.NewOutbox(db, events.Builtin()), channels.Config{Sealer: box, Logger: log,
		Providers: []channels.Provider{bareProvider{}, sandbox.New(db.Sandbox, sandbox.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := channels.New(rec, hub.New(db, rec, hub.Options{Rate: -1, Lease: 3 * time.Second, Logger: log}))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// runRoutes runs svc's route worker until stop is called (at the latest when the test ends); stop waits for it.
func runRoutes(t *testing.T, svc *channels.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = svc.RunRoutes(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// newRouteScene is a sandbox env that reports no receipts (a "delivered" condition is never met) with its key
// reading events too, where Alice and Bob talk and a third instance, made by connect, wrote to Bob: it returns the
// env, the three instances and Bob as a person with a contact on Alice's and the third's.
func newRouteScene(t *testing.T, db *store.DB, connect func(*msgEnv, string) gen.Instance, third string) (e *msgEnv, alice, bob, other gen.Instance, person string) {
	t.Helper()
	e = newSandboxEnvWith(t, db, sandbox.Options{Delivered: sandbox.NoReceipt, Read: sandbox.NoReceipt})
	e.apiKey, _ = e.key(e.ws.ID, "messaging:write", "webhooks:read")
	alice, bob, _, _ = e.talking("Alice", "Bob")
	other = connect(e, third)
	e.say(other, bob.Account.Address, "hi from "+strings.ToLower(third))
	return e, alice, bob, other, e.personOn(bob, alice, other)
}

// routeStep is a step of a route request that names an instance.
func routeStep(instanceID, until string, within int) string {
	return fmt.Sprintf(`{"instance_id":%q,"until":%q,"within_seconds":%d}`, instanceID, until, within)
}

// postRoute sends a text to a person by a route of steps (routeStep) and returns the route; it reports a refusal as
// its error, so that goroutines can call it.
func (e *msgEnv) postRoute(person, text string, steps ...string) (gen.Route, error) {
	res := e.post("/api/v1/people/"+person+"/messages",
		fmt.Sprintf(`{"message":{"type":"text","text":%q},"steps":[%s]}`, text, strings.Join(steps, ",")))
	var r gen.Route
	if res.StatusCode != 202 {
		return r, fmt.Errorf("%d %s", res.StatusCode, res.body)
	}
	return r, json.Unmarshal(res.body, &r)
}

// connectedOnePerMinute creates and connects a sandbox instance that sends one message a minute (a burst of one):
// after its first message, what is queued on it waits there for a minute.
func (e *msgEnv) connectedOnePerMinute(name string) gen.Instance {
	e.t.Helper()
	res := e.post("/api/v1/instances", fmt.Sprintf(`{"name":%q,"provider":"sandbox","config":{"auto_pair":true,"display_name":%q},"pacing":{"rate_per_minute":1,"burst":1}}`,
		strings.ToLower(name), name))
	if res.StatusCode != 201 {
		e.t.Fatalf("create %s: %d %s", name, res.StatusCode, res.body)
	}
	var inst gen.Instance
	res.json(e.t, &inst)
	if res := e.post("/api/v1/instances/"+inst.Id+"/connect", ""); res.StatusCode != 200 {
		e.t.Fatalf("connect %s: %d %s", name, res.StatusCode, res.body)
	}
	return e.status(inst.Id, "connected")
}

// personOn waits until the person at who's address has a contact on each of the instances, and returns its ID.
func (e *msgEnv) personOn(who gen.Instance, on ...gen.Instance) string {
	e.t.Helper()
	l := await.Until(e.t, who.Account.Address+" as one person", func() gen.PersonList {
		var l gen.PersonList
		e.get("/api/v1/people?address="+strings.ReplaceAll(who.Account.Address, "+", "%2B"), &l)
		return l
	}, func(l gen.PersonList) bool { return len(l.Data) == 1 && len(l.Data[0].Contacts) == len(on) })
	return l.Data[0].Id
}

// routesEnded waits until every route of ids has ended and returns them, in that order.
func (e *msgEnv) routesEnded(ids []string) []gen.Route {
	e.t.Helper()
	return await.Until(e.t, "every route to end", func() []gen.Route {
		out := make([]gen.Route, len(ids))
		for i, id := range ids {
			e.get("/api/v1/routes/"+id, &out[i])
		}
		return out
	}, func(rs []gen.Route) bool {
		for _, r := range rs {
			if r.Status == gen.RouteStatusPending {
				return false
			}
		}
		return true
	})
}

// routeStepStatuses is a route's step statuses, comma-separated.
func routeStepStatuses(r gen.Route) string {
	s := make([]string, len(r.Steps))
	for i, st := range r.Steps {
		s[i] = string(st.Status)
	}
	return strings.Join(s, ",")
}

// routeAttempts reads every message that is an attempt of the routes, by route, oldest first.
func routeAttempts(t *testing.T, db *store.DB, ids []string) map[string][]store.Message {
	t.Helper()
	var ms []store.Message
	if err := db.Bun().NewSelect().Model(&ms).Where("route_id IN (?)", bun.In(ids)).OrderExpr("created_at, id").
		Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string][]store.Message{}
	for _, m := range ms {
		out[*m.RouteID] = append(out[*m.RouteID], m)
	}
	return out
}

// checkAttempts checks that route i sent one message per started step, on the instances want, each the message its
// step names.
func checkAttempts(t *testing.T, i int, r gen.Route, got []store.Message, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("route %d has %d attempts, want %d", i, len(got), len(want))
		return
	}
	for k, m := range got {
		if m.InstanceID != want[k] || deref(r.Steps[k].MessageId) != m.ID {
			t.Errorf("route %d's attempt %d = %s on %s, its step names %s on %s", i, k, m.ID, m.InstanceID,
				deref(r.Steps[k].MessageId), want[k])
		}
	}
}

// inboundTexts counts the texts an instance received, by text.
func inboundTexts(t *testing.T, db *store.DB, instanceID string) map[string]int {
	t.Helper()
	var texts []string
	if err := db.Bun().NewSelect().Model((*store.Message)(nil)).Column("text").
		Where("instance_id = ? AND direction = 'inbound' AND text IS NOT NULL", instanceID).Scan(context.Background(), &texts); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range texts {
		if !strings.HasPrefix(s, "hi") {
			out[s]++
		}
	}
	return out
}

// sumCounts is the sum of a count map's values.
func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// workspaceEvents reads a workspace's events of a type.
func workspaceEvents(t *testing.T, db *store.DB, workspaceID, typ string) []store.Event {
	t.Helper()
	var evs []store.Event
	if err := db.Bun().NewSelect().Model(&evs).Where("workspace_id = ? AND type = ?", workspaceID, typ).
		Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkRouteEvents checks that each ended route has exactly one route.completed or route.failed event, as it ended.
func checkRouteEvents(t *testing.T, db *store.DB, workspaceID string, routes []gen.Route) {
	t.Helper()
	seen := map[string]map[string]int{}
	for _, typ := range []string{"route.completed", "route.failed"} {
		seen[typ] = map[string]int{}
		for _, ev := range workspaceEvents(t, db, workspaceID, typ) {
			var d struct{ Route struct{ Id string } }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			seen[typ][d.Route.Id]++
		}
	}
	for i, r := range routes {
		c, f := seen["route.completed"][r.Id], seen["route.failed"][r.Id]
		if (r.Status == gen.RouteStatusCompleted && (c != 1 || f != 0)) || (r.Status == gen.RouteStatusFailed && (c != 0 || f != 1)) {
			t.Errorf("route %d (%s) has %d route.completed and %d route.failed events", i, r.Status, c, f)
		}
	}
}

// Receipts of two instances recorded at once, each run in one transaction, for routes that failed over between the
// two in both directions (Alice then Carol, Carol then Alice): each transaction locks the routes of its messages,
// an instance's messages of one direction first and the other's second, so without one order of route locks two
// such transactions wait for each other and PostgreSQL aborts one as a deadlock (SQLite has one writer).
func TestRoutesReceiptsAcrossInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, alice, _, carol, person := newRouteScene(t, db, (*msgEnv).connected, "Carol")

		const n = 40
		ids := make([]string, n)
		for i := range n {
			first, second := alice.Id, carol.Id
			if i%2 == 1 {
				first, second = second, first
			}
			r, err := e.postRoute(person, fmt.Sprintf("crossed %d", i), routeStep(first, "delivered", 1), routeStep(second, "sent", 30))
			if err != nil {
				t.Fatalf("route %d: %v", i, err)
			}
			ids[i] = r.Id
		}
		e.routesEnded(ids)
		byInstance := map[string][]channels.Report{}
		await.Until(t, "every attempt sent", func() bool {
			clear(byInstance)
			for _, ms := range routeAttempts(t, db, ids) {
				for _, m := range ms {
					if left(m) == "" {
						continue
					}
					if m.ProviderMessageID == nil {
						return false
					}
					byInstance[m.InstanceID] = append(byInstance[m.InstanceID], channels.Report{
						Receipt: &channels.Receipt{ProviderID: *m.ProviderMessageID, Status: "delivered", At: time.Now()}})
				}
			}
			return true
		}, func(ok bool) bool { return ok })
		t.Logf("attempts that left: %d from Alice, %d from Carol", len(byInstance[alice.Id]), len(byInstance[carol.Id]))
		if len(byInstance[alice.Id]) < n/2 || len(byInstance[carol.Id]) < n/2 {
			t.Fatalf("too few attempts left to cross: %d from Alice, %d from Carol", len(byInstance[alice.Id]), len(byInstance[carol.Id]))
		}

		// Each instance's sink on a replica of its own, as when two processes hold them; both start at once.
		sinks := map[string]channels.BatchSink{alice.Id: openSink(t, routeReplica(t, db), alice.Id),
			carol.Id: openSink(t, routeReplica(t, db), carol.Id)}
		before := deadlocks(t, db)
		for _, status := range []string{"delivered", "read"} {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for id, sink := range sinks {
				reports := byInstance[id]
				for _, r := range reports {
					r.Receipt.Status = status
				}
				wg.Go(func() {
					<-start
					t0 := time.Now()
					if got, err := sink.Record(context.Background(), reports); err != nil || got != len(reports) {
						t.Errorf("%s receipts of %s: %d of %d recorded, %v", status, id, got, len(reports), err)
					}
					t.Logf("%s receipts of %s recorded in %v", status, id, time.Since(t0))
				})
			}
			close(start)
			wg.Wait()
		}
		for _, ms := range routeAttempts(t, db, ids) {
			for _, m := range ms {
				if left(m) == "" {
					continue
				}
				if m.Status != "read" {
					t.Errorf("attempt %s is %s, want read", m.ID, m.Status)
				}
			}
		}
		if db.Dialect() == store.Postgres {
			time.Sleep(1500 * time.Millisecond) // the statistics are flushed at most every second
			if d := deadlocks(t, db) - before; d != 0 {
				t.Errorf("%d deadlocks recording the receipts", d)
			}
		}
	})
}

// left is the instance an attempt left from, or "" for one canceled or failed before it left: an attempt still queued
// when its step's deadline passed is canceled with the step (on a loaded machine, some one-second first steps are),
// and has no receipt to record.
func left(m store.Message) string {
	if m.ProviderMessageID == nil && (m.Status == "canceled" || m.Status == "failed") {
		return ""
	}
	return m.InstanceID
}

// openSink opens an instance's sink on svc as its session would, for recording runs of reports.
func openSink(t *testing.T, svc *channels.Service, instanceID string) channels.BatchSink {
	t.Helper()
	_, _, sink, err := svc.Open(context.Background(), instanceID)
	if err != nil {
		t.Fatal(err)
	}
	return sink.(channels.BatchSink)
}

// deadlocks is how many deadlocks PostgreSQL detected in the test database so far (0 on SQLite).
func deadlocks(t *testing.T, db *store.DB) int64 {
	t.Helper()
	if db.Dialect() != store.Postgres {
		return 0
	}
	var n int64
	if err := db.Bun().NewRaw("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").
		Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}
