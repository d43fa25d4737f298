package telegram

import (
	"context"
	"testing"
	"time"
)

// A chat's interval counts from when its previous send ended, not from when that send was due: a request that was
// slow on its way cannot bring the next one closer to it than the interval at Telegram's end.
func TestChatIntervalRunsFromTheEndOfTheSend(t *testing.T) {
	s := &session{p: New(Options{ChatInterval: time.Hour, GroupInterval: 2 * time.Hour, BotInterval: time.Millisecond}),
		lastChat: map[string]time.Time{}}
	if err := s.pace(context.Background(), "501"); err != nil {
		t.Fatalf("the first send to a chat waited: %v", err)
	}
	due := s.lastChat["501"]
	time.Sleep(5 * time.Millisecond) // the send itself takes a while
	s.sent("501")
	ended := s.lastChat["501"]
	if !ended.After(due) {
		t.Fatalf("the end of the send (%v) did not move the chat's mark past when it was due (%v)", ended, due)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.pace(done, "501"); err == nil {
		t.Fatal("a second send to the chat within its interval did not wait")
	}
	if got := s.lastChat["501"]; got.Sub(ended) != time.Hour {
		t.Errorf("the next send is due %v after the previous one ended; want the chat interval (1h)", got.Sub(ended))
	}
	// Another chat waits only the bot's interval, not for 501's next send; a group waits its own, longer interval.
	soon, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := s.pace(soon, "502"); err != nil {
		t.Errorf("another chat waited on 501's next send: %v", err)
	}
	s.sent("-100")
	if err := s.pace(done, "-100"); err == nil || s.lastChat["-100"].Sub(time.Now()) < time.Hour+59*time.Minute {
		t.Errorf("a group's next send is due in %v; want its group interval (2h)", time.Until(s.lastChat["-100"]))
	}
	// A mark further ahead (a send already scheduled) is never pulled back by an earlier end.
	s.sent("501")
	if s.lastChat["501"].Sub(ended) != time.Hour {
		t.Error("an ended send pulled the chat's next due time back")
	}
}
