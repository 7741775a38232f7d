package docsrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, md, want string
	}{
		{"unmarked sh", "```sh\nls\n```\n", "doc.md:1: a ```sh block is neither run"},
		{"empty reason", "<!-- not run: -->\n```sh\nls\n```\n", "doc.md:2: a not-run block must say why"},
		{"console without command", "```console\nhello\n```\n", "doc.md:2: output before the first"},
		{"unclosed", "text\n```console\n$ ls\n", "doc.md:2: a block without its closing fence"},
		{"marker not adjacent", "<!-- not run: x -->\n\n```bash\nls\n```\n", "doc.md:3: a ```bash block"},
	} {
		_, err := Parse("doc.md", []byte(c.md))
		var pe *ParseError
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Parse = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	blocks, err := Parse("doc.md", []byte("```go\nfmt.Println()\n```\n````console\n$ echo a \\\n  b\na b\n$ sleep 1 &\n````\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Parse("doc.md", []byte("- item\n\n  ```console\n  $ echo a\n  a\n  ```\n")); err != nil || len(b) != 1 ||
		len(b[0].Steps) != 1 || b[0].Steps[0].Command != "echo a" || len(b[0].Steps[0].Want) != 1 || b[0].Steps[0].Want[0] != "a" {
		t.Errorf("a block in a list item: %+v, %v", b, err)
	}
	if b, err := Parse("doc.md", []byte("```\n$ ls\nx\n```\n```\nplain\n```\n")); err != nil || len(b) != 1 || b[0].Lang != "console" {
		t.Errorf("an unlabelled block of \"$ \" commands: %+v, %v; want one console block", b, err)
	}
	if len(blocks) != 1 || len(blocks[0].Steps) != 2 || blocks[0].Steps[0].Command != "echo a \\\n  b" ||
		!blocks[0].Steps[1].Background || blocks[0].Steps[1].Command != "sleep 1" {
		t.Errorf("Parse = %+v", blocks)
	}
}

func TestMatchLine(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"…", "", true},
		{"…", "anything", true},
		{"x=…", "x=1", true},
		{"x=…", "y=1", false},
		{"…s", "8.27s", true},
		{"…s", "8.27", false},
		{"a…b…c", "a-b-c", true},
		{"a…b…c", "abc", true},
		{"a…b…c", "acb", false},
		{"ab…ba", "aba", false},                             // the parts may not overlap
		{`{"a":"b", "c":[1]}`, `{"a": "b","c": [1]}`, true}, // protojson's random spaces
		{`{"a":"b"}`, `{"a":"c"}`, false},
		{"a, b", "a,b", false}, // only before a quote or a bracket
	} {
		if got := MatchLine(c.want, c.got); got != c.ok {
			t.Errorf("MatchLine(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}

// TestRun runs a block with a background server, a port to map, a "…"
// and a failing command, and checks that a wrong output is reported.
func TestRun(t *testing.T) {
	md := "```console\n" +
		"$ DOCSRUN_SERVE=127.0.0.1:8123 \"$TESTBIN\" &\n" +
		"serving on 127.0.0.1:8123\n" +
		"$ curl -s -o /dev/null -w '%{http_code} from 127.0.0.1:8123\\n' http://127.0.0.1:8123/\n" +
		"200 from 127.0.0.1:8123\n" +
		"$ date +%s\n" +
		"…\n" +
		"$ false\n" +
		"[exit 1]\n" +
		"```\n"
	blocks, err := Parse("doc.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: t.TempDir(), Timeout: 10 * time.Second, Env: append(os.Environ(), "TESTBIN="+self)}
	if err := blocks[0].Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	bad, _ := Parse("doc.md", []byte("```console\n$ echo one\ntwo\n```\n"))
	err = bad[0].Run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "doc.md:2: $ echo one: output differs at line 1") {
		t.Errorf("a wrong output: %v", err)
	}
	wrongLog, _ := Parse("doc.md", []byte("```console\n$ DOCSRUN_SERVE=127.0.0.1:8124 \"$TESTBIN\" &\nlistening on 127.0.0.1:8124\n```\n"))
	if err := wrongLog[0].Run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "its first lines differ") {
		t.Errorf("a background command's wrong log: %v", err)
	}
	slow, _ := Parse("doc.md", []byte("```console\n$ sleep 5\n```\n"))
	if err := slow[0].Run(context.Background(), Options{Dir: opts.Dir, Timeout: 200 * time.Millisecond}); err == nil ||
		!strings.Contains(err.Error(), "still running") {
		t.Errorf("a command past the timeout: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("```console\n$ ls\nout\n```\n"))
	f.Add([]byte("<!-- not run: why -->\n```sh\nx\n```\n"))
	f.Add([]byte("````console\n$ a \\\nb &\n````\n```go\n```"))
	f.Add([]byte("```\n```sh\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		blocks, _ := Parse("f.md", md)
		for _, b := range blocks {
			if b.Line < 1 {
				t.Fatalf("block at line %d", b.Line)
			}
			for _, s := range b.Steps {
				if s.Line <= b.Line {
					t.Fatalf("step at line %d in a block at %d", s.Line, b.Line)
				}
			}
		}
	})
}

// TestDocs runs every runnable block of README.md and docs/*.md against a
// freshly built sluice, in a temporary directory holding a copy of
// examples/, and fails on a block that is neither run nor marked.
func TestDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	var all []Block
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		blocks, err := Parse(rel, src)
		if err != nil {
			t.Error(err)
		}
		all = append(all, blocks...)
	}
	if testing.Short() {
		t.Skip("-short: builds sluice and runs the docs' commands")
	}
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if out, err := goCommand(root, "build", "-o", filepath.Join(bin, "sluice"), "./cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	dir := filepath.Join(work, "repo")
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "docs", "sim"), 0o755); err != nil { // where the sims' --svg write
		t.Fatal(err)
	}
	// grpcurl (docs/rls.md) is where go install puts it: scripts/test
	// installs it there.
	gobin := filepath.Join(goEnv(t, root, "GOPATH"), "bin")
	if b := goEnv(t, root, "GOBIN"); b != "" {
		gobin = b
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH") + string(os.PathListSeparator) + "/usr/sbin" + string(os.PathListSeparator) + gobin,
		"HOME=" + work, "LANG=C.UTF-8", "TZ=UTC"}
	ran, notRun := 0, 0
	for _, b := range all {
		if b.NotRun != "" {
			notRun++
			continue
		}
		if b.Lang != "console" {
			continue // refused by Parse above
		}
		ran++
		t.Run(b.File+":"+itoa(b.Line), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := b.Run(ctx, Options{Dir: dir, Env: env, Timeout: 20 * time.Second}); err != nil {
				t.Error(err)
			}
		})
	}
	t.Logf("docs: %d shell blocks run, %d marked not run", ran, notRun)
}
