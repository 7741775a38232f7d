// Package robots is a polite client's robots.txt (RFC 9309): fetched once
// per origin, cached, and consulted before each request.
//
// A Cache answers whether a URL may be fetched by a user agent and with
// what Crawl-delay. It follows RFC 9309 and Google's reading of it:
//
//	2xx            the file's rules, for the group that best matches the agent's product token
//	3xx            followed (up to 5 redirects, by the Fetch function's client)
//	4xx but 429    no file: everything allowed
//	429, 5xx,
//	network error  unreachable: everything disallowed, asked again after ErrorTTL
//
// Answers are cached for TTL (RFC 9309: no longer than 24 hours), one
// fetch per origin at a time however many requests ask, at most MaxSize
// bytes read (500 KiB, the least the RFC requires parsing), and at most
// MaxOrigins origins kept. Parsing is github.com/temoto/robotstxt's, a
// maintained parser with Google's longest-match precedence.
//
// Package httpclient uses a Cache when its Options.Robots is set: a
// disallowed URL fails at once with an error matching ErrDisallowed, and a
// Crawl-delay becomes the host's rate ceiling. The library works without
// it.
package robots
