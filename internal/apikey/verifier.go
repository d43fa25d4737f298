package apikey

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/store"
)

// Verification failures, in the order Verify checks them.
var (
	// ErrUnknown means the key is well-formed but no key has it.
	ErrUnknown = errors.New("apikey: unknown key")
	// ErrRevoked means the key was revoked.
	ErrRevoked = errors.New("apikey: key revoked")
	// ErrExpired means the key's expiry has passed.
	ErrExpired = errors.New("apikey: key expired")
)

// Key is what a request learns about the key it presented. Its slices are shared with the cache: read them only.
type Key struct {
	ID          string
	WorkspaceID string
	Name        string
	Scopes      []Scope
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
	// EnabledModels are the model IDs the workspace may use; nil means all.
	EnabledModels []string
	// Hash is the key's Hash, what stands for it where the key itself must not (a stream token).
	Hash string
	// Kind is store.KindSecret or store.KindBrowser.
	Kind string
	// Origins are the origins whose pages may use the key (see OriginAllowed); empty means the operator's list
	// decides.
	Origins []string
	// ScopeTarget and DailyQuota narrow a browser key's scope (see store.APIKey).
	ScopeTarget string
	DailyQuota  int
	// InstanceIDs are the messaging instances a secret key reaches; empty means every instance of its workspace
	// (see Reaches).
	InstanceIDs []string
}

// Limited reports whether the key reaches only some instances of its workspace.
func (k Key) Limited() bool { return len(k.InstanceIDs) > 0 }

// Reaches reports whether the key may see and act on an instance of its workspace.
func (k Key) Reaches(instanceID string) bool {
	return !k.Limited() || slices.Contains(k.InstanceIDs, instanceID)
}

// Store is what the Verifier needs from the data layer.
type Store interface {
	// ByHash returns the key with the given hash, with its workspace, or store.ErrNotFound.
	ByHash(ctx context.Context, hash string) (store.APIKey, error)
	// KeysVersion changes whenever any key may have changed, in any process, from the first call after the change
	// committed: the cache is only as fresh as this answer.
	KeysVersion(ctx context.Context) (uint64, error)
	// TouchLastUsed records last-use times.
	TouchLastUsed(ctx context.Context, used map[string]time.Time) error
	// Watch follows the changes other processes announce until ctx ends; KeysVersion relies on it where changes are
	// announced rather than read from the database itself.
	Watch(ctx context.Context)
}

// Verifier authenticates keys: shape and checksum first (garbage never reaches the database), then an in-process
// cache of verified keys, then an indexed lookup by hash. A cached key is trusted only while the store's KeysVersion
// is unchanged and for at most TTL, so a revocation — by this process, the CLI or another replica — takes effect on
// the next request. last_used_at is written at most once a minute per key, in the background: by Run, which also
// runs the store's change watch.
type Verifier struct {
	store Store
	ttl   time.Duration
	log   *slog.Logger
	now   func() time.Time

	mu    sync.RWMutex
	cache map[[sha256.Size]byte]cached // by the hash's bytes: a hit needs no hex string

	usedMu   sync.Mutex
	recorded map[string]time.Time // last time written (or queued) per key ID
	pending  map[string]time.Time
	wake     chan struct{}
}

type cached struct {
	key      Key
	version  uint64
	loadedAt time.Time
}

// lastUsedResolution is how stale last_used_at may be.
const lastUsedResolution = time.Minute

// maxCached bounds the cache; past it the cache starts over (only real keys are ever cached).
const maxCached = 100_000

// DefaultCacheTTL is how long a verified key is trusted without a lookup when NewVerifier is given no TTL.
const DefaultCacheTTL = 30 * time.Second

// NewVerifier returns a Verifier over s that trusts a verified key for at most ttl (DefaultCacheTTL when ttl is not
// positive) while s reports no change. Run it for as long as keys are verified.
func NewVerifier(s Store, ttl time.Duration, log *slog.Logger) *Verifier {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if log == nil {
		log = slog.Default()
	}
	return &Verifier{
		store: s, ttl: ttl, log: log, now: time.Now,
		cache: map[[sha256.Size]byte]cached{}, recorded: map[string]time.Time{}, pending: map[string]time.Time{},
		wake: make(chan struct{}, 1),
	}
}

// Run is the Verifier's background work: it runs the store's change watch and writes last-use times as they become
// due until ctx ends, then writes the pending ones and returns once the watch has stopped. Uses recorded after Run
// returned are not written.
func (v *Verifier) Run(ctx context.Context) error {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		v.store.Watch(ctx)
	}()
	for {
		select {
		case <-v.wake:
			v.flush()
		case <-ctx.Done():
			v.flush()
			<-watched
			return nil
		}
	}
}

