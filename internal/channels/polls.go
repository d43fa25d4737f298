package channels

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/text"
	"github.com/switchboard/switchboard/store"
)

// pollOf checks a poll to send beyond the schema (only a poll message has one; its options differ) and returns it
// as stored.
func pollOf(errs *problem.Fields, in MessageDraft) *store.MessagePoll {
	if in.Type != TypePoll {
		errs.Add("/poll", "only a poll message has a poll")
		return nil
	}
	seen := map[string]bool{}
	for i, o := range in.Poll.Options {
		if seen[o] {
			errs.Add(fmt.Sprintf("/poll/options/%d", i), fmt.Sprintf("the option %q is there twice", o))
		}
		seen[o] = true
	}
	return &store.MessagePoll{Question: in.Poll.Question, Options: in.Poll.Options, MultipleChoice: in.Poll.MultipleChoice}
}

// pollAPI is the API's MessagePoll of a stored poll: each option's tally from the voters' current choices.
func pollAPI(p store.MessagePoll, party func(store.Party) gen.Party) gen.MessagePoll {
	out := gen.MessagePoll{Question: p.Question, MultipleChoice: p.MultipleChoice,
		Options: make([]gen.MessagePollOption, len(p.Options)), Votes: make([]gen.MessagePollVote, 0, len(p.Votes))}
	for i, o := range p.Options {
		out.Options[i] = gen.MessagePollOption{Index: i, Text: o}
	}
	for _, v := range p.Votes {
		if len(v.Options) > 0 {
			out.Voters++
		}
		for _, i := range v.Options {
			if i >= 0 && i < len(out.Options) {
				out.Options[i].Votes++
			}
		}
		out.Votes = append(out.Votes, gen.MessagePollVote{Voter: party(v.Voter), Options: append([]int{}, v.Options...),
			At: v.At})
	}
	return out
}

// checkVote reports what is wrong with a choice of a poll's options ("" when nothing is).
func checkVote(p store.MessagePoll, options []int) string {
	if len(options) > 1 && !p.MultipleChoice {
		return "the poll is single choice: choose one option"
	}
	seen := map[int]bool{}
	for _, i := range options {
		if i < 0 || i >= len(p.Options) {
			return fmt.Sprintf("the poll has options 0 to %d; %d is none of them", len(p.Options)-1, i)
		}
		if seen[i] {
			return fmt.Sprintf("option %d is chosen twice", i)
		}
		seen[i] = true
	}
	return ""
}

// PollVote records a vote on a poll the instance sent: the voter's current choice replaces their earlier one, and
// poll.voted names the voter, the options chosen and the results after it. A vote on a message the instance does
// not know as its poll, or one that does not fit the poll, is dropped (logged by the caller's network code, never
// retried: the network would repeat it forever).
func (k *sink) PollVote(ctx context.Context, v PollVote) error {
	v = text.Cleaned(v)
	inst, err := k.s.db.Instances.ByID(ctx, k.s.db.Reader(), k.id)
	if err != nil {
		return err
	}
	return k.s.inTxFor(ctx, []string{k.id}, func(ctx context.Context, tx store.Tx) error {
		var (
			m   store.Message
			err error
		)
		if v.Poll != "" {
			m, err = k.s.db.Messages.ByProviderID(ctx, tx, k.id, v.Poll)
		} else {
			m, err = k.s.db.Messages.ByProviderPollID(ctx, tx, k.id, v.PollID)
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m, err = k.s.db.Messages.Lock(ctx, tx, m.ID); err != nil {
			return err
		}
		if m.Poll == nil {
			return nil
		}
		if v.OptionHashes != nil {
			if v.Options = optionsByHash(m.Poll.Options, v.OptionHashes); v.Options == nil {
				return nil // a choice that is no option of the poll
			}
		}
		if checkVote(*m.Poll, v.Options) != "" {
			return nil
		}
		if _, err := k.s.resolve(ctx, tx, inst, v.Voter); err != nil {
			return err
		}
		at := v.At
		if at.IsZero() {
			at = time.Now()
		}
		options := slices.Sorted(slices.Values(v.Options))
		vote := store.PollVote{Voter: store.Party{Address: v.Voter.Address, DisplayName: v.Voter.DisplayName},
			Options: options, At: micro(at)}
		if options == nil {
			vote.Options = []int{}
		}
		i := slices.IndexFunc(m.Poll.Votes, func(x store.PollVote) bool { return x.Voter.Address == v.Voter.Address })
		if i >= 0 {
			m.Poll.Votes = slices.Delete(m.Poll.Votes, i, i+1)
		}
		m.Poll.Votes = append(m.Poll.Votes, vote)
		if err := k.s.db.Messages.SavePoll(ctx, tx, &m); err != nil {
			return err
		}
		api, err := k.s.MessageAPI(ctx, tx, m)
		if err != nil {
			return err
		}
		ev := gen.PollVotedEvent{MessageId: m.ID, ChatId: m.ChatID, Poll: *api.Poll, InstanceId: inst.ID,
			Options: make([]gen.PollChoice, len(vote.Options))}
		ev.Voter = api.Poll.Votes[len(api.Poll.Votes)-1].Voter
		for j, o := range vote.Options {
			ev.Options[j] = gen.PollChoice{Index: o, Text: m.Poll.Options[o]}
		}
		return k.s.emitNumbered(ctx, tx, events.Pending{WorkspaceID: inst.WorkspaceID, InstanceID: inst.ID, Payload: ev})
	})
}

// pollVoteControl turns the sandbox's poll_vote control into the network's terms: the inbound poll it votes on,
// by its provider message id, after checking the choice against the poll. Returns NotFound, and ValidationFailed
// for a message that is no poll the instance received or a choice that does not fit it.
func (s *Service) pollVoteControl(ctx context.Context, workspaceID, instanceID string, c *Control) error {
	m, err := s.GetMessage(ctx, workspaceID, instanceID, c.MessageID)
	if err != nil {
		return err
	}
	var errs problem.Fields
	if m.Poll == nil || m.Direction != "inbound" || m.ProviderMessageID == nil {
		errs.Add("/message_id", "it is no poll the instance received")
		return errs.Err()
	}
	if why := checkVote(*m.Poll, c.Options); why != "" {
		errs.Add("/options", why)
		return errs.Err()
	}
	c.MessageID = *m.ProviderMessageID
	return nil
}

// optionsByHash are the indexes of the options whose texts have the SHA-256 hashes given, in the poll's order;
// nil when a hash matches no option. An empty choice is an empty, non-nil list.
func optionsByHash(options []string, hashes [][]byte) []int {
	out := []int{}
	for _, h := range hashes {
		i := slices.IndexFunc(options, func(o string) bool {
			sum := sha256.Sum256([]byte(o))
			return bytes.Equal(sum[:], h)
		})
		if i < 0 {
			return nil
		}
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}
