package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/rls/runner"
)

const rlsSynopsis = "--config-dir DIR [--grpc-listen ADDR] [--http-listen ADDR] [--store URL] [flags]"

func runRLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, logs, err := parseRLSFlags(args, stderr)
	if err != nil {
		return err
	}
	return rlsUsage(runner.Run(ctx, cfg, logs.logger(stderr)))
}

// parseRLSFlags reads sluice rls's command line and environment into its
// runner's Config, checked.
func parseRLSFlags(args []string, stderr io.Writer) (*runner.Config, *logFlags, error) {
	fs := newFlagSet("rls", rlsSynopsis, stderr)
	cfg := &runner.Config{}
	cfg.AddFlags(fs)
	logs := addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, rlsUsage(err)
	}
	return cfg, logs, nil
}

// rlsUsage makes the runner's usage errors (a flag's value it refuses)
// the command's.
func rlsUsage(err error) error {
	if !errors.Is(err, runner.ErrUsage) {
		return err
	}
	return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), runner.ErrUsage.Error()+": "))
}
