package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// session is an instance's connection to the sandbox network.
type session struct {
	p    *Provider
	inst channels.Instance
	cfg  instanceConfig
	sink channels.Sink
	// schedule is when the instance is told its messages were delivered and read.
	schedule schedule

	// wake tells Run that mail may be waiting.
	wake chan struct{}

	mu sync.Mutex
	// run is the state of the Run in progress (nil when none), number the account's number while connected.
	run    *runState
	number string
	// failing is what the next sends fail with (the fail_sends control), left the number of sends to fail.
	failing channels.Failure
	left    int
	// restriction is what the restrict control ends the run with.
	restriction channels.Restriction
	// declined counts the calls the instance declined.
	declined int
}

var (
	_ channels.Session          = (*session)(nil)
	_ channels.Sender           = (*session)(nil)
	_ channels.ReadMarker       = (*session)(nil)
	_ channels.GroupManager     = (*session)(nil)
	_ channels.ContactDirectory = (*session)(nil)
	_ channels.PictureReader    = (*session)(nil)
	_ channels.GroupConfigurer  = (*session)(nil)
	_ channels.PictureWriter    = (*session)(nil)
	_ channels.ProfileEditor    = (*session)(nil)
	_ channels.Labeler          = (*session)(nil)
	_ channels.Pairer           = (*session)(nil)
	_ channels.Controller       = (*session)(nil)
	_ channels.Handler          = (*session)(nil)
)

func newSession(p *Provider, inst channels.Instance, cfg instanceConfig, sink channels.Sink) *session {
	sc := schedule{Delivered: p.opts.Delivered, Read: p.opts.Read, Shuffle: p.opts.Shuffle}
	if cfg.Delivered != nil {
		sc.Delivered = *cfg.Delivered
	}
	if cfg.Read != nil {
		sc.Read = *cfg.Read
	}
	if cfg.Shuffle != nil {
		sc.Shuffle = *cfg.Shuffle
	}
	return &session{p: p, inst: inst, cfg: cfg, sink: sink, schedule: sc, wake: make(chan struct{}, 1)}
}

// runState lives as long as one Run.
type runState struct {
	// end stops Run: a disconnect or logout control, or Logout.
	end chan runEnd
	// toWake are the instances to wake (letters were posted to them), each once however many letters it got. A
	// goroutine wakes them off the callers' path while there are any (nudging), under nudgeCtx, which is set while
	// the session serves: an idle session holds no goroutine but its Run's, which counts with ten thousand of them.
	toWake   map[string]bool
	nudging  bool
	nudgeCtx context.Context
	nudges   sync.WaitGroup
	// pairing is set while the session waits to be paired.
	pairing *pairing
}

type runEnd int

const (
	endDisconnect    runEnd = iota // the connection drops: Run fails, the runtime reconnects
	endLogoutControl               // the network logs the instance out: Run reports logged_out and returns
	endLogout                      // Logout was called: it invalidated the credentials, Run just returns
	endRestrict                    // the network restricts the account for a time: Run returns a Restriction
)

// pairing is a pairing in progress.
type pairing struct {
	// code is the pairing code issued (empty before PairingCode), number the number it asked for ("" for one the
	// network assigns).
	code, number string
	// done receives the number to pair with when the QR code is scanned or the pairing code entered.
	done chan string
}

