package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// command is one subcommand; each lives in its own file.
type command struct {
	name    string
	summary string
	// run executes the command. args excludes the command name. It returns
	// errUsage (wrapped, with the message) for bad usage, which run prints
	// with the command's usage and main turns into exit 2. Given --help it
	// must print its usage to stderr and return flag.ErrHelp before doing
	// anything else: run calls it so to print the usage after a message.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are sluice's subcommands, in the order --help lists them.
func commands() []command {
	return []command{
		{name: "serve", summary: "run the rate limiting gateway (a reverse proxy with per-identity limits)", run: runServe},
		{name: "rls", summary: "run a drop-in Envoy rate limit service (envoyproxy/ratelimit's gRPC API and config files)", run: runRLS},
		{name: "fetch", summary: "fetch URLs politely: per-host limits, AIMD, backoff, Retry-After", run: runFetch},
		{name: "sim", summary: "run a simulation (brooker, objectstore, aimd, buckets, windows) on sluice's own code", run: runSim},
		{name: "check", summary: "validate gateway configs and envoyproxy/ratelimit rules files offline", run: runCheck},
		{name: "version", summary: "print the version, the VCS revision and the Go version sluice was built with", run: runVersion},
	}
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// errUsage marks an error caused by bad command-line usage (exit status 2).
var errUsage = errors.New("usage")

// errVersion is what a command returns when given --version: run prints
// what sluice version prints, and the command does nothing else.
var errVersion = errors.New("version asked")

// versionFlag is the --version every command's flag set has; no
// environment variable sets it.
const versionFlag = "version"

// shownError is a usage error whose message and usage have already been
// printed to stderr, so that nothing prints them twice.
type shownError struct{ error }

func (e shownError) Unwrap() error { return e.error }

// shown marks err as already printed.
func shown(err error) error { return shownError{err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, asRatelimit(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil // before stop, which cancels ctx too
	stop()
	if code := exitCode(err, interrupted, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// asRatelimit returns args as sluice runs them when invoked as argv0:
// named ratelimit, as envoyproxy/ratelimit's binary is (/bin/ratelimit in
// its image and in the Deployment Envoy Gateway generates), sluice is
// sluice rls unless args name a command.
func asRatelimit(argv0 string, args []string) []string {
	if filepath.Base(argv0) != "ratelimit" {
		return args
	}
	if len(args) > 0 {
		if _, ok := lookup(args[0]); ok || args[0] == "--version" || args[0] == "-version" {
			return args
		}
	}
	return append([]string{"rls"}, args...)
}

// exitCode prints err (unless run already did) and returns the exit
// status: 0, 1 for a failure, 2 for bad usage, 130 when a signal
// interrupted a command that then failed (as a shell reports Ctrl-C).
func exitCode(err error, interrupted bool, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2 // run printed the message and the usage
	}
	fmt.Fprintln(stderr, "sluice:", err)
	if interrupted {
		return 130
	}
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintln(stdout, readBuildInfo())
		return nil
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, errVersion) {
		_, err = fmt.Fprintln(stdout, readBuildInfo())
		return err
	}
	var done shownError
	if errors.Is(err, errUsage) && !errors.As(err, &done) {
		// Say what is wrong, then how the command is used: its --help.
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": "); msg != errUsage.Error() {
			fmt.Fprintf(stderr, "sluice %s: %s\n\n", c.name, msg)
		}
		c.run(ctx, []string{"--help"}, stderr, stderr)
		return shown(err)
	}
	return err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice: rate limits for both sides of HTTP 429")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: sluice COMMAND [flags]   (sluice COMMAND --help for its flags)")
	fmt.Fprintln(w, "       sluice --version")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool(versionFlag, false, "print what sluice version prints, and do nothing else")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sluice %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, then sets the flags args does not give from the
// environment (env.go), mapping flag errors to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	annotateUsage(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		// The flag package printed the message and the usage.
		return shown(fmt.Errorf("%w: %v", errUsage, err))
	}
	if f := fs.Lookup(versionFlag); f != nil && f.Value.String() == "true" {
		return errVersion
	}
	if err := applyEnv(fs); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// logFlags are --log-format and --log-level, which every server command
// has; logger builds the command's one logger from them.
type logFlags struct {
	fs     *flag.FlagSet
	format string
	level  slog.Level
}

// addLogFlags adds --log-format and --log-level to fs.
func addLogFlags(fs *flag.FlagSet) *logFlags {
	l := &logFlags{fs: fs, format: "text", level: slog.LevelInfo}
	fs.Var(logFormatValue{&l.format}, "log-format", "the `FORMAT` of log lines: text (key=value) or json (one JSON object a line)")
	fs.Var(logLevelValue{&l.level}, "log-level", "the least `LEVEL` logged: debug, info, warn or error")
	return l
}

// logger returns a logger writing to w as the flags say, and logs what
// reading the environment had to say (variables that needed no flag).
func (l *logFlags) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if l.format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	log := slog.New(h)
	for _, n := range takeEnvNotes(l.fs) {
		log.Info(l.fs.Name()+": environment", "note", n)
	}
	return log
}

// logFormatValue is --log-format: text or json.
type logFormatValue struct{ p *string }

func (v logFormatValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v logFormatValue) Set(s string) error {
	switch s = strings.ToLower(s); s {
	case "text", "json":
		*v.p = s
		return nil
	}
	return fmt.Errorf("want text or json")
}

// logLevelValue is --log-level: debug, info, warn or error.
type logLevelValue struct{ p *slog.Level }

func (v logLevelValue) String() string {
	if v.p == nil {
		return ""
	}
	return strings.ToLower(v.p.String())
}

func (v logLevelValue) Set(s string) error {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return fmt.Errorf("want debug, info, warn or error")
	}
	*v.p = l
	return nil
}
