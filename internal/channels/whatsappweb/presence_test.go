//go:build whatsapp_web

package whatsappweb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	waBinary "go.mau.fi/whatsmeow/binary"
	waCommon "go.mau.fi/whatsmeow/proto/waCommon"
	waE2E "go.mau.fi/whatsmeow/proto/waE2E"
	waSyncAction "go.mau.fi/whatsmeow/proto/waSyncAction"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Chat states and availability go to WhatsApp as its chat presence and presence; the person the account types to
// is subscribed to once per connection (WhatsApp sends a person's presence only to devices that asked), a group
// never.
func TestChatStatesAndAvailabilityReachWhatsApp(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := context.Background()
	peer := "+" + r.peer.phone
	for _, st := range []string{channels.StateTyping, channels.StateRecording, channels.StatePaused, channels.StateTyping} {
		if err := r.sess.SendChatState(ctx, peer, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.sess.SendChatState(ctx, "120363000000000001@g.us", channels.StateTyping); err != nil {
		t.Fatal(err)
	}
	if err := r.sess.SetAvailability(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := r.sess.SetAvailability(ctx, false); err != nil {
		t.Fatal(err)
	}
	me, to := r.me.phone+" ", r.peer.pn().String()
	want := []string{me + "composing/ " + to, me + "subscribe " + to, me + "composing/audio " + to, me + "paused/ " + to,
		me + "composing/ " + to, me + "composing/ 120363000000000001@g.us", me + "available", me + "unavailable"}
	if got := r.n.presenceLog(); !slices.Equal(got, want) {
		t.Errorf("WhatsApp got\n%q\nwant\n%q", got, want)
	}
	if err := r.sess.SendChatState(ctx, "not an address", channels.StateTyping); failureCode(err) != "invalid_address" {
		t.Errorf("a chat state to a bad address: %v", err)
	}
}

// A person's availability, last seen and chat states from WhatsApp are presence reports of the person's contact,
// by number; a chat state names the chat.
func TestPresenceFromWhatsApp(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	mark := len(r.sink.all())
	seen := time.Now().Add(-time.Hour).Truncate(time.Second)
	r.emit(&events.Presence{From: r.peer.pn()})
	r.emit(&events.Presence{From: r.peer.jid(), Unavailable: true, LastSeen: seen})
	src := types.MessageSource{Chat: r.peer.jid(), Sender: r.peer.jid(), SenderAlt: r.peer.pn()}
	r.emit(&events.ChatPresence{MessageSource: src, State: types.ChatPresenceComposing})
	r.emit(&events.ChatPresence{MessageSource: src, State: types.ChatPresenceComposing, Media: types.ChatPresenceMediaAudio})
	r.emit(&events.ChatPresence{MessageSource: src, State: types.ChatPresencePaused})
	mine := src
	mine.IsFromMe = true
	r.emit(&events.ChatPresence{MessageSource: mine, State: types.ChatPresenceComposing}) // another device of the account
	calls := await.Until(t, "five presence reports", func() []call { return r.since(mark) },
		func(cs []call) bool { return len(cs) >= 5 })
	peer := "+" + r.peer.phone
	want := []channels.Presence{
		{State: channels.PresenceAvailable},
		{State: channels.PresenceUnavailable, LastSeen: seen},
		{State: channels.StateTyping, Chat: peer},
		{State: channels.StateRecording, Chat: peer},
		{State: channels.StatePaused, Chat: peer},
	}
	if len(calls) != len(want) {
		t.Fatalf("reports %v, want %d presences", calls, len(want))
	}
	for i, c := range calls {
		p := c.presence
		if c.kind != "presence" || p.From.Address != peer || p.State != want[i].State || p.Chat != want[i].Chat ||
			!p.LastSeen.Equal(want[i].LastSeen) {
			t.Errorf("report %d: %s %+v, want %+v from %s", i, c.kind, p, want[i], peer)
		}
	}
}

// A poll goes out as WhatsApp's poll message (one choice or any number); a poll from a person arrives as a poll; a
// vote on the account's poll is reported by the SHA-256 of each option chosen, as WhatsApp names them; a vote the
// device cannot decrypt is not reported.
func TestPollsOnWhatsApp(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := context.Background()
	peer := "+" + r.peer.phone
	sent, err := r.sess.Send(ctx, channels.Outbound{MessageID: "msg_poll", Chat: peer, Type: channels.TypePoll,
		Poll: &channels.Poll{Question: "Lunch?", Options: []string{"Pizza", "Sushi", "Salad"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.n.mu.Lock()
	got := r.peer.received[len(r.peer.received)-1].msg.GetPollCreationMessage()
	r.n.mu.Unlock()
	if got.GetName() != "Lunch?" || len(got.GetOptions()) != 3 || got.GetOptions()[1].GetOptionName() != "Sushi" ||
		got.GetSelectableOptionsCount() != 1 {
		t.Errorf("WhatsApp got the poll %v", got)
	}
	if _, err := r.sess.Send(ctx, channels.Outbound{MessageID: "msg_bad", Chat: peer, Type: channels.TypePoll,
		Poll: &channels.Poll{Question: "?", Options: []string{"only"}}}); failureCode(err) != "invalid_message" {
		t.Errorf("a one-option poll: %v", err)
	}

	mark := len(r.sink.all())
	vote := func(id, iv string, options ...string) {
		payload, err := proto.Marshal(&waE2E.PollVoteMessage{SelectedOptions: hashes(options...)})
		if err != nil {
			t.Fatal(err)
		}
		r.emit(&events.Message{Info: types.MessageInfo{ID: id, PushName: "Peer", Timestamp: time.Now(),
			MessageSource: types.MessageSource{Chat: r.peer.jid(), Sender: r.peer.jid(), SenderAlt: r.peer.pn()}},
			Message: &waE2E.Message{PollUpdateMessage: &waE2E.PollUpdateMessage{
				PollCreationMessageKey: &waCommon.MessageKey{ID: proto.String(sent.ProviderID), FromMe: proto.Bool(true)},
				Vote:                   &waE2E.PollEncValue{EncPayload: payload, EncIV: []byte(iv)}}}})
	}
	vote("3AVOTE1", "iv", "Sushi")
	vote("3AVOTE2", "bad", "Pizza") // not decryptable: not reported
	vote("3AVOTE3", "iv")           // taken back
	votes := await.Until(t, "two votes", func() []call { return r.since(mark) }, func(cs []call) bool { return len(cs) >= 2 })
	if len(votes) != 2 {
		t.Fatalf("reports %v, want two votes", votes)
	}
	first, second := votes[0].vote, votes[1].vote
	if votes[0].kind != "vote" || first.Poll != sent.ProviderID || first.Voter.Address != peer ||
		len(first.OptionHashes) != 1 || !bytes.Equal(first.OptionHashes[0], hashes("Sushi")[0]) {
		t.Errorf("first vote %+v", first)
	}
	if second.OptionHashes == nil || len(second.OptionHashes) != 0 {
		t.Errorf("a vote taken back is %+v, want an empty choice", second)
	}

	// A poll from the person, any number of choices.
	mark = len(r.sink.all())
	r.emit(&events.Message{Info: types.MessageInfo{ID: "3APOLLIN", Timestamp: time.Now(),
		MessageSource: types.MessageSource{Chat: r.peer.pn(), Sender: r.peer.pn()}},
		Message: &waE2E.Message{PollCreationMessageV3: &waE2E.PollCreationMessage{Name: proto.String("When?"),
			Options:                []*waE2E.PollCreationMessage_Option{{OptionName: proto.String("Mon")}, {OptionName: proto.String("Tue")}},
			SelectableOptionsCount: proto.Uint32(0)}}})
	in := r.await("the poll", func(c call) bool { return c.kind == "inbound" && c.in.ProviderID == "3APOLLIN" }).in
	if in.Type != channels.TypePoll || in.Poll == nil || in.Poll.Question != "When?" ||
		!slices.Equal(in.Poll.Options, []string{"Mon", "Tue"}) || !in.Poll.MultipleChoice {
		t.Errorf("inbound poll %+v (%+v)", in, in.Poll)
	}
}

func hashes(options ...string) [][]byte {
	out := [][]byte{}
	for _, o := range options {
		sum := sha256.Sum256([]byte(o))
		out = append(out, sum[:])
	}
	return out
}

// Through the service on both databases: a vote WhatsApp names by hashes is recorded on the poll as the options'
// indexes, with the voter's contact, and is a poll.voted event; a hash of no option changes nothing.
func TestPollVoteByHashReachesTheAPI(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n, me, peer, e, id := pairedEngine(t, db)
		to := "+" + peer.phone
		m, _, err := e.svc.Send(ctx, e.ws, id, channels.MessageDraft{Type: channels.TypePoll, To: &to,
			Poll: &store.MessagePoll{Question: "Lunch?", Options: []string{"Pizza", "Sushi", "Salad"}, MultipleChoice: true}})
		if err != nil {
			t.Fatal(err)
		}
		sent := await.Until(t, "the poll sent", func() store.Message {
			x, err := e.svc.GetMessage(ctx, e.ws, id, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}, func(x store.Message) bool { return x.ProviderMessageID != nil })
		vote := func(options ...string) {
			payload, _ := proto.Marshal(&waE2E.PollVoteMessage{SelectedOptions: hashes(options...)})
			n.deliver(me, &events.Message{Info: types.MessageInfo{ID: types.MessageID("3AV" + options[0]), PushName: "Peer",
				Timestamp: time.Now(), MessageSource: types.MessageSource{Chat: peer.jid(), Sender: peer.jid(), SenderAlt: peer.pn()}},
				Message: &waE2E.Message{PollUpdateMessage: &waE2E.PollUpdateMessage{
					PollCreationMessageKey: &waCommon.MessageKey{ID: sent.ProviderMessageID, FromMe: proto.Bool(true)},
					Vote:                   &waE2E.PollEncValue{EncPayload: payload, EncIV: []byte("iv")}}}})
		}
		vote("Salad", "Pizza")
		voted := await.Until(t, "poll.voted", func() []map[string]any { return e.events(t, "poll.voted") },
			func(evs []map[string]any) bool { return len(evs) == 1 })
		if got := voted[0]["options"]; !slices.Equal(indexes(got), []int{0, 2}) {
			t.Errorf("poll.voted options %v, want [0 2]; event %v", got, voted[0])
		}
		// A vote for no option of the poll is dropped; the next vote is the next event.
		vote("Pasta")
		vote("Sushi")
		voted = await.Until(t, "the second poll.voted", func() []map[string]any { return e.events(t, "poll.voted") },
			func(evs []map[string]any) bool { return len(evs) >= 2 })
		if len(voted) != 2 || !slices.Equal(indexes(voted[1]["options"]), []int{1}) {
			t.Errorf("after a vote for no option and one for Sushi: %v", voted)
		}
	})
}

// indexes are the indexes of an event's poll choices.
func indexes(v any) []int {
	l, _ := v.([]any)
	out := []int{}
	for _, x := range l {
		c, _ := x.(map[string]any)
		f, _ := c["index"].(float64)
		out = append(out, int(f))
	}
	return out
}

// A call is reported with the caller by number, voice or video, one-to-one or group; the instance's answer decides
// whether the session declines it on WhatsApp.
func TestCallsFromWhatsApp(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	device := types.NewADJID(r.peer.phone, 0, 1)
	offer := func(id string, video bool) *events.CallOffer {
		e := &events.CallOffer{BasicCallMeta: types.BasicCallMeta{From: device, CallCreator: device, CallID: id,
			Timestamp: time.Now()}}
		e.Data = &waBinary.Node{Tag: "offer"}
		if video {
			e.Data.Content = []waBinary.Node{{Tag: "video"}}
		}
		return e
	}
	r.emit(offer("CALL1", false))
	first := r.await("the first call", func(c call) bool { return c.kind == "call" && c.incoming.ID == "CALL1" }).incoming
	if first.From.Address != "+"+r.peer.phone || first.Video || first.Group {
		t.Errorf("first call %+v", first)
	}
	if got := r.n.presenceLog(); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "reject") }) {
		t.Errorf("declined a call the instance takes: %v", got)
	}

	r.sink.mu.Lock()
	r.sink.reject = true
	r.sink.mu.Unlock()
	r.emit(offer("CALL2", true))
	second := r.await("the second call", func(c call) bool { return c.kind == "call" && c.incoming.ID == "CALL2" }).incoming
	if !second.Video {
		t.Errorf("a video offer reported as %+v", second)
	}
	await.Until(t, "the decline on WhatsApp", r.n.presenceLog, func(l []string) bool {
		return slices.Contains(l, r.me.phone+" reject CALL2 "+device.String())
	})
	r.emit(&events.CallOfferNotice{BasicCallMeta: types.BasicCallMeta{From: device, CallCreator: device, CallID: "CALL3",
		GroupJID: types.NewJID("120363000000000001", types.GroupServer)}, Media: "audio", Type: "group"})
	if third := r.await("the group call", func(c call) bool { return c.kind == "call" && c.incoming.ID == "CALL3" }).incoming; !third.Group {
		t.Errorf("a group call reported as %+v", third)
	}
}

// A community and its groups, as WhatsApp lists the account's groups at connect: both are listed, the community
// flagged and read-only (a change answers 409 and reaches no network), the group naming its community; a second
// connection that finds nothing new records no event.
func TestCommunitiesAreListedReadOnly(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n := newNetwork()
		me := n.add("15550100001", "Me")
		n.scanning = append(n.scanning, me)
		community := types.NewJID("120363000000000777", types.GroupServer)
		announcements := types.NewJID("120363000000000778", types.GroupServer)
		n.groups[community.User] = &fakeGroup{info: types.GroupInfo{JID: community, GroupName: types.GroupName{Name: "Neighbours"},
			GroupParent: types.GroupParent{IsParent: true}, Participants: []types.GroupParticipant{participant(me)}}}
		n.groups[announcements.User] = &fakeGroup{info: types.GroupInfo{JID: announcements,
			GroupName: types.GroupName{Name: "Neighbours: news"}, GroupLinkedParent: types.GroupLinkedParent{LinkedParentJID: community},
			Participants: []types.GroupParticipant{participant(me)}}}
		e := newEngine(t, db, n.NewClient, 0)
		id := e.connect(t)
		groups := await.Until(t, "both groups listed", func() []store.ChatGroup {
			gs, _, err := e.svc.ListGroups(ctx, e.ws, id, store.Page{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			return gs
		}, func(gs []store.ChatGroup) bool { return len(gs) == 2 })
		var parent, child store.ChatGroup
		for _, g := range groups {
			if g.Address == community.String() {
				parent = g
			} else {
				child = g
			}
		}
		if !parent.Community || parent.CommunityAddress != nil || child.Community || child.CommunityAddress == nil ||
			*child.CommunityAddress != community.String() {
			t.Fatalf("community %+v, its group %+v", parent, child)
		}
		subject := "Renamed"
		if _, err := e.svc.UpdateGroup(ctx, e.ws, id, parent.ID, &subject, nil, nil); problemCode(err) != "conflict" {
			t.Errorf("renaming a community: %v, want 409 conflict", err)
		}
		if _, _, err := e.svc.ChangeParticipants(ctx, e.ws, id, parent.ID, "add", []string{"+4915112345678"}); problemCode(err) != "conflict" {
			t.Errorf("adding to a community: %v, want 409 conflict", err)
		}
		n.mu.Lock()
		name := n.groups[community.User].info.Name
		n.mu.Unlock()
		if name != "Neighbours" {
			t.Errorf("a refused change reached WhatsApp: the community is called %q", name)
		}
		if _, err := e.svc.UpdateGroup(ctx, e.ws, id, child.ID, &subject, nil, nil); err != nil {
			t.Errorf("renaming a community's group: %v", err)
		}
		created := len(e.events(t, "group.created"))
		if created != 2 {
			t.Errorf("%d group.created events, want 2", created)
		}

		// Connect again: the groups are listed again and nothing is new.
		if _, err := e.svc.Disconnect(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		updates := len(e.events(t, "group.updated"))
		if _, err := e.svc.Connect(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		await.Until(t, "connected again", func() store.Instance { return e.instance(t, id) },
			func(i store.Instance) bool { return i.Status == string(channels.StatusConnected) })
		// A change made while connected is the next event: a later sync of the same groups adds none before it.
		n.mu.Lock()
		n.groups[announcements.User].info.Topic = "Street news"
		n.mu.Unlock()
		if _, err := e.svc.Disconnect(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Connect(ctx, e.ws, id); err != nil {
			t.Fatal(err)
		}
		got := await.Until(t, "the changed group's event", func() []map[string]any { return e.events(t, "group.updated") },
			func(evs []map[string]any) bool { return len(evs) > updates })
		if len(got) != updates+1 || len(e.events(t, "group.created")) != 2 {
			t.Errorf("after two reconnections: %d group.updated (want %d), %d group.created (want 2)", len(got), updates+1,
				len(e.events(t, "group.created")))
		}
	})
}

// problemCode is the code of a problem the service answers ("" for none).
func problemCode(err error) string {
	var p *problem.Error
	if errors.As(err, &p) {
		return string(p.Code)
	}
	return ""
}

// Archiving, pinning and muting are app state patches in WhatsApp's encoding: archive (which unpins by itself),
// pin, mute until a time (milliseconds) or forever (-1), unmute.
func TestChatOrganizationIsAppState(t *testing.T) {
	r := newRig(t, sqlite(t), true)
	ctx := context.Background()
	peer := "+" + r.peer.phone
	yes, no := true, false
	until := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, o := range []channels.ChatOrganization{{Pinned: &yes}, {Archived: &yes, Pinned: &no}, {Archived: &no},
		{Muted: &yes, MutedUntil: until}, {Muted: &yes}, {Muted: &no}} {
		if err := r.sess.OrganizeChat(ctx, peer, o); err != nil {
			t.Fatal(err)
		}
	}
	to, me := r.peer.pn().String(), r.me.phone+" appstate "
	want := []string{me + "pin_v1 " + to + " true", me + "archive " + to + " true", me + "pin_v1 " + to + " false",
		me + "archive " + to + " false", me + "mute " + to + " true " + fmt.Sprint(until.UnixMilli()),
		me + "mute " + to + " true -1", me + "mute " + to + " false 0"}
	if got := r.n.presenceLog(); !slices.Equal(got, want) {
		t.Errorf("app state\n%q\nwant\n%q", got, want)
	}
}

// What the phone does to a chat (archive, pin, mute until a time) reaches the chat through WhatsApp's app state
// events, with chat.updated; a repeat of the state is no change and no event.
func TestChatOrganizedOnThePhone(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n, me, peer, e, id := pairedEngine(t, db)
		chat := firstChat(t, e, id, n, me, peer)
		updates := len(e.events(t, "chat.updated"))
		until := time.Now().Add(8 * time.Hour).Truncate(time.Millisecond)
		n.deliver(me, &events.Pin{JID: peer.jid(), Action: &waSyncAction.PinAction{Pinned: proto.Bool(true)}})
		n.deliver(me, &events.Pin{JID: peer.pn(), Action: &waSyncAction.PinAction{Pinned: proto.Bool(true)}}) // again
		n.deliver(me, &events.Mute{JID: peer.pn(), Action: &waSyncAction.MuteAction{Muted: proto.Bool(true),
			MuteEndTimestamp: proto.Int64(until.UnixMilli())}})
		n.deliver(me, &events.Archive{JID: peer.pn(), Action: &waSyncAction.ArchiveChatAction{Archived: proto.Bool(true)}})
		c := await.Until(t, "the chat archived", func() store.Chat {
			c, err := e.svc.GetChat(ctx, e.ws, id, chat.ID)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, func(c store.Chat) bool { return c.Archived })
		if !c.Muted || c.MutedUntil == nil || !c.MutedUntil.Equal(until) {
			t.Errorf("chat after the phone's changes: muted %v until %v, want until %v", c.Muted, c.MutedUntil, until)
		}
		if c.Pinned {
			t.Error("an archived chat is still pinned (archiving unpins)")
		}
		if got := len(e.events(t, "chat.updated")) - updates; got != 3 {
			t.Errorf("%d chat.updated events for pin, pin again, mute and archive; want 3", got)
		}
	})
}