// credentials are what the instance keeps between connections.
type credentials struct {
	Number string `json:"number"`
	Token  string `json:"token"`
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// failure builds a refusal of the network that a retry will not change.
func failure(code, format string, args ...any) *channels.Failure {
	return &channels.Failure{Code: code, Detail: fmt.Sprintf(format, args...)}
}

func notConnected() *channels.Failure {
	return &channels.Failure{Code: "not_connected", Detail: "the instance is not connected to the sandbox network",
		Retryable: true}
}

// live returns the state of the running session and its number ("" when it is not connected).
func (s *session) live() (*runState, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.number
}

// Run pairs (without credentials) or connects (with them), then takes the mail the network holds for the account
// until ctx ends or a control ends the connection.
func (s *session) Run(ctx context.Context) error {
	rs := &runState{end: make(chan runEnd, 1), toWake: map[string]bool{}}
	s.mu.Lock()
	if s.run != nil {
		s.mu.Unlock()
		return errors.New("sandbox: the session is running already")
	}
	s.run = rs
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.run, s.number = nil, ""
		s.mu.Unlock()
	}()

	err := s.connectAndServe(ctx, rs)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *session) connectAndServe(ctx context.Context, rs *runState) error {
	if err := s.sink.State(ctx, channels.StatusConnecting, "connecting to the sandbox network"); err != nil {
		return err
	}
	number, err := s.connect(ctx, rs)
	if err != nil || number == "" {
		return err
	}
	s.mu.Lock()
	s.number = number
	s.mu.Unlock()
	if err := s.announceName(ctx, rs, number); err != nil {
		return err
	}
	if err := s.sink.State(ctx, channels.StatusConnected, "connected to the sandbox network as "+number); err != nil {
		return err
	}

	nudgeCtx, stopNudges := context.WithCancel(ctx)
	s.mu.Lock()
	rs.nudgeCtx = nudgeCtx
	s.startNudge(rs) // the letters of announceName
	s.mu.Unlock()
	defer func() {
		// No nudge starts once nudgeCtx is gone: the wait below is the last.
		s.mu.Lock()
		rs.nudgeCtx = nil
		s.mu.Unlock()
		stopNudges()
		rs.nudges.Wait()
	}()
	return s.serve(ctx, rs, number)
}

// connect returns the account's number once connected, or "" when the session ended without connecting (ctx
// done, logged out, pairing given up: each reported through the sink).
func (s *session) connect(ctx context.Context, rs *runState) (string, error) {
	s.mu.Lock()
	saved := s.inst.Credentials
	s.mu.Unlock()
	if len(saved) == 0 {
		return s.pair(ctx, rs)
	}
	var c credentials
	if err := json.Unmarshal(saved, &c); err != nil || c.Token == "" {
		return "", s.loggedOut(ctx, "the instance's credentials are not the sandbox's: pair it again")
	}
	acc, err := s.p.net.AccountOf(ctx, s.p.net.Reader(), s.inst.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (acc.Number != c.Number || acc.TokenHash == nil ||
		*acc.TokenHash != hashToken(c.Token))) {
		return "", s.loggedOut(ctx, "the sandbox network no longer accepts the instance's credentials (it was "+
			"logged out): pair it again")
	}
	if err != nil {
		return "", err
	}
	return acc.Number, nil
}

func (s *session) loggedOut(ctx context.Context, reason string) error {
	return s.sink.State(ctx, channels.StatusLoggedOut, reason)
}

// announceName gives the account the display name of the instance's config and, when that changed it, tells the
// accounts that know the number (the nudges go out once Run's waker starts).
func (s *session) announceName(ctx context.Context, rs *runState, number string) error {
	var letters []letter
	err := s.p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		changed, err := s.p.net.Rename(ctx, tx, number, s.cfg.DisplayName)
		if err != nil || !changed {
			return err
		}
		known, err := s.p.net.Counterparts(ctx, tx, number)
		if err != nil {
			return err
		}
		at := now()
		for _, a := range known {
			letters = append(letters, letter{to: a.Number, instance: a.InstanceID, due: at,
				env: envelope{Contact: &channels.Party{Address: number, DisplayName: s.cfg.DisplayName}}})
		}
		return s.p.post(ctx, tx, letters)
	})
	if err == nil {
		s.wakeAll(rs, letters)
	}
	return err
}

