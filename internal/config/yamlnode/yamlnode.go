package yamlnode

import (
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Kind names n as a problem shows what it got instead of what it wanted:
// "a mapping", "a list", "null", a scalar's text quoted, or "nothing".
func Kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// Join returns the path of field inside path: "a.b", or field alone at the
// top.
func Join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

var errLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ErrorLine splits an error of yaml.Unmarshal into the line it names (0
// when it names none) and its message, without yaml.v3's "yaml: " and
// "line N: " prefixes.
func ErrorLine(err error) (line int, msg string) {
	msg = err.Error()
	if m := errLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, strings.TrimPrefix(msg, "yaml: ")
}