// Verify authenticates a presented key. It returns ErrMalformed, ErrUnknown, ErrRevoked, ErrExpired, or another
// error when the store fails.
func (v *Verifier) Verify(ctx context.Context, plain string) (Key, error) {
	if err := Check(plain); err != nil {
		return Key{}, err
	}
	return v.verify(ctx, sum(plain), "")
}

// sum is the SHA-256 of a checked key (Len bytes), hashed from a copy on the stack: converting the string to a
// slice would allocate on every request.
func sum(plain string) [sha256.Size]byte {
	var b [Len]byte
	return sha256.Sum256(b[:copy(b[:], plain)])
}

// VerifyHash authenticates a key known by its hash (Hash), such as the key a stream token acts for. It returns
// ErrUnknown, ErrRevoked, ErrExpired, or another error when the store fails.
func (v *Verifier) VerifyHash(ctx context.Context, hash string) (Key, error) {
	b, ok := hashBytes(hash)
	if !ok {
		return Key{}, ErrUnknown // no key has it: Hash writes every hash in this form
	}
	return v.verify(ctx, b, hash)
}

// hashBytes decodes a hash as Hash writes it (lowercase hex of a SHA-256), false for anything else.
func hashBytes(hash string) (b [sha256.Size]byte, ok bool) {
	if len(hash) != hex.EncodedLen(sha256.Size) || strings.ToLower(hash) != hash {
		return b, false
	}
	_, err := hex.Decode(b[:], []byte(hash))
	return b, err == nil
}

// verify is Verify of a key by its hash's bytes; hash is their hex form, or "" to encode it when it is needed.
func (v *Verifier) verify(ctx context.Context, sum [sha256.Size]byte, hash string) (Key, error) {
	version, err := v.store.KeysVersion(ctx)
	if err != nil {
		return Key{}, err
	}
	now := v.now()
	v.mu.RLock()
	c, ok := v.cache[sum]
	v.mu.RUnlock()
	if !ok || c.version != version || now.Sub(c.loadedAt) > v.ttl {
		if hash == "" {
			hash = hex.EncodeToString(sum[:])
		}
		sk, err := v.store.ByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			v.forget(sum)
			return Key{}, ErrUnknown
		}
		if err != nil {
			return Key{}, err
		}
		c = cached{version: version, loadedAt: now, key: Key{
			Hash: hash, ID: sk.ID, WorkspaceID: sk.WorkspaceID, Name: sk.Name, Scopes: sk.Scopes,
			ExpiresAt: sk.ExpiresAt, RevokedAt: sk.RevokedAt, Kind: sk.Kind, Origins: sk.Origins,
			ScopeTarget: sk.ScopeTarget, DailyQuota: sk.DailyQuota, InstanceIDs: sk.InstanceIDs,
		}}
		if sk.Workspace != nil {
			c.key.EnabledModels = sk.Workspace.EnabledModels
		}
		v.mu.Lock()
		if len(v.cache) >= maxCached {
			v.cache = map[[sha256.Size]byte]cached{}
		}
		v.cache[sum] = c
		v.mu.Unlock()
	}
	switch {
	case c.key.RevokedAt != nil:
		return c.key, ErrRevoked
	case c.key.ExpiresAt != nil && !now.Before(*c.key.ExpiresAt):
		return c.key, ErrExpired
	}
	v.markUsed(c.key.ID, now)
	return c.key, nil
}

// Forget drops a key from the cache; call it after revoking in this process.
func (v *Verifier) Forget(plainOrHash string) {
	if Check(plainOrHash) == nil {
		v.forget(sum(plainOrHash))
	} else if b, ok := hashBytes(plainOrHash); ok {
		v.forget(b)
	}
}

func (v *Verifier) forget(sum [sha256.Size]byte) {
	v.mu.Lock()
	delete(v.cache, sum)
	v.mu.Unlock()
}

func (v *Verifier) markUsed(id string, now time.Time) {
	v.usedMu.Lock()
	last, ok := v.recorded[id]
	due := !ok || now.Sub(last) >= lastUsedResolution
	if due {
		v.recorded[id] = now
		v.pending[id] = now
	}
	v.usedMu.Unlock()
	if due {
		select {
		case v.wake <- struct{}{}:
		default:
		}
	}
}

func (v *Verifier) flush() {
	v.usedMu.Lock()
	batch := v.pending
	v.pending = map[string]time.Time{}
	v.usedMu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := v.store.TouchLastUsed(ctx, batch); err != nil {
		// Not fatal: forgetting what was recorded makes the next use of these keys write again.
		v.log.Warn("could not record API key last use", "error", err, "keys", len(batch))
		v.usedMu.Lock()
		for id := range batch {
			delete(v.recorded, id)
		}
		v.usedMu.Unlock()
	}
}