// pair shows QR codes until one is scanned or a pairing code entered (at once with auto_pair), then makes the
// instance an account of the network.
func (s *session) pair(ctx context.Context, rs *runState) (string, error) {
	pr := &pairing{done: make(chan string, 1)}
	s.mu.Lock()
	rs.pairing = pr
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		rs.pairing = nil
		s.mu.Unlock()
	}()
	if s.cfg.AutoPair {
		return s.completePairing(ctx, "")
	}
	refresh := s.p.opts.QRRefresh
	for shown := 0; s.p.opts.QRLimit < 0 || shown < s.p.opts.QRLimit; shown++ {
		if err := s.sink.QR(ctx, "sandbox-qr:"+s.inst.ID+":"+rand.Text(), now().Add(refresh)); err != nil {
			return "", err
		}
		if shown == 0 {
			if err := s.sink.State(ctx, channels.StatusAwaitingAuth, "scan the QR code"); err != nil {
				return "", err
			}
		}
		timer := time.NewTimer(refresh)
		select {
		case <-ctx.Done():
			timer.Stop()
			return "", nil
		case number := <-pr.done:
			timer.Stop()
			return s.completePairing(ctx, number)
		case e := <-rs.end:
			timer.Stop()
			return "", s.ended(ctx, e)
		case <-timer.C:
		}
	}
	return "", s.sink.State(ctx, channels.StatusDisconnected, fmt.Sprintf(
		"none of %d QR codes was scanned in time: connect the instance again for new ones", s.p.opts.QRLimit))
}

// completePairing gives the instance its account (the number it asked for, the one it held before, or a new one)
// and reports the credentials.
func (s *session) completePairing(ctx context.Context, requested string) (string, error) {
	if requested == "" {
		requested = s.cfg.Number
	}
	number, token, err := s.p.pairAccount(ctx, s.inst.ID, requested, s.cfg.DisplayName)
	var f *channels.Failure
	if errors.As(err, &f) {
		return "", s.sink.State(ctx, channels.StatusFailed, f.Detail)
	}
	if err != nil {
		return "", err
	}
	creds, err := json.Marshal(credentials{Number: number, Token: token})
	if err != nil {
		return "", err
	}
	// The session takes commands before it reports itself connected: a client that sees the instance connected may
	// call at once. (Run forgets the number when it returns.)
	s.mu.Lock()
	s.number = number
	s.mu.Unlock()
	if err := s.sink.Connected(ctx, channels.Party{Address: number, DisplayName: s.cfg.DisplayName}, creds); err != nil {
		return "", err
	}
	// The next Run of this session connects with them, as a new session opened with them would.
	s.mu.Lock()
	s.inst.Credentials = creds
	s.mu.Unlock()
	return number, nil
}

