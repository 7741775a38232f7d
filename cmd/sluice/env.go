package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/config/didyoumean"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/rls/runner"
)

// Every flag of every command also reads an environment variable: the
// flag's name in upper case with '-' as '_', after SLUICE_ (--max-keys is
// SLUICE_MAX_KEYS). A flag on the command line wins over its variable, and
// the variable over the default. An empty variable is as if unset. A value
// the flag refuses is a usage error naming the variable.
//
// A SLUICE_* variable that is none of the command's (nor one it reads
// apart from its flags: otherEnv) stops it with a did-you-mean: a typo
// would otherwise leave its flag on the default (sluice rls listening on
// every interface).
//
// A command may also read another program's variables (sluice rls reads
// envoyproxy/ratelimit's: rls/runner/env.go); they come after SLUICE_*.

// envPrefix starts the name of every flag's variable.
const envPrefix = "SLUICE_"

// lookupEnv reads the environment (os.LookupEnv); environ lists it.
var (
	lookupEnv = os.LookupEnv
	environ   = os.Environ
)

// otherEnv are the SLUICE_* variables a command reads that are no flag's,
// by flag set name.
var otherEnv = map[string][]string{
	"sluice serve": {control.TokenEnv},
	"sluice rls":   {control.TokenEnv},
}

// envVar is the variable of the flag named name.
func envVar(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// foreignEnv reads another program's variables for a command: the flag
// values they give, and notes on variables read that set no flag (say why
// they need none). A variable it cannot honour is an error naming it.
type foreignEnv struct {
	// program names the variables' program in --help and messages.
	program string
	read    func(lookup func(string) (string, bool), fs *flag.FlagSet) ([]runner.EnvSetting, []string, error)
	// vars lists, by flag name, the variables that may set that flag.
	vars func() map[string][]string
}

// foreignEnvs are the commands that read another program's variables, by
// flag set name.
var foreignEnvs = map[string]foreignEnv{
	"sluice rls": {program: "envoyproxy/ratelimit's", read: runner.ReadUpstreamEnv, vars: runner.UpstreamVarsByFlag},
}

// annotateUsage appends each flag's variables to its usage, once.
func annotateUsage(fs *flag.FlagSet) {
	var others map[string][]string
	if fe, ok := foreignEnvs[fs.Name()]; ok {
		others = fe.vars()
	}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == versionFlag || strings.Contains(f.Usage, "(env "+envPrefix) {
			return
		}
		note := "(env " + envVar(f.Name)
		if vs := others[f.Name]; len(vs) > 0 {
			note += "; " + foreignEnvs[fs.Name()].program + " " + strings.Join(vs, ", ")
		}
		f.Usage += " " + note + ")"
	})
}

// applyEnv sets every flag of fs not given on the command line from its
// SLUICE_* variable, then from the command's foreign variables.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || f.Name == versionFlag {
			return
		}
		name := envVar(f.Name)
		v, ok := lookupEnv(name)
		if !ok || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, badEnv(name, f.Name, v, err))
			return
		}
		given[f.Name] = true
	})
	errs = append(errs, unknownEnv(fs)...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fe, ok := foreignEnvs[fs.Name()]
	if !ok {
		return nil
	}
	sets, notes, err := fe.read(lookupEnv, fs)
	if err != nil {
		return err
	}
	for _, s := range sets {
		if given[s.Flag] {
			continue
		}
		if fs.Lookup(s.Flag) == nil {
			return fmt.Errorf("%s: sluice has no --%s to take it", s.From, s.Flag)
		}
		if err := fs.Set(s.Flag, s.Value); err != nil {
			return badEnv(s.From, s.Flag, s.Value, err)
		}
	}
	addEnvNotes(fs, notes)
	return nil
}

// unknownEnv refuses every set SLUICE_* variable that is not fs's, with
// the closest of fs's as a did-you-mean. Values are never printed.
func unknownEnv(fs *flag.FlagSet) []error {
	names := otherEnv[fs.Name()]
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != versionFlag {
			names = append(names, envVar(f.Name))
		}
	})
	var unknown []string
	for _, kv := range environ() {
		name, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && v != "" && !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	var errs []error
	for _, name := range unknown {
		msg := name + ": " + fs.Name() + " reads no such variable"
		if c := didyoumean.Closest(name, names); c != "" {
			msg += "; did you mean " + c + "?"
		}
		errs = append(errs, errors.New(msg))
	}
	return errs
}

// badEnv says that variable name's value v does not suit --flagName.
func badEnv(name, flagName, v string, err error) error {
	if redact.Secret(flagName) || redact.Secret(name) {
		return fmt.Errorf("%s: invalid value for --%s", name, flagName)
	}
	return fmt.Errorf("%s=%q: invalid value for --%s: %v", name, redact.URL(v), flagName, redact.Error(v, err))
}

// envNotes holds, by flag set, what reading the environment has to say
// (variables read that needed no flag), for the command's logger to log
// once it exists (logFlags.logger).
var envNotes = struct {
	sync.Mutex
	m map[*flag.FlagSet][]string
}{m: map[*flag.FlagSet][]string{}}

func addEnvNotes(fs *flag.FlagSet, notes []string) {
	if len(notes) == 0 {
		return
	}
	envNotes.Lock()
	defer envNotes.Unlock()
	envNotes.m[fs] = append(envNotes.m[fs], notes...)
}

// takeEnvNotes returns and forgets fs's notes, sorted.
func takeEnvNotes(fs *flag.FlagSet) []string {
	envNotes.Lock()
	defer envNotes.Unlock()
	n := envNotes.m[fs]
	delete(envNotes.m, fs)
	sort.Strings(n)
	return n
}
