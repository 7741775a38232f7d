package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Defaults of JWKSOptions.
const (
	DefaultJWKSRefresh     = 15 * time.Minute
	DefaultJWKSMinInterval = 30 * time.Second
	DefaultJWKSTimeout     = 5 * time.Second
	DefaultJWKSMaxBytes    = 256 << 10
	DefaultJWKSMaxKeys     = 64
)

// JWKSOptions configures a JWKS.
type JWKSOptions struct {
	// URL is where the set is fetched: https://, or http:// to a loopback
	// address (a test's IdP, a sidecar), as CheckJWKSURL says.
	URL string
	// Algorithm is the tokens' algorithm, RS256 or ES256: only the set's
	// keys fit for it are used.
	Algorithm string
	// Refresh is how old the keys may get before the next token that
	// uses them fetches the set again (DefaultJWKSRefresh).
	Refresh time.Duration
	// MinInterval is the least time between two fetches, whatever asks:
	// a token with a kid the set does not hold asks for one, and a flood
	// of made-up kids gets one fetch an interval (DefaultJWKSMinInterval).
	MinInterval time.Duration
	// Timeout bounds a fetch (DefaultJWKSTimeout).
	Timeout time.Duration
	// MaxBytes and MaxKeys bound the set: a bigger one is refused whole
	// (DefaultJWKSMaxBytes, DefaultJWKSMaxKeys).
	MaxBytes int64
	MaxKeys  int
	// Client fetches the set; nil means a client of the JWKS's own,
	// which follows no redirect.
	Client *http.Client
	// OnError, when not nil, is told of each failed fetch (the keys held
	// before keep serving).
	OnError func(error)
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// JWKS is a JSON Web Key Set fetched from a URL and cached. It fetches
// nothing until a token needs a key: then, when it holds no keys, when
// they are older than Refresh, or when none has the token's kid, it
// fetches the set again, at most once every MinInterval (tokens that find
// a fetch under way use the keys held, or wait for it when they have
// none of theirs). A set that cannot be fetched, is too big, or holds no
// usable key is refused and the keys held before keep serving; with no
// keys held, every token is refused (ReasonKeysUnavailable): the JWKS
// fails closed. Keys are parsed by go-jose; a key that does not parse,
// is not for signing, names another algorithm, is not public, or is unfit
// for the algorithm (checkKey) is left out.
//
// A JWKS is safe for concurrent use, holds no goroutine, and may be
// shared by several Resolvers (the gateway keeps one across reloads).
type JWKS struct {
	opts    JWKSOptions
	client  *http.Client
	keys    atomic.Pointer[keySet]
	mu      sync.Mutex // held by a fetch
	lastTry time.Time  // under mu: the last fetch's start
	fetches atomic.Int64
}

// keySet is one fetch's usable keys.
type keySet struct {
	at    time.Time
	byKID map[string][]any
	all   []any
}

// find returns the keys with ID kid; a token without kid may use the
// set's only key.
func (ks *keySet) find(kid string) []any {
	if kid == "" && len(ks.all) == 1 {
		return ks.all
	}
	return ks.byKID[kid]
}

// CheckJWKSURL reports what is wrong with a JWKS URL: it must be https://,
// or http:// to a loopback address (127.0.0.1, ::1, localhost), since the
// keys it serves decide who is who.
func CheckJWKSURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("identity: JWKS URL %q: want an https:// URL", s)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("identity: JWKS URL %q: http:// only to a loopback address; the keys must come over https://", s)
	}
	return fmt.Errorf("identity: JWKS URL %q: want an https:// URL", s)
}

// NewJWKS returns a JWKS for opts. It fetches nothing yet.
func NewJWKS(opts JWKSOptions) (*JWKS, error) {
	if err := CheckJWKSURL(opts.URL); err != nil {
		return nil, err
	}
	if opts.Algorithm != RS256 && opts.Algorithm != ES256 {
		return nil, fmt.Errorf("identity: JWKS keys for %q: want RS256 or ES256", opts.Algorithm)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultJWKSRefresh
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultJWKSMinInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultJWKSTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultJWKSMaxBytes
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultJWKSMaxKeys
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	j := &JWKS{opts: opts, client: opts.Client}
	if j.client == nil {
		j.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("identity: JWKS: redirect not followed")
		}}
	}
	return j, nil
}

