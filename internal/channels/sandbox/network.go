package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/switchboard/switchboard/store"
)

// assignAttempts bounds the draws of a free number (10^7 numbers: a draw collides only on a crowded network).
const assignAttempts = 20

// pairAccount gives an instance its account with a new credential and returns its number and the credential. An
// instance that paired before keeps its number; otherwise it gets the number it asked for (requested, "" for any)
// or a free one. A *channels.Failure says why the pairing cannot complete.
func (p *Provider) pairAccount(ctx context.Context, instanceID, requested, displayName string) (number, token string, err error) {
	token = rand.Text()
	hash, at := hashToken(token), now()
	err = p.net.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		acc, err := p.net.AccountOf(ctx, tx, instanceID)
		if err == nil {
			if requested != "" && requested != acc.Number {
				return failure("number_mismatch", "the instance holds %s on the sandbox network and pairs with it "+
					"again, not with %s", acc.Number, requested)
			}
			number = acc.Number
			return p.net.Pair(ctx, tx, instanceID, hash, at)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for range assignAttempts {
			number = requested
			if number == "" {
				number = assignedNumber()
			}
			created, err := p.net.CreateAccount(ctx, tx, &store.SandboxAccount{Number: number,
				InstanceID: instanceID, DisplayName: displayName, TokenHash: &hash, CreatedAt: at, PairedAt: &at})
			if err != nil || created {
				return err
			}
			if requested != "" {
				return failure("number_taken", "%s is held by another instance: choose another number", requested)
			}
		}
		return errors.New("sandbox: no free number found")
	})
	return number, token, err
}

// numberFree checks that an instance may pair with the number: no other instance holds it, and the instance holds
// no other one.
func (p *Provider) numberFree(ctx context.Context, number, instanceID string) error {
	acc, err := p.net.Account(ctx, p.net.Reader(), number)
	if err == nil && acc.InstanceID != instanceID {
		return failure("number_taken", "%s is held by another instance: choose another number", number)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	own, err := p.net.AccountOf(ctx, p.net.Reader(), instanceID)
	if err == nil && own.Number != number {
		return failure("number_mismatch", "the instance holds %s on the sandbox network and pairs with it again, "+
			"not with %s", own.Number, number)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// unpair invalidates an instance's credential (nothing to do when it never paired).
func (p *Provider) unpair(ctx context.Context, instanceID string) error {
	if err := p.net.Unpair(ctx, p.net.Writer(), instanceID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// post puts letters into their mailboxes in tx.
func (p *Provider) post(ctx context.Context, tx store.Querier, letters []letter) error {
	rows, err := mail(letters)
	if err != nil {
		return err
	}
	return p.net.Post(ctx, tx, rows)
}

// schedule is when the sender of a message is told it was delivered and read, counted from its delivery to the
// recipient's instance (NoReceipt: never). It travels with the message: the sender's settings decide.
type schedule struct {
	Delivered time.Duration `json:"delivered"`
	Read      time.Duration `json:"read"`
	// Shuffle tells the two in either order, at random.
	Shuffle bool `json:"shuffle,omitempty"`
}

// any reports whether the schedule sends a receipt at all.
func (sc schedule) any() bool { return sc.Delivered >= 0 || sc.Read >= 0 }

// receipts are the letters that tell a message's sender, on its schedule, that it was delivered and read. When
// shuffled, a coin decides whether the read receipt goes first (due when the delivered one would have been).
func (p *Provider) receipts(sc schedule, sender, instanceID, messageID string, delivered time.Time) []letter {
	var letters []letter
	for _, r := range []struct {
		status string
		after  time.Duration
	}{{statusDelivered, sc.Delivered}, {statusRead, sc.Read}} {
		if r.after < 0 {
			continue
		}
		letters = append(letters, receipt(sender, instanceID, messageID, r.status, delivered.Add(r.after)))
	}
	if sc.Shuffle && len(letters) == 2 && p.opts.coin() {
		first, second := letters[0].due, letters[1].due
		letters = []letter{
			receipt(sender, instanceID, messageID, statusRead, first),
			receipt(sender, instanceID, messageID, statusDelivered, second),
		}
	}
	return letters
}

// receipt is the letter that tells a message's sender, at a time, that it was delivered or read.
func receipt(sender, instanceID, messageID, status string, at time.Time) letter {
	return letter{to: sender, instance: instanceID, due: at,
		env: envelope{Receipt: &mailReceipt{ID: messageID, Status: status, At: at}}}
}
