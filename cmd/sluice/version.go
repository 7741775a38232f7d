package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// buildInfo is what the binary says of its own build
// (runtime/debug.ReadBuildInfo): the module version, and the VCS revision,
// commit time and whether the tree had uncommitted changes, which the go
// command records when it builds inside a repository (not with
// -buildvcs=false, nor with go run or go test).
type buildInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// readBuildInfo reads the running binary's build information.
func readBuildInfo() buildInfo {
	b := buildInfo{Module: "github.com/sluicehq/sluice", Version: "(unknown)", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	b.GoVersion = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line of sluice --version:
//
//	sluice (devel) revision 71effbc6a1e2…, 2026-11-25T18:09:59Z, modified; go1.26.0 linux/amd64
func (b buildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "sluice %s", b.Version)
	if b.Revision != "" {
		fmt.Fprintf(&s, " revision %s", b.Revision)
		if b.Time != "" {
			fmt.Fprintf(&s, ", %s", b.Time)
		}
		if b.Modified {
			s.WriteString(", modified")
		}
	}
	fmt.Fprintf(&s, "; %s %s", b.GoVersion, b.Platform)
	return s.String()
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "[--json]", stderr)
	asJSON := fs.Bool("json", false, "print the build information as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	b := readBuildInfo()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(b)
	}
	_, err := fmt.Fprintln(stdout, b)
	return err
}
