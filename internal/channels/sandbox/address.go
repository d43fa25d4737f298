package sandbox

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// EchoNumber is the network's echo service: it answers every message with a copy ("echo: …"), so that a single
// instance can be tried alone.
const EchoNumber = "+99900000000"

// echoName is the echo service's display name.
const echoName = "Sandbox echo"

// Numbers are +999 followed by 7 to 12 digits (E.164 allows 15 digits in all). +9990… is the network's own range
// (the echo service); instances hold numbers from +9991… to +9999…, assigned ones from +9995….
const (
	numberPrefix  = "+999"
	minLocal      = 7
	maxLocal      = 12
	groupSuffix   = "@g.sandbox"
	groupDigits   = 18
	assignedFirst = "5"
)

// NormalizeAddress returns the canonical form of a sandbox address: a number as + and digits ("+999 555 0101",
// "0099955501 01", "(+999) 555-0101" are all +9995550101) or a group address (18 digits and @g.sandbox).
func (p *Provider) NormalizeAddress(raw string) (string, error) {
	return normalize(raw)
}

func normalize(raw string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	if strings.HasSuffix(s, groupSuffix) {
		if digits := strings.TrimSuffix(s, groupSuffix); len(digits) == groupDigits && allDigits(digits) {
			return s, nil
		}
		return "", fmt.Errorf("%q is not a sandbox group address (%d digits followed by %s)", raw, groupDigits, groupSuffix)
	}
	return normalizeNumber(raw)
}

func normalizeNumber(raw string) (string, error) {
	s := strings.TrimPrefix(strings.TrimSpace(raw), "tel:")
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' && b.Len() == 0 && !strings.ContainsRune(s[:i], '+'):
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')' || r == '\u00a0':
		default:
			return "", fmt.Errorf("%q is not a sandbox number: only digits, spaces, dashes, dots, brackets and a "+
				"leading + or 00 may appear (for example +999 555 0101)", raw)
		}
	}
	n := b.String()
	if strings.HasPrefix(n, "00") {
		n = "+" + n[2:]
	}
	if !strings.HasPrefix(n, "+") {
		return "", fmt.Errorf("%q is not a sandbox number: write it in international form, +999 or 00999 "+
			"followed by the subscriber number (for example +999 555 0101)", raw)
	}
	if !strings.HasPrefix(n, numberPrefix) {
		return "", fmt.Errorf("%q is not a sandbox number: sandbox numbers are in the reserved range +999 "+
			"(for example +999 555 0101)", raw)
	}
	if local := len(n) - len(numberPrefix); local < minLocal || local > maxLocal {
		return "", fmt.Errorf("%q is not a sandbox number: +999 is followed by %d to %d digits (for example "+
			"+999 555 0101)", raw, minLocal, maxLocal)
	}
	return n, nil
}

// requestableNumber normalizes a number an instance asks to pair with: any number outside the network's own range.
func requestableNumber(raw string) (string, error) {
	n, err := normalizeNumber(raw)
	if err != nil {
		return "", err
	}
	if n[len(numberPrefix)] == '0' {
		return "", fmt.Errorf("%s is in the network's own range +9990…; pick a number from +9991… to +9999…", n)
	}
	return n, nil
}

func isGroup(address string) bool { return strings.HasSuffix(address, groupSuffix) }

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// randomDigits returns n random decimal digits.
func randomDigits(n int) string {
	var b strings.Builder
	for range n {
		d, err := rand.Int(rand.Reader, big.NewInt(10))
		if err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		b.WriteByte(byte('0' + d.Int64()))
	}
	return b.String()
}

// assignedNumber draws a number for an instance that asked for none: +9995 and 7 digits.
func assignedNumber() string { return numberPrefix + assignedFirst + randomDigits(minLocal) }

// newGroupAddress draws a group address.
func newGroupAddress() string { return randomDigits(groupDigits) + groupSuffix }

// coinFlip is the shuffle's default coin.
func coinFlip() bool {
	d, err := rand.Int(rand.Reader, big.NewInt(2))
	return err == nil && d.Int64() == 1
}

// pairingAlphabet leaves out letters and digits that read alike (0/O, 1/I/L).
const pairingAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// newPairingCode draws a code to type into the account's app, as "ABCD-EFGH".
func newPairingCode() string {
	var b strings.Builder
	for i := range 8 {
		if i == 4 {
			b.WriteByte('-')
		}
		d, err := rand.Int(rand.Reader, big.NewInt(int64(len(pairingAlphabet))))
		if err != nil {
			panic(err)
		}
		b.WriteByte(pairingAlphabet[d.Int64()])
	}
	return b.String()
}

var errNoInvite = errors.New("not an invite")

// inviteBase is how invite links begin; .invalid is a name no resolver answers for, so a link never leaves for a
// real host.
const inviteBase = "https://join.sandbox.invalid/"

// inviteCode extracts the code from an invite link or a bare code.
func inviteCode(invite string) (string, error) {
	code := strings.TrimPrefix(strings.TrimSpace(invite), inviteBase)
	if code == "" || strings.ContainsAny(code, "/?# ") {
		return "", errNoInvite
	}
	return code, nil
}
