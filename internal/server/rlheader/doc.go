// Package rlheader writes the rate limit headers of both front doors (the
// gateway's responses and the RLS's response_headers_to_add) from one list
// of policies, so that a mode means the same through either.
package rlheader
