package gateway_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// The example configs in examples/ are valid, files and all.
func TestExampleConfigs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../examples/gateway*.yaml")
	must(t, err)
	if len(files) < 2 {
		t.Fatalf("examples: %v, want at least 2 gateway configs", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		if err := gateway.Check(f, data); err != nil {
			t.Errorf("Check(%s) = %v", f, err)
		}
	}
}
