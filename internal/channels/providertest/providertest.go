// Package providertest holds what every channel provider's tests share: the conformance suite (Conformance) and a
// fuzz check of address normalization (FuzzNormalizeAddress).
//
// # The conformance suite
//
// A provider passes Conformance to be one: its test calls
//
//	func TestConformance(t *testing.T) { providertest.Conformance(t, harness) }
//
// and the suite runs its sessions the way a serve process does — the messaging service and the channel runtime
// over a real database, once on SQLite and once on PostgreSQL — while it records every report the sessions make
// to their sinks. Each check is a subtest whose name is its rule (the Rule constants):
//
//   - the capabilities listed (Info().Capabilities, and what a Discoverer session discovers) equal the optional
//     interfaces its sessions implement, both ways;
//   - a send retried with the same message ID (Outbound.Resend) — by the same session, by another process, and
//     after the network lost its answer — reaches the peer once, or comes back marked Sent.PossibleRepeat;
//   - the sink is told only after the provider's own commit (Network.Committed reads the provider's store inside
//     each sink call);
//   - address normalization is a fixed point, and every address the provider reports is in its normal form;
//   - statuses only move forward under receipts delivered out of order and twice, through the real service's sink:
//     the history climbs queued < sending < sent < delivered < read, and failed is terminal;
//   - every error the provider returns — to sends, to the calls of its optional interfaces provoked with bad
//     arguments, to the Faults the harness arranges, to pushes — is a *channels.Failure whose code is in the
//     problem table or in the spec's list of failure codes (the MessageFailure schema), or a sentinel of channels;
//   - disconnect keeps the credentials and the account, and reconnects without pairing; logout drops them, and
//     a network that paired the instance refuses the old credentials;
//   - once the runtime lost an instance's lease and let go of its session, nothing that session reports is
//     recorded, and the session reports nothing more.
//
// # Writing a harness
//
// A new provider's author writes a Harness: Network starts the provider's network for one run (a fake of its
// published API, a real server, or the sandbox in the run's database) and returns how to build the provider
// (Provider, called again to stand for another process), how to make an account an instance connects as
// (Account: its config, and a Peer — another party of the network the test drives: it sends to the account,
// lists what it received, and has the network report receipts), an address no account has (Stranger) and, for a
// provider that keeps state of its own, how to check that state is committed (Committed). An Account may also
// offer LoseAnswer (the network takes a send but the answer is lost) and Faults (refusals the seams cannot
// provoke). What cannot apply to the provider is declared in NotApplicable with the reason the suite skips it
// with; only the Optional rules may be named, and the suite fails a harness that leaves one out without saying
// why.
//
// The suite's dependence on the engine (the service, the runtime, the store) is in one file, engine.go; the
// checks see instances, messages and sessions through it.
package providertest

import "testing"

// FuzzNormalizeAddress fuzzes normalize from seeds: any input either fails or normalizes to an address that
// normalizes to itself (one person or account, one address), which the chat and contact records rely on.
func FuzzNormalizeAddress(f *testing.F, normalize func(string) (string, error), seeds ...string) {
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if norm, err := normalize(raw); err == nil {
			if again, err := normalize(norm); err != nil || again != norm {
				t.Fatalf("NormalizeAddress(%q) = %q, which normalizes to %q, %v", raw, norm, again, err)
			}
		}
	})
}
