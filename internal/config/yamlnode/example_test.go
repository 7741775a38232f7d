package yamlnode_test

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// A decoder hands each mapping's fields to handlers and gets every
// problem back, with its line and path.
func Example() {
	src := `
defaults: &defaults
  timeout: 30s
  retries: 3
server:
  <<: *defaults
  name: api
  retires: 5
  enabled: yes
  timeout: soon
`
	var w yamlnode.Walker
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		w.SyntaxError(err)
	}
	w.Fields(doc.Content[0], "", map[string]func(k, v *yaml.Node){
		"defaults": func(k, v *yaml.Node) {},
		"server": func(k, v *yaml.Node) {
			w.Fields(v, "server", map[string]func(k, v *yaml.Node){
				"name": func(k, v *yaml.Node) {
					s, _ := w.Str(v, "server.name")
					fmt.Println("name:", s)
				},
				"enabled": func(k, v *yaml.Node) {
					b, _ := w.Bool(v, "server.enabled")
					fmt.Println("enabled:", b)
				},
				"timeout": func(k, v *yaml.Node) { w.Duration(v, "server.timeout") },
				"retries": func(k, v *yaml.Node) {
					n, _ := w.Int(v, "server.retries", 0, 10)
					fmt.Println("retries:", n)
				},
			})
		},
	})
	for _, p := range w.Problems {
		fmt.Printf("line %d: %s: %s\n", p.Line, p.Path, p.Msg)
	}

	var y yamlnode.Walker
	var x any
	y.SyntaxError(yaml.Unmarshal([]byte("a: [\n"), &x))
	fmt.Printf("line %d: %s\n", y.Problems[0].Line, y.Problems[0].Msg)
	// Output:
	// name: api
	// enabled: true
	// retries: 3
	// line 8: server: unknown field "retires" (did you mean "retries"?)
	// line 10: server.timeout: want a positive duration such as "30s" or "1h30m", got "soon"
	// line 1: invalid YAML: did not find expected node content
}