// Fetches returns how many fetches of the set have started.
func (j *JWKS) Fetches() int64 { return j.fetches.Load() }

// lookup returns the keys for a token's kid, fetching the set when it
// must (see JWKS).
func (j *JWKS) lookup(kid string) ([]any, error) {
	ks := j.keys.Load()
	now := j.opts.Now()
	if ks != nil {
		keys := ks.find(kid)
		if len(keys) > 0 && now.Sub(ks.at) < j.opts.Refresh {
			return keys, nil
		}
		// Stale: one token refreshes, the others use what is held
		// meanwhile (and a failed fetch leaves it held).
		if len(keys) > 0 && !j.mu.TryLock() {
			return keys, nil
		}
		if len(keys) == 0 {
			j.mu.Lock()
		}
	} else {
		j.mu.Lock()
	}
	ks = j.refreshLocked(ks, now)
	j.mu.Unlock()
	switch {
	case ks == nil:
		return nil, unauthorized(ReasonKeysUnavailable, "no JWKS keys (the set could not be fetched)")
	case len(ks.find(kid)) == 0 && kid == "":
		return nil, unauthorized(ReasonUnknownKeyID, "token has no kid and the JWKS has %d keys", len(ks.all))
	case len(ks.find(kid)) == 0:
		return nil, unauthorized(ReasonUnknownKeyID, "no JWKS key with the token's kid")
	}
	return ks.find(kid), nil
}

// refreshLocked fetches the set unless another fetch replaced seen
// meanwhile or the last one started less than MinInterval ago, and
// returns the keys held then. j.mu is held.
func (j *JWKS) refreshLocked(seen *keySet, now time.Time) *keySet {
	if cur := j.keys.Load(); cur != seen {
		return cur
	}
	if !j.lastTry.IsZero() && now.Sub(j.lastTry) < j.opts.MinInterval {
		return seen
	}
	j.lastTry = now
	j.fetches.Add(1)
	ks, err := j.fetch()
	if err != nil {
		if j.opts.OnError != nil {
			j.opts.OnError(err)
		}
		return seen
	}
	ks.at = now
	j.keys.Store(ks)
	return ks
}

// fetch gets and parses the set.
func (j *JWKS) fetch() (*keySet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.opts.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("identity: JWKS %s: %w", j.opts.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := j.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("identity: JWKS: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("identity: JWKS %s: status %d", j.opts.URL, res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, j.opts.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("identity: JWKS %s: %w", j.opts.URL, err)
	}
	if int64(len(body)) > j.opts.MaxBytes {
		return nil, fmt.Errorf("identity: JWKS %s: larger than %d bytes", j.opts.URL, j.opts.MaxBytes)
	}
	return j.parse(body)
}

// parse reads a set's usable keys.
func (j *JWKS) parse(body []byte) (*keySet, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("identity: JWKS %s: not a JWK set: %w", j.opts.URL, err)
	}
	if len(raw.Keys) > j.opts.MaxKeys {
		return nil, fmt.Errorf("identity: JWKS %s: %d keys, more than %d", j.opts.URL, len(raw.Keys), j.opts.MaxKeys)
	}
	ks := &keySet{byKID: map[string][]any{}}
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		if k.UnmarshalJSON(r) != nil || !k.Valid() || !k.IsPublic() ||
			(k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != j.opts.Algorithm) ||
			checkKey(j.opts.Algorithm, k.Key) != nil {
			continue
		}
		ks.all = append(ks.all, k.Key)
		ks.byKID[k.KeyID] = append(ks.byKID[k.KeyID], k.Key)
	}
	if len(ks.all) == 0 {
		return nil, fmt.Errorf("identity: JWKS %s: no usable %s key among its %d", j.opts.URL, j.opts.Algorithm, len(raw.Keys))
	}
	return ks, nil
}
