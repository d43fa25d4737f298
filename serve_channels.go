package main

import (
	"flag"
	"github.com/switchboard/switchboard/internal/sealbox"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/channels/hub"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/whatsappcloud"
	"github.com/switchboard/switchboard/internal/channels/xmpp"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
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

// messagingService builds the messaging capability and its runtime: the service first (the runtime records through
// it), then the runtime, then the providers that need the runtime (the sandbox wakes sessions across processes).
// Media bytes live in the data directory on SQLite (files beside the database, out of its single writer) and in the
// database on PostgreSQL (shared by every process).
func messagingService(db *store.DB, outbox *events.Outbox, box *sealbox.Box, guard *egress.Guard, baseURL string, opts hub.Options, log *slog.Logger) (*channels.Service, *hub.Hub, error) {
	var media channels.MediaStore = channels.DatabaseMedia{DB: db}
	if db.Dialect() == store.SQLite {
		media = channels.DirMedia{DB: db, Dir: filepath.Join(db.DataDir(), "media")}
	}
	svc, err := channels.New(db, outbox, channels.Config{Sealer: box, Media: media, Guard: guard, Logger: log, BaseURL: baseURL})
	if err != nil {
		return nil, nil, err
	}
	runtime := hub.New(db, svc, opts)
	svc.Attach(runtime, runtime)
	// XMPP servers, Bot API servers and Graph API base URLs are named by instance configs, that is by customers:
	// their connections go through the egress guard like webhooks (a server on a private network needs
	// --webhook-allowed-networks). Telegram and WhatsApp Cloud push to the hook URLs under the public base URL.
	providers := []channels.Provider{
		sandbox.New(db, runtime, sandbox.Options{Logger: log, Delivered: sandbox.DefaultDelivered, Read: sandbox.DefaultRead}),
		xmpp.New(xmpp.Options{Dial: guard.DialContext, HTTP: guard.Client(xmpp.DefaultUploadTimeout)}),
		telegram.New(telegram.Options{PublicURL: baseURL, HTTP: guard.Client(time.Minute)}),
		whatsappcloud.New(whatsappcloud.Options{HTTP: guard.Client(time.Minute)}),
	}
	for _, p := range providers {
		if err := svc.AddProvider(p); err != nil {
			return nil, nil, err
		}
	}
	return svc, runtime, nil
}
