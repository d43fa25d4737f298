package main

import (
	"flag"
	"log/slog"
	"time"

	"github.com/switchboard/switchboard/internal/channels/hub"
)

// channelSettings are serve's settings of the channel runtime.
type channelSettings struct {
	sendRate, sendBurst *int
	lease, stagger      *time.Duration
}

func channelFlags(fs *flag.FlagSet) channelSettings {
	return channelSettings{
		sendRate: fs.Int("send-rate", hub.DefaultRate,
			"default pacing of an instance's sends: messages a minute on average, with jitter; 0 turns it off (env SWITCHBOARD_SEND_RATE_PER_MINUTE)"),
		sendBurst: fs.Int("send-burst", hub.DefaultBurst,
			"default number of messages an instance sends back to back before pacing applies (env SWITCHBOARD_SEND_BURST)"),
		lease: fs.Duration("instance-lease", 30*time.Second,
			"how long a process holds an instance's session without renewing; another replica takes it over after (env SWITCHBOARD_INSTANCE_LEASE)"),
		stagger: fs.Duration("reconnect-stagger", 30*time.Second,
			"window over which the instances taken at start (or from a replica that died) connect again (env SWITCHBOARD_RECONNECT_STAGGER)"),
	}
}

func (c channelSettings) options(log *slog.Logger) hub.Options {
	rate := *c.sendRate
	if rate == 0 {
		rate = -1 // hub.Options: -1 is no pacing, 0 the default
	}
	stagger := *c.stagger
	if stagger == 0 {
		stagger = -1
	}
	return hub.Options{Rate: rate, Burst: *c.sendBurst, Lease: *c.lease, Stagger: stagger, Logger: log}
}
