package yamlnode

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestKind(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("m: {a: 1}\nl: [1]\nn: null\ns: 'x\"y'\ni: 5\n"), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	want := map[string]string{"m": "a mapping", "l": "a list", "n": "null", "s": `"x\"y"`, "i": `"5"`}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i].Value, root.Content[i+1]
		if got := Kind(v); got != want[k] {
			t.Errorf("Kind(%s) = %s; want %s", k, got, want[k])
		}
	}
	if got := Kind(&yaml.Node{}); got != "nothing" {
		t.Errorf("Kind of a zero node = %s; want nothing", got)
	}
}

func TestJoin(t *testing.T) {
	if got := Join("", "a"); got != "a" {
		t.Errorf(`Join("", "a") = %q`, got)
	}
	if got := Join("a[2]", "b"); got != "a[2].b" {
		t.Errorf(`Join("a[2]", "b") = %q`, got)
	}
}

func TestErrorLine(t *testing.T) {
	var v any
	err := yaml.Unmarshal([]byte("a: 1\nb: [\n"), &v)
	if err == nil {
		t.Fatal("no error from a broken list")
	}
	line, msg := ErrorLine(err)
	if line != 2 || msg == "" || msg == err.Error() {
		t.Fatalf("ErrorLine(%q) = %d, %q; want line 2 and the message alone", err, line, msg)
	}
	if line, msg := ErrorLine(errors.New("yaml: control characters are not allowed")); line != 0 || msg != "control characters are not allowed" {
		t.Fatalf("ErrorLine without a line = %d, %q", line, msg)
	}
}
