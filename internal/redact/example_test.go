package redact_test

import (
	"fmt"
	"net/url"

	"github.com/sluicehq/sluice/internal/redact"
)

func ExampleURL() {
	fmt.Println(redact.URL("redis://app:s3cret@redis.internal:6379/0"))
	fmt.Println(redact.URL("redis://:s3c#ret@redis.internal:6379/0"))
	// Output:
	// redis://app:xxxxx@redis.internal:6379/0
	// redis://:xxxxx@redis.internal:6379/0
}

func ExampleError() {
	raw := "redis://app:s3cret@redis.internal:port"
	_, err := url.Parse(raw)
	fmt.Println(redact.Error(raw, err))
	// Output:
	// parse "redis://app:xxxxx@redis.internal:port": invalid port ":port" after host
}
