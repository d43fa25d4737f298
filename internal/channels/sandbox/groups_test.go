package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// roles renders a group's participants as "number:role" in order.
func roles(g channels.Group) string {
	var out []string
	for _, p := range g.Participants {
		out = append(out, p.Address+":"+p.Role)
	}
	return strings.Join(out, " ")
}

// changes renders the group changes a sink recorded, in order.
func changes(r *recorder) string {
	var out []string
	for _, e := range r.of("group") {
		out = append(out, e.change)
	}
	return strings.Join(out, ",")
}

func TestGroups(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		n := newNetwork(t, db, Options{})
		a := n.connected(map[string]any{"display_name": "Ada"})
		b := n.connected(map[string]any{"display_name": "Bea"})
		c := n.connected(nil)
		d := n.connected(nil)
		outsider := n.connected(nil)
		nobody := freeNumber()

		// Create: the creator owns it; who cannot be added is rejected, one result each.
		if err := d.sess.Block(ctx, a.number, true); err != nil {
			t.Fatal(err)
		}
		g, err := a.sess.CreateGroup(ctx, " Team ", []string{b.number, nobody, "garbage", EchoNumber, d.number, b.number})
		if err != nil {
			t.Fatal(err)
		}
		if g.Subject != "Team" || !isGroup(g.Address) || roles(g) != a.number+":owner "+b.number+":member" ||
			g.Participants[0].DisplayName != "Ada" {
			t.Fatalf("created %+v", g)
		}
		rejected := map[string]string{}
		for _, r := range g.Rejected {
			rejected[r.Address] = r.Failure.Code
		}
		if len(rejected) != 4 || rejected[nobody] != "recipient_not_on_network" || rejected["garbage"] != "invalid_address" ||
			rejected[EchoNumber] != "not_permitted" || rejected[d.number] != "blocked" {
			t.Errorf("rejected %v", rejected)
		}
		if _, err := a.sess.CreateGroup(ctx, "  ", nil); failureCode(t, err) != "invalid_subject" {
			t.Errorf("an empty subject: %v", err)
		}
		created := b.sink.wait(t, "group", 1)[0]
		if created.change != channels.GroupCreated || created.group.Address != g.Address {
			t.Errorf("B was told %v", created)
		}

		// Messages reach every other participant, with the group as the chat.
		id := a.send(t, g.Address, "hello team")
		in := b.sink.wait(t, "inbound", 1)[0].inbound
		if in.Chat != g.Address || in.From.Address != a.number || in.Text != "hello team" {
			t.Errorf("B received %+v", in)
		}
		await.Equal(t, "the group message's receipts", func() string { return strings.Join(a.sink.receiptsOf(id), ",") },
			"delivered,read")
		if _, err := outsider.sess.Send(ctx, channels.Outbound{Chat: g.Address, Type: channels.TypeText, Text: "x"}); failureCode(t, err) != "not_a_participant" {
			t.Errorf("an outsider's message: %v", err)
		}
		if _, err := a.sess.Send(ctx, channels.Outbound{Chat: "999999999999999999@g.sandbox", Type: channels.TypeText, Text: "x"}); failureCode(t, err) != "group_not_found" {
			t.Errorf("a message to no group: %v", err)
		}

		// Subject and description: admins only; the others are told.
		subject, description := "Team A", "the A team"
		if _, err := b.sess.UpdateGroup(ctx, g.Address, &subject, nil); failureCode(t, err) != "not_group_admin" {
			t.Errorf("a member's update: %v", err)
		}
		if g, err = a.sess.UpdateGroup(ctx, g.Address, &subject, &description); err != nil || g.Subject != subject ||
			g.Description != description {
			t.Fatalf("update = %+v, %v", g, err)
		}
		await.Equal(t, "B told of the update", func() string { return changes(b.sink) }, "created,updated")

		// Participants, one result each.
		results, err := a.sess.ChangeParticipants(ctx, g.Address, "add", []string{c.number, b.number, nobody})
		if err != nil {
			t.Fatal(err)
		}
		if codes := resultCodes(results); codes != "ok,already_participant,recipient_not_on_network" {
			t.Errorf("add: %s", codes)
		}
		await.Equal(t, "C told of the group", func() string { return changes(c.sink) }, "created")
		await.Equal(t, "B told of C", func() string { return changes(b.sink) }, "created,updated,participants_changed")
		results, err = a.sess.ChangeParticipants(ctx, g.Address, "promote", []string{b.number, outsider.number})
		if err != nil || resultCodes(results) != "ok,not_a_participant" {
			t.Errorf("promote: %s, %v", resultCodes(results), err)
		}
		// B, an admin now, removes C and tries the owner.
		results, err = b.sess.ChangeParticipants(ctx, g.Address, "remove", []string{c.number, a.number})
		if err != nil || resultCodes(results) != "ok,not_permitted" {
			t.Errorf("remove: %s, %v", resultCodes(results), err)
		}
		await.Equal(t, "C told of the promotion, then that it left", func() string { return changes(c.sink) },
			"created,participants_changed,left")
		if _, err := c.sess.GetGroup(ctx, g.Address); failureCode(t, err) != "not_a_participant" {
			t.Errorf("a former participant reads the group: %v", err)
		}
		results, err = a.sess.ChangeParticipants(ctx, g.Address, "demote", []string{b.number, a.number})
		if err != nil || resultCodes(results) != "ok,not_permitted" {
			t.Errorf("demote: %s, %v", resultCodes(results), err)
		}
		if _, err := b.sess.ChangeParticipants(ctx, g.Address, "add", []string{c.number}); failureCode(t, err) != "not_group_admin" {
			t.Errorf("a member adds: %v", err)
		}
		if _, err := a.sess.ChangeParticipants(ctx, g.Address, "kick", []string{c.number}); failureCode(t, err) != "invalid_action" {
			t.Errorf("an unknown action: %v", err)
		}

		// Invites: join by link or code; a revoked link stops working.
		link, err := a.sess.InviteLink(ctx, g.Address, false)
		if err != nil || !strings.HasPrefix(link, inviteBase) {
			t.Fatalf("invite link %q, %v", link, err)
		}
		if again, _ := a.sess.InviteLink(ctx, g.Address, false); again != link {
			t.Errorf("the link changed without a revoke: %s, %s", link, again)
		}
		if _, err := b.sess.InviteLink(ctx, g.Address, false); failureCode(t, err) != "not_group_admin" {
			t.Errorf("a member's invite link: %v", err)
		}
		joined, err := c.sess.JoinGroup(ctx, link)
		if err != nil || !strings.Contains(roles(joined), c.number+":member") {
			t.Fatalf("join = %+v, %v", joined, err)
		}
		fresh, err := a.sess.InviteLink(ctx, g.Address, true)
		if err != nil || fresh == link {
			t.Fatalf("revoke = %q, %v", fresh, err)
		}
		if _, err := outsider.sess.JoinGroup(ctx, link); failureCode(t, err) != "invalid_invite" {
			t.Errorf("join by a revoked link: %v", err)
		}
		if _, err := outsider.sess.JoinGroup(ctx, strings.TrimPrefix(fresh, inviteBase)); err != nil {
			t.Errorf("join by the bare code: %v", err)
		}

		// Leaving: the owner hands the group over, admins first.
		if _, err := a.sess.ChangeParticipants(ctx, g.Address, "promote", []string{outsider.number}); err != nil {
			t.Fatal(err)
		}
		if err := a.sess.LeaveGroup(ctx, g.Address); err != nil {
			t.Fatal(err)
		}
		after, err := b.sess.GetGroup(ctx, g.Address)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.number + ":member " + c.number + ":member " + outsider.number + ":owner"; roles(after) != want {
			t.Errorf("after the owner left: %s, want %s", roles(after), want)
		}
		if err := a.sess.LeaveGroup(ctx, g.Address); failureCode(t, err) != "not_a_participant" {
			t.Errorf("leaving twice: %v", err)
		}
		await.Until(t, "B told the owner left", func() string { return changes(b.sink) },
			func(s string) bool { return strings.Count(s, "participants_changed") >= 6 })
	})
}

