package docsrun_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/docsrun"
)

func ExampleParse() {
	md := "Check a file:\n\n" +
		"```console\n" +
		"$ sluice check rules.yaml\n" +
		"rules.yaml: ok (rules, domain edge)\n" +
		"```\n\n" +
		"<!-- not run: needs Envoy -->\n" +
		"```sh\n" +
		"envoy -c envoy.yaml\n" +
		"```\n"
	blocks, err := docsrun.Parse("doc.md", []byte(md))
	if err != nil {
		fmt.Println(err)
	}
	for _, b := range blocks {
		if b.NotRun != "" {
			fmt.Printf("line %d: not run: %s\n", b.Line, b.NotRun)
			continue
		}
		for _, s := range b.Steps {
			fmt.Printf("line %d: $ %s -> %q\n", s.Line, s.Command, s.Want)
		}
	}
	// Output:
	// line 4: $ sluice check rules.yaml -> ["rules.yaml: ok (rules, domain edge)"]
	// line 9: not run: needs Envoy
}

func ExampleMatchLine() {
	fmt.Println(docsrun.MatchLine("fetched 100 URLs in …s", "fetched 100 URLs in 8.27s"))
	fmt.Println(docsrun.MatchLine("time=… level=INFO msg=…", "time=2026-11-25T18:00:00Z level=WARN msg=x"))
	// Output:
	// true
	// false
}
