package eventstream

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// TestOfferAndTakeReuseTheirSlices: once a subscription has taken twice, handing it the hub's reads and taking them
// allocates nothing — the two waiting slices take turns — so a thousand subscriptions cost no garbage per read.
func TestOfferAndTakeReuseTheirSlices(t *testing.T) {
	s := &Subscription{hub: &Hub{}, signal: make(chan struct{}, 1), done: make(chan struct{})}
	var major int64
	batch := make([]*Event, 20)
	next := func() {
		for i := range batch {
			major++
			batch[i] = &Event{PositionedEvent: store.PositionedEvent{Position: store.EventPosition{Major: major}},
				typ: events.Type{Name: "link.created"}}
		}
	}
	round := func() {
		s.offer(batch, DefaultBuffer)
		<-s.signal
		if got, err := s.Take(context.Background()); err != nil || len(got) != len(batch) || got[0] != batch[0] {
			t.Fatalf("Take = %d events (%v), want the %d offered", len(got), err, len(batch))
		}
	}
	next()
	round()
	round() // both slices exist now
	if allocs := testing.AllocsPerRun(100, func() { next(); round() }) - float64(len(batch)); allocs > 0 {
		t.Errorf("offer and Take allocated %.1f times a round, want none", allocs)
	}
}