func resultCodes(results []channels.ParticipantResult) string {
	var out []string
	for _, r := range results {
		switch {
		case r.OK:
			out = append(out, "ok")
		case r.Failure != nil:
			out = append(out, r.Failure.Code)
		default:
			out = append(out, "?")
		}
	}
	return strings.Join(out, ",")
}

// TestGroupReceiptsOnce: every participant's instance reports a group message delivered and read; its sender is
// told each once.
func TestGroupReceiptsOnce(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		n := newNetwork(t, db, Options{})
		a, b, c, d := n.connected(nil), n.connected(nil), n.connected(nil), n.connected(nil)
		g, err := a.sess.CreateGroup(context.Background(), "four", []string{b.number, c.number, d.number})
		if err != nil {
			t.Fatal(err)
		}
		id := a.send(t, g.Address, "to all")
		for _, in := range []*instance{b, c, d, a} {
			await.Equal(t, in.number+"'s mailbox emptied", func() int { return n.mailbox(t, in.number) }, 0)
		}
		if got := strings.Join(a.sink.receiptsOf(id), ","); got != "delivered,read" {
			t.Errorf("receipts %s, want delivered,read once each", got)
		}
	})
}

// mailbox counts the mail the network holds for a number, due now or later.
func (n *network) mailbox(t *testing.T, number string) int {
	count, err := n.db.Bun().NewSelect().Model((*store.SandboxMail)(nil)).Where("number = ?", number).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(count)
}
