package sfv_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/server/sfv"
)

func ExampleAppendString() {
	b := sfv.AppendString(nil, `tier "gold"`)
	fmt.Println(string(append(b, ";q=100;w=60"...)))
	// Output: "tier \"gold\"";q=100;w=60
}
