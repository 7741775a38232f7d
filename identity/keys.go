package identity

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// APIKey is one accepted API key: the SHA-256 of the key, and whom it
// authenticates.
type APIKey struct {
	Hash [sha256.Size]byte
	User string
	Tier string
}

// KeyStore holds API keys by hash; it never holds a key itself. It is
// immutable and safe for concurrent use.
type KeyStore struct {
	keys map[[sha256.Size]byte]APIKey
}

// HashKey returns the hex SHA-256 of key, the form the keys file stores.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// NewKeyStore returns a store of keys. Two keys with the same hash, or a
// key without a user, are an error.
func NewKeyStore(keys ...APIKey) (*KeyStore, error) {
	s := &KeyStore{keys: make(map[[sha256.Size]byte]APIKey, len(keys))}
	for _, k := range keys {
		if k.User == "" {
			return nil, fmt.Errorf("identity: API key %x… has no user", k.Hash[:4])
		}
		if _, dup := s.keys[k.Hash]; dup {
			return nil, fmt.Errorf("identity: API key %x… listed twice", k.Hash[:4])
		}
		s.keys[k.Hash] = k
	}
	return s, nil
}

// Len returns the number of keys.
func (s *KeyStore) Len() int { return len(s.keys) }

// Lookup returns the entry of key. The key is hashed first, so the map is
// indexed by a digest the caller cannot choose, and the digests are then
// compared in constant time.
func (s *KeyStore) Lookup(key string) (APIKey, bool) {
	if s == nil || key == "" {
		return APIKey{}, false
	}
	h := sha256.Sum256([]byte(key))
	k, ok := s.keys[h]
	if !ok || subtle.ConstantTimeCompare(k.Hash[:], h[:]) != 1 {
		return APIKey{}, false
	}
	return k, true
}

// LoadKeyFile reads a keys file: one key a line, as
//
//	# sha256-hex-of-key                                               user     tier
//	9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 alice    pro
//	60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 svc-sync
//
// Fields are separated by spaces or tabs; the tier is optional; blank lines
// and lines starting with # are ignored. Use HashKey (or
// `printf %s KEY | sha256sum`) to compute the first field. The error lists
// every bad line, one a line, as "file:line: message".
func LoadKeyFile(path string) (*KeyStore, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return ParseKeyFile(path, data)
}

// ParseKeyFile parses the contents of a keys file (see LoadKeyFile); name
// is used in errors.
func ParseKeyFile(name string, data []byte) (*KeyStore, error) {
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
	}
	s := &KeyStore{keys: map[[sha256.Size]byte]APIKey{}}
	first := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			bad(n, "want \"sha256-hex user [tier]\", got %d fields", len(f))
			continue
		}
		var k APIKey
		if len(f[0]) != 2*sha256.Size {
			bad(n, "key hash is %d characters, want the %d hex digits of a SHA-256", len(f[0]), 2*sha256.Size)
			continue
		}
		if _, err := hex.Decode(k.Hash[:], []byte(f[0])); err != nil {
			bad(n, "key hash is not hex")
			continue
		}
		k.User = f[1]
		if len(f) == 3 {
			k.Tier = f[2]
		}
		if prev, dup := first[k.Hash]; dup {
			bad(n, "key hash listed twice (first at line %d)", prev)
			continue
		}
		first[k.Hash] = n
		s.keys[k.Hash] = k
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}
