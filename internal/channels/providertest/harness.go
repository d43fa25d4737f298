package providertest

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
)

// Harness is what a provider's tests hand Conformance: how to start the provider's network and what of the suite
// cannot apply to it.
type Harness struct {
	// Network starts the provider's network for one run of the suite (a fake of its API, a Prosody, the sandbox in
	// env's database). The suite runs once on SQLite and once on PostgreSQL, each run with its own network.
	Network func(t *testing.T, env Env) Network
	// Addresses are addresses of the network in the forms people write them, valid or not: normalizing each must
	// reach a fixed point. Info().AddressExample is checked besides.
	Addresses []string
	// NotApplicable names the checks that cannot apply to the provider, each with the reason the suite skips it
	// with. Only the Optional rules may be named, and only when the provider's Info agrees (a provider that lists
	// receipts cannot declare receipts not applicable).
	NotApplicable map[Rule]string
}

// Env is what the suite's engine (the messaging service and the channel runtime over a database) gives a network.
type Env struct {
	// DB is the run's database; the sandbox keeps its network in it.
	DB *store.DB
	// HookURL is where a network pushes an instance's updates; the engine applies them through the instance's sink
	// as the hook URL of a serve process does.
	HookURL func(instanceID string) string
}

// Network is a provider on its network during one run.
type Network struct {
	// Provider returns the provider as a new process builds it: a new value on every call, over the same network.
	// The suite registers the first with the engine; later ones stand for another process.
	Provider func() channels.Provider
	// Account makes a new account of the network for an instance to connect as.
	Account func(t *testing.T) Account
	// Stranger is an address in normalized form that no account of the network has.
	Stranger string
	// Committed reports an error unless what a session just reported to its sink is already visible in the
	// provider's own store (its records committed): it is called inside every sink call, before the call goes on
	// to the messaging service. Nil for a provider that keeps no state of its own (RuleSinkAfterCommit is then
	// declared not applicable).
	Committed func(ctx context.Context, c Call) error
}

// Account is an account of the network an instance connects as, with a peer that talks to it.
type Account struct {
	// Config is the instance's config, secrets included; it must pass the provider's schema and ValidateConfig.
	Config map[string]any
	// Peer is another party of the network that the instance messages.
	Peer Peer
	// Attach, when set, is told the instance's ID once the engine created it (a network that pushes to the
	// instance's hook URL learns it from Env.HookURL).
	Attach func(instanceID string)
	// LoseAnswer makes the network take the next message the account sends but lose its answer, so that the
	// provider cannot know whether it was sent (a timeout after the request arrived). Nil when the harness cannot
	// (RuleRetryAnswerLost is then declared not applicable).
	LoseAnswer func()
	// Faults are refusals of the network the suite cannot provoke through the seams alone: each arranges one (a
	// rate limit, a blocked recipient, a server error) and makes the call that meets it, returning the provider's
	// error. Every such error must map to a code of the problem table.
	Faults []Fault
}

// Fault is a refusal of the network, named for the test output.
type Fault struct {
	Name string
	// Run arranges the refusal and makes the call on the instance's live session (or its provider) that meets it.
	Run func(ctx context.Context, sess channels.Session) error
}

// Peer is a party of the network the instance talks to: a person's app on the same network, driven by the test.
type Peer interface {
	// Address is the peer's address, normalized, as the instance sends to it.
	Address() string
	// Send makes the peer send a text message to the account.
	Send(ctx context.Context, text string) error
	// Received lists what the network delivered to the peer from the account so far, oldest first: one entry per
	// copy delivered (a message the network carried twice is there twice).
	Received(ctx context.Context) ([]Delivery, error)
	// Receipt makes the network tell the account that a message it sent (by its provider ID) was delivered, read
	// or, where the network reports it, failed. It returns once the network took it; a network delivers the
	// receipts of one peer in the order they were given.
	Receipt(ctx context.Context, providerID, status string) error
}

// Delivery is a message the peer received.
type Delivery struct {
	ID   string // the network's ID of the copy
	Text string
}

// Rule names a check of the suite: its subtest's name, which reads as the rule.
type Rule string

// The rules. Subtests of a rule are rules too.
const (
	RuleCapabilities      Rule = "the capabilities listed equal the optional interfaces implemented"
	RuleSendOnce          Rule = "a send retried with the same message ID is sent once or marked a possible repeat"
	RuleRetrySameSession  Rule = "retried by the same session"
	RuleRetryOtherProcess Rule = "retried by another process"
	RuleRetryAnswerLost   Rule = "retried after the network lost its answer"
	RuleSinkAfterCommit   Rule = "the sink is told only after the provider's own commit"
	RuleAddresses         Rule = "address normalisation is a fixed point and round-trips"
	RuleStatusesForward   Rule = "statuses only move forward under shuffled receipts"
	RuleFailedTerminal    Rule = "failed is terminal"
	RuleFailureCodes      Rule = "every provider error maps to a code of the problem table"
	RuleCredentials       Rule = "disconnect keeps credentials and logout drops them"
	RuleLogoutRevokes     Rule = "the network refuses the credentials logout dropped"
	RuleLeaseLost         Rule = "a session that lost its lease reports nothing"
)

// Optional are the rules a harness may declare not applicable, each for what the provider or its test network
// cannot do.
var Optional = []Rule{RuleRetryAnswerLost, RuleSinkAfterCommit, RuleStatusesForward, RuleFailedTerminal,
	RuleLogoutRevokes}
