package docsrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Block is one fenced shell block of a Markdown file.
type Block struct {
	File string // as given to Parse
	Line int    // the opening fence's line, from 1
	Lang string // the fence's info string: console, sh, bash, shell
	// NotRun is the reason of a "<!-- not run: REASON -->" comment on the
	// line before the fence; such a block is shown, not run.
	NotRun string
	Steps  []Step // a console block's commands
}

// Step is one command of a console block and the output it must print.
type Step struct {
	Line       int    // the "$ " line
	Command    string // without the prompt; continued lines joined with newlines
	Background bool   // the command ends with " &": a server, left running until the block ends
	// Want is what the command prints; a background command's is the
	// first lines it prints (its start-up log), checked at the block's end.
	Want []string
}

// shellLangs are the fence info strings Parse treats as shell.
var shellLangs = map[string]bool{"console": true, "sh": true, "bash": true, "shell": true, "zsh": true, "shell-session": true}

var notRunRE = regexp.MustCompile(`^<!--\s*not run:\s*(.*?)\s*-->\s*$`)

// ParseError is a block that is neither runnable nor marked not run, or a
// console block Parse cannot read.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Parse returns the shell blocks of the Markdown src, or every problem:
// a shell block (```sh, ```bash, …) must be a ```console block of "$ "
// commands, or say why it is not run with "<!-- not run: REASON -->" on the
// line before its fence; a console block must start with a command.
func Parse(file string, src []byte) ([]Block, error) {
	var (
		blocks []Block
		errs   []error
		prev   string // the last line before the current one
		in     *Block
		fence  string
		indent int  // the opening fence's indentation, removed from the block's lines
		cont   bool // the last command ends with a backslash
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), " \t\r")
		if in == nil {
			trimmed := strings.TrimLeft(text, " ")
			if f, info, ok := openFence(trimmed); ok {
				indent = len(text) - len(trimmed)
				lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
				if lang == "" && promptNext(src, line) {
					lang = "console" // an unlabelled block of "$ " commands is one too
				}
				if !shellLangs[lang] {
					fence = f
					in = &Block{Lang: ""} // a block of another language: skipped
				} else {
					fence = f
					in = &Block{File: file, Line: line, Lang: lang}
					if m := notRunRE.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
						in.NotRun = m[1]
						if in.NotRun == "" {
							errs = append(errs, &ParseError{file, line, "a not-run block must say why"})
						}
					}
				}
				cont = false
			}
			prev = text
			continue
		}
		if strings.TrimLeft(text, " ") == fence {
			b := in
			in = nil
			prev = text
			if b.Lang == "" {
				continue
			}
			switch {
			case b.NotRun != "":
			case b.Lang != "console":
				errs = append(errs, &ParseError{file, b.Line, fmt.Sprintf("a ```%s block is neither run (```console with \"$ \" commands) nor marked <!-- not run: REASON -->", b.Lang)})
			case len(b.Steps) == 0:
				errs = append(errs, &ParseError{file, b.Line, "a ```console block without a \"$ \" command"})
			}
			blocks = append(blocks, *b)
			continue
		}
		prev = text
		if in.Lang != "console" || in.NotRun != "" {
			continue
		}
		for i := 0; i < indent && strings.HasPrefix(text, " "); i++ {
			text = text[1:] // a block in a list item
		}
		switch {
		case cont:
			s := &in.Steps[len(in.Steps)-1]
			s.Command += "\n" + text
			cont = strings.HasSuffix(text, "\\")
		case strings.HasPrefix(text, "$ ") || text == "$":
			cmd := strings.TrimSpace(strings.TrimPrefix(text, "$"))
			in.Steps = append(in.Steps, Step{Line: line, Command: cmd})
			cont = strings.HasSuffix(cmd, "\\")
		case len(in.Steps) == 0:
			if text != "" {
				errs = append(errs, &ParseError{file, line, "output before the first \"$ \" command"})
			}
		default:
			s := &in.Steps[len(in.Steps)-1]
			s.Want = append(s.Want, text)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &ParseError{file, line, err.Error()})
	}
	if in != nil && in.Lang != "" {
		errs = append(errs, &ParseError{file, in.Line, "a block without its closing fence"})
	}
	for i := range blocks {
		b := &blocks[i]
		for j := range b.Steps {
			s := &b.Steps[j]
			if c, ok := strings.CutSuffix(s.Command, "&"); ok && !strings.HasSuffix(c, "&") {
				s.Command, s.Background = strings.TrimSpace(c), true
			}
			s.Want = trimTrailingEmpty(s.Want)
		}
	}
	return blocks, errors.Join(errs...)
}

