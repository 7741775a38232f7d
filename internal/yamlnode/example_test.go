package yamlnode_test

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/yamlnode"
)

// A decoder reports where a problem is and what it found there.
func Example() {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("limits:\n  per_user: [100]\n"), &doc); err != nil {
		fmt.Println(err)
		return
	}
	v := doc.Content[0].Content[1].Content[1]
	fmt.Printf("line %d: %s: want a number, got %s\n", v.Line, yamlnode.Join("limits", "per_user"), yamlnode.Kind(v))

	var x any
	line, msg := yamlnode.ErrorLine(yaml.Unmarshal([]byte("a: [\n"), &x))
	fmt.Printf("line %d: invalid YAML: %s\n", line, msg)
	// Output:
	// line 2: limits.per_user: want a number, got a list
	// line 1: invalid YAML: did not find expected node content
}
