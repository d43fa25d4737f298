package channels

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// A route sends one message to a person, channel after channel: each step names an instance (or a provider, and
// the step picks an instance of it), and a condition its attempt must meet in time. The route's row is the whole
// state: which step is under way, its message, and due_at — when the route worker must act next (the step's
// deadline, or now when the step's message failed). Status moves of a step's message reach the route in the same
// transaction (routeMessageMoved); starting a step, which queues a message on another instance, is the worker's,
// in a transaction of its own that locks that instance first, as every send does.
const (
	routePending   = "pending"
	routeCompleted = "completed"
	routeFailed    = "failed"

	stepWaiting   = "waiting"
	stepActive    = "active"
	stepSucceeded = "succeeded"
	stepFailed    = "failed"
	stepTimedOut  = "timed_out"
	stepSkipped   = "skipped"
)

// routePoll is how often the route worker looks for due routes it was not woken for: deadlines, and routes that
// another replica's commits made due.
const routePoll = 500 * time.Millisecond

// routeRecheck is how soon a woken route worker that found nothing due looks again (the waking transaction had
// not committed yet).
const routeRecheck = 15 * time.Millisecond

// errRouteMoved is returned inside a route's transaction when another process changed the route since it was read.
var errRouteMoved = errors.New("channels: the route changed meanwhile")

// meets reports whether a message status satisfies a step's condition.
func meets(status, until string) bool {
	switch until {
	case "sent":
		return status == msgSent || status == msgDelivered || status == msgRead
	case "delivered":
		return status == msgDelivered || status == msgRead
	case "read":
		return status == msgRead
	}
	return false
}

// conditionCapability is the capability a condition needs from the provider (none for sent).
var conditionCapability = map[string]Capability{"delivered": CapDelivered, "read": CapRead}

// RouteDraft is a route to start (see SendToPerson): its message (a text or a media file) and the steps that try it.
type RouteDraft struct {
	Message store.RouteMessage
	Steps   []RouteStepDraft
}

// RouteStepDraft is a step of a route to start: exactly one of an instance and a provider (any of its instances
// that can reach the person), and the condition (Until, within WithinSeconds) that ends it.
type RouteStepDraft struct {
	InstanceID, Provider *string
	Until                string
	WithinSeconds        int
}

// SendToPerson starts a route: a message to a person tried by the steps in order. Returns a NotFound problem for a
// person the key does not see; ValidationFailed for content or steps that do not fit; ReferenceNotFound for an
// instance the key does not see; CapabilityNotSupported for content or a condition a step's provider cannot do.
// The first step is started before it returns (when it can start: otherwise the route worker carries on).
func (s *Service) SendToPerson(ctx context.Context, workspaceID, personID string, scope []string, in RouteDraft) (store.Route, error) {
	person, err := s.GetPerson(ctx, workspaceID, personID, scope)
	if err != nil {
		return store.Route{}, err
	}
	msg, err := routeMessageOf(in.Message)
	if err != nil {
		return store.Route{}, err
	}
	steps, err := s.routeSteps(ctx, workspaceID, scope, msg, in.Steps)
	if err != nil {
		return store.Route{}, err
	}
	now := time.Now()
	r := store.Route{ID: store.NewID("rte"), WorkspaceID: workspaceID, PersonID: person.ID, Status: routePending,
		Message: msg, Steps: steps, Step: -1, DueAt: &now}
	if err := s.inTx(ctx, func(ctx context.Context, tx store.Tx) error { return s.db.Routes.Create(ctx, tx, &r) }); err != nil {
		return store.Route{}, storeError(err, "workspace", workspaceID)
	}
	if err := s.advanceRoute(ctx, r.ID); err != nil {
		// The route is stored and due: the worker starts it.
		s.log.Warn("route: first step not started; the route worker retries", "route", r.ID, "error", err)
	}
	return s.GetRoute(ctx, workspaceID, r.ID, nil)
}

// routeMessageOf checks a route's content.
func routeMessageOf(in store.RouteMessage) (store.RouteMessage, error) {
	var errs problem.Fields
	m := store.RouteMessage{Type: in.Type, Text: in.Text}
	switch MessageType(in.Type) {
	case TypeText:
		if in.Text == nil {
			errs.Add("/message/text", "a text message needs it")
		}
		if in.Media != nil {
			errs.Add("/message/media", "a text message has none")
		}
	case TypeMedia:
		if in.Media == nil {
			errs.Add("/message/media", "a media message needs it")
		} else {
			media := *in.Media
			m.Media = &media
		}
	}
	return m, errs.Err()
}

