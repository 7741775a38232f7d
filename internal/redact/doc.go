// Package redact is the one redactor of sluice: every store URL, DSN and
// secret-bearing flag or variable passes through it before it reaches an
// error, a log line, a metric label, a status page or --help.
//
// URL masks a URL's password (and the values of query parameters that
// name a secret). It does not trust the URL to be well formed: a password
// that holds an unencoded '#', '?', '/', '@', ':' or '%' is masked whole,
// because the password is taken to run from the first ':' after the
// scheme to the last '@' of the string. A URL without a password whose
// query holds an '@' after a host:port is masked too far; that is the
// price of never printing a password. Error masks the same secrets in
// the text of an error about the URL (net/url, for one, quotes the URL it
// cannot parse), and says so plainly when the password is not encoded.
// Secret and Value do the same for a flag's or variable's value.
//
// The package uses the standard library only, so that every layer that
// handles a URL (the Redis store, the servers, the command) can import it.
package redact
