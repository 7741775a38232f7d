package gateway

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// A denial section is the answer to a caller over a rate limit or its
// in-flight cap (httplimit.Denial), at the top level for every route and
// on a route for its own (the route's replaces the top level's whole):
//
//	denial:
//	  status: 503                         # 400-599; default 429
//	  body: '{"error": "slow down", "policy": "{policy}", "retry_after": {retry_after}}'
//	  content_type: application/json     # default text/plain; charset=utf-8
//
// Without a body the answer stays application/problem+json, with the
// status in it. The shedders' and adaptive limit's 503s and a store that
// cannot decide keep their problem+json answers.

// denial decodes a denial section.
func (d *decoder) denial(n *yaml.Node, path string) *httplimit.Denial {
	var status int
	var body, ct string
	var statusLine, bodyLine, ctLine int
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"status": func(k, v *yaml.Node) {
			status, statusLine = int(d.integer(v, yamlnode.Join(path, "status"), 400, 599)), v.Line
		},
		"body": func(k, v *yaml.Node) {
			body, bodyLine = d.str(v, yamlnode.Join(path, "body")), v.Line
		},
		"content_type": func(k, v *yaml.Node) {
			ct, ctLine = d.str(v, yamlnode.Join(path, "content_type")), v.Line
		},
	})
	if statusLine == 0 && bodyLine == 0 && ctLine == 0 {
		d.add(n.Line, path, "want status or body (or drop denial: the default is 429 with a problem+json body)")
		return nil
	}
	den, err := httplimit.NewDenial(status, body, "")
	if err != nil {
		d.add(bodyLine, yamlnode.Join(path, "body"), "%v", err)
		return nil
	}
	if ctLine == 0 {
		return den
	}
	if den, err = httplimit.NewDenial(status, body, ct); err != nil {
		d.add(ctLine, yamlnode.Join(path, "content_type"), "%v", err)
		return nil
	}
	return den
}
