package httpclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/retry"
)

// Classify is the default classifier. It reads a response (or the error
// that replaced it) as a Signal:
//
//	transport error: timeout       Timeout
//	transport error: other         Neutral (retried, but says nothing about load)
//	429, 503                       Throttled, unless it is a challenge page
//	403 that is a rate limit       Throttled (see below)
//	500, 502, 504                  Overloaded
//	403, challenge pages           Block
//	anything else                  Success
//
// A 403 is a rate limit, not a block, when it says when to come back: a
// Retry-After field, or an announced budget that is spent (X-RateLimit-
// Remaining: 0 with a reset, or the IETF RateLimit field's r=0), or a body
// that names a rate limit ("secondary rate limit", "rate limit exceeded"),
// as GitHub answers its secondary limits. Waiting gets past those, so they
// are retried after the server's delay.
//
// A challenge page is what anti-bot layers send instead of a rate limit: a
// cf-mitigated header, an x-amzn-waf-action of captcha or challenge, or an
// HTML body mentioning a captcha or challenge in its first 4 KiB. Waiting
// does not get past one, so it is not retried. To look at the body,
// Classify reads those bytes and puts them back in front of the rest.
func Classify(resp *http.Response, err error) adaptive.Signal {
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return adaptive.Timeout
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return adaptive.Timeout
		}
		return adaptive.Neutral
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if Challenge(resp) {
			return adaptive.Block
		}
		return adaptive.Throttled
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		return adaptive.Overloaded
	case http.StatusForbidden:
		if RateLimited(resp) {
			return adaptive.Throttled
		}
		return adaptive.Block
	}
	return adaptive.Success
}

var rateLimitMarks = [][]byte{[]byte("rate limit"), []byte("ratelimit"), []byte("rate-limit"), []byte("too many requests")}

// RateLimited reports whether a 403 is a rate limit rather than a refusal
// (see Classify). It may read up to 4 KiB of the body, which it puts back.
func RateLimited(resp *http.Response) bool {
	if _, ok := retry.RetryAfter(resp.Header, time.Now()); ok {
		return true
	}
	if b, ok := ParseBudget(resp.Header, time.Now()); ok && b.Exhausted() {
		return true
	}
	head := peek(resp)
	lower := bytes.ToLower(head)
	for _, m := range rateLimitMarks {
		if bytes.Contains(lower, m) {
			return true
		}
	}
	return false
}

// peekLimit is how much of a 429/503 body Challenge reads.
const peekLimit = 4 << 10

var challengeMarks = [][]byte{
	[]byte("captcha"), []byte("challenge-platform"), []byte("cf-chl"),
	[]byte("/cdn-cgi/challenge"), []byte("are you a robot"), []byte("verify you are human"),
}

// Challenge reports whether resp is an anti-bot challenge page rather than a
// rate limit (see Classify). It may read up to 4 KiB of an HTML body, which
// it puts back.
func Challenge(resp *http.Response) bool {
	h := resp.Header
	if h.Get("Cf-Mitigated") != "" {
		return true
	}
	switch h.Get("X-Amzn-Waf-Action") {
	case "captcha", "challenge":
		return true
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "text/html" {
		return false
	}
	lower := bytes.ToLower(peek(resp))
	for _, m := range challengeMarks {
		if bytes.Contains(lower, m) {
			return true
		}
	}
	return false
}

// peek returns up to peekLimit bytes from the start of resp's body and
// puts them back in front of the rest, so that the caller still reads the
// whole body. Peeking twice returns the same bytes.
func peek(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	if p, ok := resp.Body.(*peekedBody); ok {
		return p.head
	}
	head := make([]byte, peekLimit)
	n, err := io.ReadFull(resp.Body, head)
	head = head[:n]
	rest := io.Reader(resp.Body)
	if err != nil { // EOF or a read error: the body is all in head (or broken)
		rest = &errReader{err: err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(head), rest), Closer: resp.Body, head: head}
	return head
}

type peekedBody struct {
	io.Reader
	io.Closer
	head []byte
}

// errReader replays the error that ended the peek: EOF as EOF, and a real
// read error as itself.
type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) {
	if r.err == io.ErrUnexpectedEOF {
		return 0, io.EOF
	}
	return 0, r.err
}