// serve takes the account's mail whenever it may have some: woken by a sender, when the next scheduled mail falls
// due, and every Poll in case a wake-up was lost.
func (s *session) serve(ctx context.Context, rs *runState, number string) error {
	poll := time.NewTicker(s.p.opts.Poll)
	defer poll.Stop()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next, ok, err := s.drain(ctx, rs, number)
		if err != nil {
			return err
		}
		var due <-chan time.Time
		if timer != nil {
			timer.Stop()
		}
		if ok {
			timer = time.NewTimer(time.Until(next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case e := <-rs.end:
			return s.ended(ctx, e)
		case <-s.wake:
		case <-poll.C:
		case <-due:
		}
	}
}

// ended ends Run as a control or Logout asked.
func (s *session) ended(ctx context.Context, e runEnd) error {
	switch e {
	case endDisconnect:
		return errors.New("sandbox: the connection dropped (disconnect control)")
	case endRestrict:
		s.mu.Lock()
		r := s.restriction
		s.mu.Unlock()
		return &r
	case endLogoutControl:
		if err := s.p.unpair(ctx, s.inst.ID); err != nil {
			return err
		}
		s.forget()
		return s.loggedOut(ctx, "the sandbox network logged the instance out (logout control): pair it again")
	default:
		return nil
	}
}

// drainBatch is how much mail one read takes.
const drainBatch = 100

// drain hands the sink every piece of mail due now, oldest first, and reports when the next one falls due.
func (s *session) drain(ctx context.Context, rs *runState, number string) (time.Time, bool, error) {
	for {
		due, err := s.p.net.Due(ctx, s.p.net.Reader(), number, now(), drainBatch)
		if err != nil {
			return time.Time{}, false, err
		}
		h := handover{told: map[string]bool{}}
		handErr := s.handOver(ctx, due, &h)
		if err := s.settle(ctx, rs, &h); err != nil {
			return time.Time{}, false, err
		}
		if handErr != nil {
			return time.Time{}, false, handErr
		}
		if len(due) < drainBatch {
			// The earliest mail left, due in the future or since Due read (then the timer fires at once).
			return s.p.net.NextDue(ctx, s.p.net.Reader(), number)
		}
	}
}

// handover is what handing a batch of mail to the sink leaves to record, in one transaction: the mail taken, the
// receipts told, the receipts to post to the senders of the messages handed over.
type handover struct {
	taken   []string
	marked  []mailReceipt
	letters []letter
	// told holds "id status" of the receipts told in this batch (the database knows the earlier ones).
	told map[string]bool
}

// handOver hands mail to the sink, in order, until it is all handed over or the sink fails: runs of messages and
// receipts in one call each (one transaction of the messaging service), group and contact changes one by one. A
// crash before the batch is settled hands the same mail over again: the sink may see a piece twice, never not at
// all.
func (s *session) handOver(ctx context.Context, due []store.SandboxMail, h *handover) error {
	envs := make([]envelope, len(due))
	var receiptIDs, senders []string
	for i, m := range due {
		if err := json.Unmarshal([]byte(m.Envelope), &envs[i]); err != nil {
			s.p.opts.Logger.Error("sandbox: mail that cannot be read is removed", "mail", m.ID, "number", m.Number,
				"error", err)
			continue
		}
		if r := envs[i].Receipt; r != nil {
			receiptIDs = append(receiptIDs, r.ID)
		}
		if msg := envs[i].Message; msg != nil && msg.Schedule != nil && msg.Schedule.any() {
			senders = append(senders, msg.From)
		}
	}
	sent, err := s.p.net.Messages(ctx, s.p.net.Reader(), receiptIDs)
	if err != nil {
		return err
	}
	messages := map[string]store.SandboxMessage{}
	for _, m := range sent {
		messages[m.ID] = m
	}
	accounts, err := s.p.net.Accounts(ctx, s.p.net.Reader(), senders)
	if err != nil {
		return err
	}
	instances := map[string]string{}
	for _, a := range accounts {
		instances[a.Number] = a.InstanceID
	}
	// The run of reports not handed over yet, and for each what handing it over leaves to record (the mail taken,
	// the receipts to post): done once the sink has it.
	var (
		run   []channels.Report
		after []func()
	)
	then := func(f func()) {
		if len(after) == 0 {
			f()
			return
		}
		prev := after[len(after)-1]
		after[len(after)-1] = func() { prev(); f() }
	}
	flush := func() error {
		n, err := channels.RecordEach(ctx, s.sink, run)
		for _, f := range after[:n] {
			f()
		}
		run, after = nil, nil
		return err
	}
	for i, m := range due {
		env, id := envs[i], m.ID
		switch {
		case env.Message != nil:
			in := env.Message.inbound()
			var letters []letter
			if sender, ok := instances[env.Message.From]; ok && env.Message.Schedule != nil {
				letters = s.p.receipts(*env.Message.Schedule, env.Message.From, sender, env.Message.ID, now())
			}
			run = append(run, channels.Report{Inbound: &in})
			after = append(after, func() { h.letters = append(h.letters, letters...); h.taken = append(h.taken, id) })
		case env.Receipt != nil:
			r := *env.Receipt
			if !s.toTell(r, messages, h) {
				then(func() { h.taken = append(h.taken, id) })
				continue
			}
			h.told[r.ID+" "+r.Status] = true
			run = append(run, channels.Report{Receipt: &channels.Receipt{ProviderID: r.ID, Status: r.Status, At: r.At}})
			after = append(after, func() { h.marked = append(h.marked, r); h.taken = append(h.taken, id) })
		case env.Group != nil || env.Contact != nil || env.Presence != nil || env.Vote != nil:
			if err := flush(); err != nil {
				return err
			}
			switch {
			case env.Group != nil:
				err = s.sink.GroupChanged(ctx, env.Group.Group, env.Group.Change)
			case env.Presence != nil:
				err = s.sink.Presence(ctx, env.Presence.presence())
			case env.Vote != nil:
				err = s.sink.PollVote(ctx, env.Vote.vote())
			default:
				err = s.sink.ContactChanged(ctx, *env.Contact)
			}
			if err != nil {
				return err
			}
			h.taken = append(h.taken, id)
		default: // unreadable mail
			then(func() { h.taken = append(h.taken, id) })
		}
	}
	return flush()
}

// toTell reports whether a receipt of a message the account sent is to be told: not when its sender was told
// already (a read receipt comes from the schedule and from the recipient marking the chat read; in a group, from
// every member).
func (s *session) toTell(r mailReceipt, messages map[string]store.SandboxMessage, h *handover) bool {
	msg, known := messages[r.ID]
	return known && !h.told[r.ID+" "+r.Status] && (r.Status != statusDelivered || msg.DeliveredAt == nil) &&
		(r.Status != statusRead || msg.ReadAt == nil)
}

// settle records a handover in one transaction, then wakes the senders its receipts were posted to.
func (s *session) settle(ctx context.Context, rs *runState, h *handover) error {
	if len(h.taken) == 0 {
		return nil
	}
	err := s.p.net.Shared(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, r := range h.marked {
			if _, err := s.p.net.MarkMessage(ctx, tx, r.ID, r.Status, r.At); err != nil {
				return err
			}
		}
		if err := s.p.net.Take(ctx, tx, h.taken); err != nil {
			return err
		}
		return s.p.post(ctx, tx, h.letters)
	})
	if err == nil {
		s.wakeAll(rs, h.letters)
	}
	return err
}

