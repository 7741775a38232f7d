// Command scale-propagate measures how long a rule change takes to reach a
// fleet: several `sluice serve` processes sharing one rules file, several
// `sluice rls` sharing one config directory, and several `sluice rls`
// fed by one xDS management server, each timed from the change to the
// first answer by the new limit, against the seed's 30 s SLO. See
// docs/scale.md.
//
//	cd bench && go run ./scale/cmd/scale-propagate -instances 3 -changes 20
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/bench/scale"
)

func main() {
	instances := flag.Int("instances", 3, "processes per mode")
	changes := flag.Int("changes", 20, "limit changes timed per mode")
	modes := flag.String("modes", strings.Join(scale.Modes, ","), "comma-separated: serve (rules_files), rls (--config-dir), rls-xds (an xDS management server)")
	interval := flag.Duration("interval", 0, "serve's --watch-interval and rls's --poll (0: their default, 1s)")
	root := flag.String("root", "..", "the sluice module to build cmd/sluice from")
	bin := flag.String("sluice", "", "use this sluice binary instead of building one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *bin == "" {
		dir, err := os.MkdirTemp("", "scale-propagate-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if *bin, err = scale.BuildSluice(ctx, *root, dir); err != nil {
			log.Fatal(err)
		}
	}
	iv := "default (1s)"
	if *interval > 0 {
		iv = interval.String()
	}
	fmt.Printf("%d instances per mode, %d changes each, polling interval %s, SLO 30s\n\n", *instances, *changes, iv)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tinstances\tchanges\tp50\tp90\tmax\tfleet p50\tfleet max\tSLO 30s\t")
	for _, m := range strings.Split(*modes, ",") {
		res, err := scale.Propagation(ctx, scale.PropagationOptions{Binary: *bin, Mode: strings.TrimSpace(m),
			Instances: *instances, Changes: *changes, Interval: *interval, Log: os.Stderr})
		if err != nil {
			log.Fatalf("%s: %v", m, err)
		}
		all, fleet := res.All(), res.Fleet()
		met := "met"
		if scale.Quantile(fleet, 1) > 30*time.Second {
			met = "MISSED"
		}
		r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", res.Mode, res.Instances, len(res.Lags),
			r(scale.Quantile(all, 0.5)), r(scale.Quantile(all, 0.9)), r(scale.Quantile(all, 1)),
			r(scale.Quantile(fleet, 0.5)), r(scale.Quantile(fleet, 1)), met)
		fmt.Fprintf(os.Stderr, "%s: lags %v\n", res.Mode, all)
	}
	tw.Flush()
}