// routeSteps checks a route's steps against the key's instances and the providers' capabilities.
func (s *Service) routeSteps(ctx context.Context, workspaceID string, scope []string, msg store.RouteMessage, in []RouteStepDraft) ([]store.RouteStep, error) {
	var errs problem.Fields
	var missing []problem.Field
	steps := make([]store.RouteStep, len(in))
	for i, st := range in {
		ptr := fmt.Sprintf("/steps/%d", i)
		step := store.RouteStep{Until: st.Until, WithinSeconds: st.WithinSeconds, Status: stepWaiting}
		var p Provider
		switch {
		case (st.InstanceID == nil) == (st.Provider == nil):
			errs.Add(ptr, "name exactly one of instance_id and provider")
			continue
		case st.InstanceID != nil:
			inst, err := s.Get(ctx, workspaceID, *st.InstanceID)
			if err != nil || (scope != nil && !slices.Contains(scope, inst.ID)) {
				var pe *problem.Error
				if err != nil && !errors.As(err, &pe) {
					return nil, err
				}
				missing = append(missing, problem.Field{Pointer: ptr + "/instance_id", Detail: "there is no such instance in this workspace"})
				continue
			}
			var ok bool
			if p, ok = s.provider(inst.Provider); !ok {
				return nil, problem.Errorf(problem.Conflict, "The provider %q of instance %s is not available on this server.", inst.Provider, inst.ID)
			}
			step.InstanceID, step.Provider = inst.ID, inst.Provider
		default:
			var ok bool
			if p, ok = s.provider(*st.Provider); !ok {
				errs.Add(ptr+"/provider", fmt.Sprintf("there is no provider %q; use one of: %s", *st.Provider, s.providerNames()))
				continue
			}
			step.Provider, step.ByProvider, step.Scope = *st.Provider, true, scope
		}
		need := []Capability{capabilityOf[msg.Type]}
		if c, ok := conditionCapability[step.Until]; ok {
			need = append(need, c)
		}
		for _, c := range need {
			if !p.Info().Has(c) {
				e := notSupported(p.Info().Name, c)
				e.Fields = []problem.Field{{Pointer: ptr, Detail: fmt.Sprintf("the %s provider lacks %s", p.Info().Name, c)}}
				return nil, e
			}
		}
		steps[i] = step
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		e := problem.Errorf(problem.ReferenceNotFound, "A step names an instance this key does not see.")
		e.Fields = missing
		return nil, e
	}
	return steps, nil
}

// GetRoute returns a route of the workspace, when the key sees its person (scope: the instances of a limited key,
// nil for every instance). Returns a NotFound problem otherwise.
func (s *Service) GetRoute(ctx context.Context, workspaceID, id string, scope []string) (store.Route, error) {
	r, err := s.db.Routes.Get(ctx, workspaceID, id)
	if err != nil {
		return store.Route{}, storeError(err, "route", id)
	}
	if scope != nil {
		if _, err := s.GetPerson(ctx, workspaceID, r.PersonID, scope); err != nil {
			return store.Route{}, notFound("route", id)
		}
	}
	return r, nil
}

