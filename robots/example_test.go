package robots_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/robots"
)

func Example() {
	c := robots.New(robots.Options{
		UserAgent: "sluice/0.3 (+https://example.org/bot)",
		// Here a canned file; package httpclient passes its polite transport.
		Fetch: func(ctx context.Context, u string) (*http.Response, error) {
			body := "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, nil
		},
	})
	for _, raw := range []string{"https://example.com/docs/", "https://example.com/private/x"} {
		u, _ := url.Parse(raw)
		d, _ := c.Check(context.Background(), u)
		fmt.Println(u.Path, d.Allowed, d.CrawlDelay, d.Reason)
	}
	// Output:
	// /docs/ true 2s allowed
	// /private/x false 2s disallowed by robots.txt
}