// The receipt statuses.
const (
	statusDelivered = "delivered"
	statusRead      = "read"
)

// wakeAll wakes the instances the letters were posted to, once each: this session at once, the others through
// the runtime, off the caller's path.
func (s *session) wakeAll(rs *runState, letters []letter) {
	others := false
	s.mu.Lock()
	for _, l := range letters {
		switch l.instance {
		case "":
		case s.inst.ID:
			s.wakeUp()
		default:
			rs.toWake[l.instance], others = true, true
		}
	}
	if others {
		s.startNudge(rs)
	}
	s.mu.Unlock()
}

// startNudge starts the goroutine that wakes the instances in rs.toWake, unless one runs or the session does not
// serve (yet: Run starts it then). s.mu is held.
func (s *session) startNudge(rs *runState) {
	if rs.nudging || rs.nudgeCtx == nil || len(rs.toWake) == 0 {
		return
	}
	rs.nudging = true
	ctx := rs.nudgeCtx
	rs.nudges.Go(func() { s.nudge(ctx, rs) })
}

func (s *session) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// nudge wakes other instances' sessions, wherever they live, through the runtime that opened this session, until
// none is left to wake or ctx ends.
func (s *session) nudge(ctx context.Context, rs *runState) {
	for {
		s.mu.Lock()
		ids := rs.toWake
		if len(ids) == 0 || ctx.Err() != nil {
			rs.nudging = false
			s.mu.Unlock()
			return
		}
		rs.toWake = map[string]bool{}
		s.mu.Unlock()
		if s.inst.Runtime == nil {
			continue // a session no runtime opened: its recipients find their mail when they poll
		}
		for id := range ids {
			_, err := s.inst.Runtime.Do(ctx, id, channels.Command{Op: OpDeliver, Args: json.RawMessage(`{}`)})
			if err != nil && !errors.Is(err, channels.ErrNotConnected) && ctx.Err() == nil {
				s.p.opts.Logger.Debug("sandbox: could not wake an instance; it finds its mail when it polls",
					"instance", id, "error", err)
			}
		}
	}
}

// Logout invalidates the instance's credentials on the network and ends the running session.
func (s *session) Logout(ctx context.Context) error {
	if err := s.p.unpair(ctx, s.inst.ID); err != nil {
		return err
	}
	s.forget()
	if rs, _ := s.live(); rs != nil {
		select {
		case rs.end <- endLogout:
		default:
		}
	}
	return nil
}

// forget drops the credentials the network no longer accepts: the next Run pairs again.
func (s *session) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inst.Credentials = nil
}

// Handle runs the sandbox's own commands: a wake-up, a control.
func (s *session) Handle(ctx context.Context, c channels.Command) (json.RawMessage, error) {
	switch c.Op {
	case OpDeliver:
		s.wakeUp()
	case OpControl:
		var ctl channels.Control
		if err := json.Unmarshal(c.Args, &ctl); err != nil {
			return nil, failure("invalid_control", "the control is not valid JSON: %v", err)
		}
		if err := s.Control(ctx, ctl); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("sandbox: unknown command %q", c.Op)
	}
	return json.RawMessage(`{}`), nil
}

