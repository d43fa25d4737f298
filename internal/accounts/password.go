package accounts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's minimum recommendation (19 MiB, 2 passes, 1 lane), about 30 ms here.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16
)

var b64 = base64.RawStdEncoding

// hashPassword returns the PHC string of an argon2id hash of password with a random salt.
func hashPassword(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

var errBadHash = errors.New("accounts: unreadable password hash")

// checkPassword reports whether password matches the PHC string, with the parameters stored in it (so they can be
// raised later without invalidating old hashes).
func checkPassword(phc, password string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return false, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is checked when an email is unknown, so that sign-in takes as long whether or not the account exists.
var dummyHash = func() string {
	h, err := hashPassword("switchboard-dummy-password")
	if err != nil {
		panic(err)
	}
	return h
}()

// commonPasswords are refused outright (a sample of the most common passwords of at least 10 characters).
var commonPasswords = map[string]bool{
	"1234567890": true, "0123456789": true, "password12": true, "password123": true, "password1!": true,
	"qwertyuiop": true, "1q2w3e4r5t": true, "iloveyou12": true, "qwerty1234": true, "1qaz2wsx3edc": true,
	"abcdefghij": true, "aaaaaaaaaa": true, "passwordpassword": true, "letmein123": true, "welcome123": true,
	"administrator": true, "switchboard": true, "switchboard1": true, "changeme123": true, "0987654321": true,
}

// passwordProblem explains why a password is not acceptable, or returns "".
func passwordProblem(password, email string) string {
	switch {
	case utf8.RuneCountInString(password) < 10:
		return "Use at least 10 characters for your password."
	case utf8.RuneCountInString(password) > 256:
		return "Use at most 256 characters for your password."
	case commonPasswords[strings.ToLower(password)]:
		return "This password is among the most common ones; choose another."
	}
	if local, _, ok := strings.Cut(strings.ToLower(email), "@"); ok && len(local) >= 4 && strings.Contains(strings.ToLower(password), local) {
		return "Your password must not contain your email address."
	}
	return ""
}