// ListRoutes returns a page of the workspace's routes and whether more follow; a limited key (scope) sees those to
// people it sees.
func (s *Service) ListRoutes(ctx context.Context, workspaceID string, f store.RouteFilter, scope []string, p store.Page) ([]store.Route, bool, error) {
	rs, more, err := s.db.Routes.List(ctx, workspaceID, f, p)
	if err != nil || scope == nil {
		return rs, more, err
	}
	seen := map[string]bool{}
	out := rs[:0]
	for _, r := range rs {
		ok, known := seen[r.PersonID]
		if !known {
			_, err := s.GetPerson(ctx, workspaceID, r.PersonID, scope)
			ok = err == nil
			seen[r.PersonID] = ok
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, more, nil
}

// RunRoutes is the route worker: it carries on the routes whose next action is due (a step's deadline passed, a
// step's message failed, a route just created) until ctx ends. Every replica runs one; a route is locked and
// checked unchanged before it moves, so two workers never start a step twice.
//
// A wake comes from inside the transaction that made a route due, before it commits: a worker woken that finds
// nothing due looks again after routeRecheck, a few times, rather than waiting for the next poll.
func (s *Service) RunRoutes(ctx context.Context) error {
	tick := time.NewTicker(routePoll)
	defer tick.Stop()
	rechecks := 0
	for {
		ids, err := s.db.Routes.Due(ctx, time.Now(), 100)
		failed := err != nil
		if err != nil && ctx.Err() == nil {
			s.log.Error("route worker: reading due routes", "error", err)
		}
		for _, id := range ids {
			if err := s.advanceRoute(ctx, id); err != nil && ctx.Err() == nil {
				failed = true
				s.log.Error("route worker: carrying a route on", "route", id, "error", err)
			}
		}
		if len(ids) == 100 && !failed {
			continue // more are due (a batch with failures waits: routes that keep failing do not spin the worker)
		}
		var recheck <-chan time.Time
		if len(ids) == 0 && rechecks > 0 {
			rechecks--
			recheck = time.After(routeRecheck)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			rechecks = 0
		case <-recheck:
		case <-s.routeWake:
			rechecks = 3
		}
	}
}

// routeTarget is where a step sends: its instance, the provider, and the person's address there.
type routeTarget struct {
	inst    store.Instance
	p       Provider
	address string
}

// advanceRoute carries a route on when its next action is due: it ends the step under way if its deadline passed,
// starts the next step that can send (marking those that cannot as skipped, with the reason), or fails the route
// when no step is left. It returns only internal errors; a route another process carried on meanwhile is its.
func (s *Service) advanceRoute(ctx context.Context, id string) error {
	for range 3 {
		r, err := s.db.Routes.ByID(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted with its workspace
		}
		if err != nil {
			return err
		}
		now := time.Now()
		if r.Status != routePending || r.DueAt == nil || r.DueAt.After(now) {
			return nil
		}
		steps := slices.Clone(r.Steps)
		// A timed-out step's message still in the send queue is taken out of it with the step, so that the person
		// does not get it late, after the next channel's.
		var late lateAttempt
		if r.Step >= 0 && steps[r.Step].Status == stepActive && r.MessageID != nil {
			late = lateAttempt{instanceID: steps[r.Step].InstanceID, messageID: *r.MessageID}
		}
		if r.Step >= 0 && steps[r.Step].Status == stepActive {
			st := &steps[r.Step]
			st.Status, st.EndedAt = stepTimedOut, &now
			st.Reason = fmt.Sprintf("not %s within %d s", st.Until, st.WithinSeconds)
		}
		var target *routeTarget
		var m store.Message
		next := r.Step + 1
		for ; next < len(steps); next++ {
			t, reason, err := s.routeTarget(ctx, r, steps[next])
			if err != nil {
				return err
			}
			if reason == "" {
				in := MessageDraft{To: &t.address, Type: MessageType(r.Message.Type), Text: r.Message.Text}
				in.Media = mediaInputOf(r.Message.Media)
				if m, _, err = s.outboundOf(ctx, t.p, t.inst, in); err != nil {
					var pe *problem.Error
					if !errors.As(err, &pe) {
						return err
					}
					reason = pe.Detail
				} else if err := s.checkWindow(ctx, t.p, t.inst, in, t.address); err != nil {
					reason = err.Error()
				}
			}
			if reason != "" {
				steps[next].Status, steps[next].Reason, steps[next].EndedAt = stepSkipped, reason, &now
				continue
			}
			target = &t
			break
		}
		if target == nil {
			err = s.inTxFor(ctx, late.instances(), func(ctx context.Context, tx store.Tx) error {
				cur, err := s.db.Routes.Lock(ctx, tx, id)
				if err != nil {
					return err
				}
				if !cur.UpdatedAt.Equal(r.UpdatedAt) || cur.Status != routePending {
					return errRouteMoved
				}
				cur.Steps, cur.Status, cur.EndedAt, cur.DueAt = steps, routeFailed, &now, nil
				if err := s.db.Routes.Save(ctx, tx, &cur); err != nil {
					return err
				}
				if _, err = s.events.Emit(ctx, tx, cur.WorkspaceID, gen.RouteFailedEvent{Route: RouteAPI(cur)}); err != nil {
					return err
				}
				return s.cancelLate(ctx, tx, late)
			})
		} else {
			err = s.inTxFor(ctx, append(late.instances(), target.inst.ID), func(ctx context.Context, tx store.Tx) error {
				cur, err := s.db.Routes.Lock(ctx, tx, id)
				if err != nil {
					return err
				}
				if !cur.UpdatedAt.Equal(r.UpdatedAt) || cur.Status != routePending {
					return errRouteMoved
				}
				chat, err := s.chatFor(ctx, tx, target.inst, target.address, nil)
				if err != nil {
					return err
				}
				m.ChatID, m.RouteID = chat.ID, &cur.ID
				m.To = store.Party{Address: chat.Address, DisplayName: deref(chat.Name)}
				if err := s.db.Messages.Create(ctx, tx, &m); err != nil {
					return err
				}
				if err := s.queue.Enqueue(ctx, tx, SendJob{MessageID: m.ID, WorkspaceID: m.WorkspaceID, InstanceID: m.InstanceID,
					Chat: chat.Address}); err != nil {
					return err
				}
				if err := s.touchChat(ctx, tx, &chat, m, false); err != nil {
					return err
				}
				st := &steps[next]
				st.Status, st.MessageID, st.StartedAt = stepActive, m.ID, &now
				st.InstanceID, st.Provider = target.inst.ID, target.inst.Provider
				due := now.Add(time.Duration(st.WithinSeconds) * time.Second)
				cur.Steps, cur.Step, cur.MessageID, cur.DueAt = steps, next, &m.ID, &due
				if err := s.db.Routes.Save(ctx, tx, &cur); err != nil {
					return err
				}
				return s.cancelLate(ctx, tx, late)
			})
		}
		if !errors.Is(err, errRouteMoved) {
			return err
		}
	}
	return nil
}

// lateAttempt is the message of a step that timed out (none when the step did not).
type lateAttempt struct{ instanceID, messageID string }

// instances is the instance a transaction canceling the message must lock (none without one).
func (l lateAttempt) instances() []string {
	if l.messageID == "" {
		return nil
	}
	return []string{l.instanceID}
}

// cancelLate takes a timed-out step's message out of the send queue inside tx, if it is still waiting there (status
// canceled, message.status_updated). The route has moved on first, so the cancel does not carry it on again.
func (s *Service) cancelLate(ctx context.Context, tx store.Tx, l lateAttempt) error {
	if l.messageID == "" {
		return nil
	}
	if ok, err := s.queue.Cancel(ctx, tx, l.instanceID, l.messageID); err != nil || !ok {
		return err
	}
	_, err := s.advance(ctx, tx, l.messageID, msgCanceled, time.Now(), "the route moved on: the step timed out", nil)
	return err
}

// routeTarget finds where a step can send now: the person's contact on the step's instance (or, for a provider,
// on the first instance of it the route may use, connected ones first) and an address of it the provider takes.
// reason says why the step cannot send (no contact there, the instance offline); err is internal.
func (s *Service) routeTarget(ctx context.Context, r store.Route, st store.RouteStep) (routeTarget, string, error) {
	_, contacts, err := s.db.People.Get(ctx, s.db.Reader(), r.WorkspaceID, r.PersonID, nil)
	if errors.Is(err, store.ErrNotFound) {
		return routeTarget{}, "the person is gone", nil
	}
	if err != nil {
		return routeTarget{}, "", err
	}
	var candidates []store.Instance
	for _, c := range contacts {
		if (st.ByProvider && c.Provider == st.Provider && (st.Scope == nil || slices.Contains(st.Scope, c.InstanceID))) ||
			(!st.ByProvider && c.InstanceID == st.InstanceID) {
			inst, err := s.db.Instances.ByID(ctx, s.db.Reader(), c.InstanceID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return routeTarget{}, "", err
			}
			candidates = append(candidates, inst)
		}
	}
	if len(candidates) == 0 {
		if st.ByProvider {
			return routeTarget{}, "the person has no contact on an instance of " + st.Provider, nil
		}
		return routeTarget{}, "the person has no contact on this instance", nil
	}
	// Connected first, then those reconnecting (their queue goes out when they are back).
	slices.SortStableFunc(candidates, func(a, b store.Instance) int {
		return sendable(Status(b.Status)) - sendable(Status(a.Status))
	})
	inst := candidates[0]
	if sendable(Status(inst.Status)) == 0 {
		return routeTarget{}, fmt.Sprintf("the instance is %s", inst.Status), nil
	}
	p, ok := s.provider(inst.Provider)
	if !ok {
		return routeTarget{}, fmt.Sprintf("the provider %s is not available on this server", inst.Provider), nil
	}
	for _, c := range contacts {
		if c.InstanceID != inst.ID {
			continue
		}
		for _, a := range c.Addresses {
			if n, err := p.NormalizeAddress(a); err == nil {
				return routeTarget{inst: inst, p: p, address: n}, "", nil
			}
		}
	}
	return routeTarget{}, "the person has no address this network takes", nil
}

// sendable ranks an instance's status for a route: 2 connected, 1 connecting again (what is queued goes out when it
// is back), 0 cannot send now.
func sendable(st Status) int {
	switch st {
	case StatusConnected:
		return 2
	case StatusConnecting, StatusReconnecting:
		return 1
	}
	return 0
}

// routeMessageMoved carries a route on inside tx when the message of its step under way moved: the route completes
// when the message meets the step's condition, and its next step is due when the message failed or was canceled.
//
// The route is locked only when m is its step's message under way, read first without a lock: a transaction moving
// messages holds their instances, and a route's message under way cannot change while its instance is held, so
// only the transactions of that one instance (one at a time) and the route worker lock the route. Locking it for
// an earlier step's message too (a late receipt, on another instance) would take route locks in the order of each
// instance's messages: two transactions of two instances, each with routes that failed over from the other's,
// would take them in opposite orders and deadlock on PostgreSQL.
func (s *Recorder) routeMessageMoved(ctx context.Context, tx store.Querier, m store.Message) error {
	r, err := s.db.Routes.Read(ctx, tx, *m.RouteID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !routeAwaits(r, m.ID) {
		return nil // an earlier step's message, after its deadline
	}
	if r, err = s.db.Routes.Lock(ctx, tx, *m.RouteID); err != nil {
		return err
	}
	if !routeAwaits(r, m.ID) {
		return nil // moved on meanwhile
	}
	now := time.Now()
	st := &r.Steps[r.Step]
	switch {
	case meets(m.Status, st.Until):
		st.Status, st.EndedAt = stepSucceeded, &now
		r.Status, r.EndedAt, r.DueAt = routeCompleted, &now, nil
		if err := s.db.Routes.Save(ctx, tx, &r); err != nil {
			return err
		}
		_, err = s.events.Emit(ctx, tx, r.WorkspaceID, gen.RouteCompletedEvent{Route: RouteAPI(r)})
		return err
	case m.Status == msgFailed || m.Status == msgCanceled:
		st.Status, st.EndedAt, st.Reason = stepFailed, &now, "the message was canceled"
		if m.Failure != nil {
			st.Reason = m.Failure.Code + ": " + m.Failure.Detail
		}
		r.DueAt = &now
		if err := s.db.Routes.Save(ctx, tx, &r); err != nil {
			return err
		}
		s.wakeRoutes()
	}
	return nil
}

// routeAwaits reports whether a route is pending on the step whose message is messageID.
func routeAwaits(r store.Route, messageID string) bool {
	return r.Status == routePending && r.Step >= 0 && r.MessageID != nil && *r.MessageID == messageID
}

// wakeRoutes tells the route worker a route is due now (it also looks every routePoll).
func (s *Recorder) wakeRoutes() {
	select {
	case s.routeWake <- struct{}{}:
	default:
	}
}

// RouteAPI is the API's Route.
func RouteAPI(r store.Route) gen.Route {
	out := gen.Route{Id: r.ID, Object: gen.RouteObjectRoute, PersonId: r.PersonID, Status: gen.RouteStatus(r.Status),
		Message: gen.RouteMessage{Type: gen.RouteMessageType(r.Message.Type), Text: r.Message.Text},
		Steps:   make([]gen.RouteStep, len(r.Steps)), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, EndedAt: r.EndedAt}
	if m := r.Message.Media; m != nil {
		out.Message.Media = &gen.MessageMediaInput{MediaId: m.MediaID, Url: m.URL, Caption: m.Caption, Filename: m.Filename}
	}
	for i, st := range r.Steps {
		out.Steps[i] = gen.RouteStep{InstanceId: nonEmpty(st.InstanceID), Provider: nonEmpty(st.Provider),
			Until: gen.RouteCondition(st.Until), WithinSeconds: st.WithinSeconds, Status: gen.RouteStepStatus(st.Status),
			MessageId: nonEmpty(st.MessageID), Reason: nonEmpty(st.Reason), StartedAt: st.StartedAt, EndedAt: st.EndedAt}
	}
	return out
}

// mediaInputOf is a route's file as a message to send names it (nil for none).
func mediaInputOf(m *store.RouteMedia) *MediaInput {
	if m == nil {
		return nil
	}
	return &MediaInput{MediaID: m.MediaID, URL: m.URL, Caption: m.Caption, Filename: m.Filename}
}