// promptNext reports whether the line after line (numbered from 1) of src
// starts with a "$ " prompt.
func promptNext(src []byte, line int) bool {
	rest := src
	for range line {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
	return bytes.HasPrefix(rest, []byte("$ "))
}

// openFence reports whether line opens a fenced block: its fence (three or
// more backticks) and info string.
func openFence(line string) (fence, info string, ok bool) {
	n := 0
	for n < len(line) && line[n] == '`' {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	return line[:n], line[n:], true
}

func trimTrailingEmpty(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Options says where and how a block runs.
type Options struct {
	// Dir is the working directory of every command.
	Dir string
	// Env is the commands' environment (PATH must find the binaries the
	// docs name). Nil means the process's.
	Env []string
	// Timeout bounds each foreground command and each wait for a
	// background command's ports. Zero means 30 s.
	Timeout time.Duration
}

// loopbackPort finds the ports a block names on the loopback interface:
// 127.0.0.1:PORT, localhost:PORT and [::1]:PORT.
var loopbackPort = regexp.MustCompile(`(127\.0\.0\.1|localhost|\[::1\]):([0-9]{2,5})\b`)

// Run runs b's commands in order with bash, each as the docs show it, and
// compares what each prints (stdout and stderr together, in order) with
// the lines the docs show after it. Four normalisations, and only these:
//
//   - "go run ./cmd/sluice " in a command runs the sluice found on PATH
//     (the freshly built binary), so that docs may show either form;
//   - every port b names on the loopback interface (127.0.0.1:8080,
//     localhost:8080) is replaced, in the commands and in the expected
//     output alike, by a free port, so that blocks run beside other
//     servers;
//   - "…" in an expected line matches any run of characters (timings,
//     dates, counts that change from run to run);
//   - a space after ',' or ':' before '"', '{' or '[' is ignored on both
//     sides: Go's protojson (sluice rls's /json) adds such spaces at random
//     from one build to the next, on purpose.
//
// Trailing spaces are ignored. A command that exits non-zero prints a last
// line "[exit N]", which the docs must show. A background command ("cmd &")
// is left running until the block ends (then its process group is
// killed); Run waits until every port it names accepts connections, and at
// the block's end compares the first lines it printed with the ones the
// docs show after it (its start-up log, say).
func (b *Block) Run(ctx context.Context, opts Options) error {
	if b.NotRun != "" || b.Lang != "console" {
		return nil
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	ports, err := b.freePorts()
	if err != nil {
		return err
	}
	subst := func(s string) string {
		s = strings.ReplaceAll(s, "go run ./cmd/sluice ", "sluice ")
		return loopbackPort.ReplaceAllStringFunc(s, func(m string) string {
			sub := loopbackPort.FindStringSubmatch(m)
			return sub[1] + ":" + ports[sub[2]]
		})
	}
	var bg []*exec.Cmd
	defer func() {
		for _, c := range bg {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		}
	}()
	var bgOut []*syncBuffer
	var bgSteps []Step
	for _, s := range b.Steps {
		cmdText := subst(s.Command)
		where := fmt.Sprintf("%s:%d: $ %s", b.File, s.Line, s.Command)
		if s.Background {
			c := exec.Command("bash", "-c", cmdText)
			c.Dir, c.Env = opts.Dir, opts.Env
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out := &syncBuffer{}
			c.Stdout, c.Stderr = out, out
			if err := c.Start(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			bg = append(bg, c)
			bgOut = append(bgOut, out)
			bgSteps = append(bgSteps, s)
			if err := waitPorts(ctx, cmdText, opts.Timeout); err != nil {
				return fmt.Errorf("%s: %w; it printed:\n%s", where, err, out)
			}
			continue
		}
		got, err := runOne(ctx, cmdText, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		want := make([]string, len(s.Want))
		for i, w := range s.Want {
			want[i] = subst(w)
		}
		if i, ok := matchLines(want, got); !ok {
			return fmt.Errorf("%s: output differs at line %d\n--- docs:\n%s\n--- got:\n%s", where, i+1,
				strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	}
	for k, s := range bgSteps {
		if len(s.Want) == 0 {
			continue
		}
		want := make([]string, len(s.Want))
		for i, w := range s.Want {
			want[i] = subst(w)
		}
		got := bgOut[k].lines(ctx, len(want), opts.Timeout)
		if i, ok := matchLines(want, got); !ok {
			return fmt.Errorf("%s:%d: $ %s &: its first lines differ at line %d\n--- docs:\n%s\n--- got:\n%s", b.File, s.Line,
				s.Command, i+1, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	}
	return nil
}

// syncBuffer is a background command's output, written by its process
// while Run reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the first n complete lines written, waiting up to timeout
// for them; fewer when they do not come.
func (b *syncBuffer) lines(ctx context.Context, n int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		all := strings.SplitAfter(b.String(), "\n")
		var got []string
		for _, l := range all {
			if strings.HasSuffix(l, "\n") {
				got = append(got, strings.TrimRight(l, " \t\r\n"))
			}
		}
		if len(got) >= n || time.Now().After(deadline) || ctx.Err() != nil {
			return got[:min(n, len(got))]
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePorts maps each loopback port b names to a free one.
func (b *Block) freePorts() (map[string]string, error) {
	ports := map[string]string{}
	for _, s := range b.Steps {
		for _, text := range append([]string{s.Command}, s.Want...) {
			for _, m := range loopbackPort.FindAllStringSubmatch(text, -1) {
				if _, ok := ports[m[2]]; ok {
					continue
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return nil, err
				}
				_, p, _ := net.SplitHostPort(ln.Addr().String())
				ln.Close()
				ports[m[2]] = p
			}
		}
	}
	return ports, nil
}

func runOne(ctx context.Context, cmdText string, opts Options) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmdText)
	c.Dir, c.Env = opts.Dir, opts.Env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("still running after %v; it printed:\n%s", opts.Timeout, out.String())
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if out.Len() == 0 {
		lines = nil
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t\r")
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		lines = append(lines, "[exit "+strconv.Itoa(ee.ExitCode())+"]")
	case err != nil:
		return nil, err
	}
	return trimTrailingEmpty(lines), nil
}

// waitPorts waits until every loopback port named in cmdText accepts a
// connection.
func waitPorts(ctx context.Context, cmdText string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, m := range loopbackPort.FindAllStringSubmatch(cmdText, -1) {
		addr := net.JoinHostPort("127.0.0.1", m[2])
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("nothing listens on %s after %v", addr, timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// matchLines compares got with want line by line ("…" in want matches any
// run of characters); on a difference it returns the first line that
// differs.
func matchLines(want, got []string) (int, bool) {
	for i := range max(len(want), len(got)) {
		if i >= len(want) || i >= len(got) || !MatchLine(want[i], got[i]) {
			return i, false
		}
	}
	return 0, true
}

var jsonSpace = regexp.MustCompile(`([,:]) (["{\[])`)

// MatchLine reports whether got matches the docs' line want, where "…"
// matches any run of characters (none included), and a space after ',' or
// ':' before '"', '{' or '[' is ignored.
func MatchLine(want, got string) bool {
	want, got = jsonSpace.ReplaceAllString(want, "$1$2"), jsonSpace.ReplaceAllString(got, "$1$2")
	parts := strings.Split(want, "…")
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return len(got) >= len(last) && strings.HasSuffix(got, last)
}

// Files returns the paths of README.md and docs/*.md under root.
func Files(root string) ([]string, error) {
	files := []string{root + "/README.md"}
	entries, err := os.ReadDir(root + "/docs")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			files = append(files, root+"/docs/"+e.Name())
		}
	}
	return files, nil
}