// PairingCode issues a code to type into the account's app, for the number phone ("" for one the network
// assigns); the pairing completes when the scan control brings the code.
func (s *session) PairingCode(ctx context.Context, phone string) (string, error) {
	number := ""
	if strings.TrimSpace(phone) != "" {
		n, err := requestableNumber(phone)
		if err != nil {
			return "", failure("invalid_address", "%v", err)
		}
		if err := s.p.numberFree(ctx, n, s.inst.ID); err != nil {
			return "", err
		}
		number = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.pairing == nil {
		return "", failure("invalid_state", "the instance is not waiting to be paired")
	}
	s.run.pairing.code, s.run.pairing.number = newPairingCode(), number
	return s.run.pairing.code, nil
}

// Control runs a test control.
func (s *session) Control(ctx context.Context, c channels.Control) error {
	switch c.Kind {
	case "scan":
		return s.scan(c.Text)
	case "inbound":
		return s.injectInbound(ctx, c.From, c.Text)
	case "receipt":
		if c.MessageID == "" || (c.Status != statusDelivered && c.Status != statusRead) {
			return failure("invalid_control", "a receipt control names a message id and a status, delivered or read")
		}
		return s.sink.Receipt(ctx, channels.Receipt{ProviderID: c.MessageID, Status: c.Status, At: now()})
	case "disconnect", "logout":
		rs, number := s.live()
		if number == "" {
			return notConnected()
		}
		e := endDisconnect
		if c.Kind == "logout" {
			e = endLogoutControl
		}
		select {
		case rs.end <- e:
		default: // the session is ending already
		}
		return nil
	case "call":
		if _, number := s.live(); number == "" {
			return notConnected()
		}
		from, err := s.p.NormalizeAddress(c.From)
		if err != nil {
			return failure("invalid_control", "a call control comes from an address: %v", err)
		}
		answer, err := s.sink.Call(ctx, channels.IncomingCall{ID: "SBCALL" + newPairingCode(), From: channels.Party{Address: from},
			Video: c.Video, At: now()})
		if err != nil {
			return err
		}
		if answer.Reject {
			s.mu.Lock()
			s.declined++
			s.mu.Unlock()
		}
		return nil
	case "restrict":
		if c.Duration <= 0 {
			return failure("invalid_control", "a restrict control lasts a positive time")
		}
		rs, number := s.live()
		if number == "" {
			return notConnected()
		}
		reason := c.Text
		if reason == "" {
			reason = "the sandbox network restricted the account"
		}
		s.mu.Lock()
		s.restriction = channels.Restriction{Until: now().Add(c.Duration), Reason: reason}
		s.mu.Unlock()
		select {
		case rs.end <- endRestrict:
		default: // the session is ending already
		}
		return nil
	case "poll_vote":
		return s.vote(ctx, c.MessageID, c.Options)
	case "fail_sends":
		if c.Count < 0 || (c.Count > 0 && (c.Failure == nil || c.Failure.Code == "")) {
			return failure("invalid_control", "fail_sends takes a count (0 to stop failing) and a failure with a code")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.left = c.Count
		if c.Failure != nil {
			s.failing = *c.Failure
		}
		return nil
	default:
		return failure("invalid_control", "%q is not a sandbox control (scan, inbound, receipt, disconnect, logout, "+
			"fail_sends, poll_vote, restrict, call)", c.Kind)
	}
}

// scan completes the pairing: the QR code was scanned, or the pairing code (code) entered.
func (s *session) scan(code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.pairing == nil {
		return failure("invalid_state", "the instance is not waiting to be paired")
	}
	pr := s.run.pairing
	if code != "" && !strings.EqualFold(strings.ReplaceAll(code, "-", ""), strings.ReplaceAll(pr.code, "-", "")) {
		return failure("pairing_code_mismatch", "that is not the pairing code the instance issued")
	}
	select {
	case pr.done <- pr.number:
	default: // scanned already
	}
	return nil
}

// takeFailure spends one of the sends the fail_sends control asked to fail.
func (s *session) takeFailure() *channels.Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		return nil
	}
	s.left--
	f := s.failing
	return &f
}
