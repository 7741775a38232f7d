package rls

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sluicehq/sluice/bench/internal/pin"
)

// GHZModule and GHZVersion pin ghz, the gRPC load tool the sweep measures
// with beside its own client: its newest release on the Go module proxy.
const (
	GHZModule  = "github.com/bojand/ghz"
	GHZVersion = "v0.93.0"
)

// ShouldRateLimit is the method ghz calls.
const ShouldRateLimit = "envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit"

// InstallGHZ installs ghz (go install GHZModule/cmd/ghz@GHZVersion) into
// dir, unless it is there already, and returns its path. The first build
// takes minutes; give the same dir again to keep it.
func InstallGHZ(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "ghz-"+GHZVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := filepath.Join(dir, "ghz-build")
	cmd := exec.CommandContext(ctx, "go", "install", GHZModule+"/cmd/ghz@"+GHZVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("install ghz: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "ghz"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Protoset returns the serialized FileDescriptorSet of the rate limit
// service (rls.proto and every file it imports, dependencies first), from
// the descriptors go-control-plane compiled in: what ghz's --protoset
// reads.
func Protoset() ([]byte, error) {
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imps := f.Imports()
		for i := range imps.Len() {
			add(imps.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(pb.File_envoy_service_ratelimit_v3_rls_proto)
	return proto.Marshal(&set)
}

// GHZ runs ghz against the server at addr with the load l: l.Conns
// connections, l.Callers workers, l.Rate requests a second (0: as fast as
// the workers go), for l.Duration, each request one or more descriptors
// of the "load" key over l.Keys values (ghz's template
// {{randomInt 0 Keys}}: random where Measure cycles). cpu, when not nil, is read before ghz
// starts and after it exits; LoadCPU is ghz's own CPU time. cpus, when not
// empty, is where ghz may run (as the load generator under -pin).
func GHZ(ctx context.Context, bin, protoset, name, addr string, l Load, cpu func() (server, redis time.Duration), cpus []int) (Result, error) {
	var descs []string
	for range max(1, l.Descriptors) {
		descs = append(descs, fmt.Sprintf(`{"entries":[{"key":"load","value":"k{{randomInt 0 %d}}"}]}`, max(1, l.Keys)))
	}
	data := `{"domain":"bench","descriptors":[`
	for i, d := range descs {
		if i > 0 {
			data += ","
		}
		data += d
	}
	data += "]}"
	args := []string{
		"--insecure", "--protoset", protoset, "--call", ShouldRateLimit,
		"-d", data, "-O", "json",
		"-c", strconv.Itoa(max(1, l.Callers)), "--connections", strconv.Itoa(max(1, l.Conns)),
		"-z", l.Duration.String(), "-n", "0",
		"--timeout", "10s",
	}
	if l.Rate > 0 {
		args = append(args, "--rps", strconv.Itoa(int(l.Rate+0.5)))
	}
	if len(cpus) > 0 {
		args = append(args, "--cpus", strconv.Itoa(len(cpus)))
	}
	args = append(args, addr)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var s0, r0 time.Duration
	if cpu != nil {
		s0, r0 = cpu()
	}
	if err := cmd.Start(); err != nil {
		return Result{}, err
	}
	if len(cpus) > 0 {
		if err := pin.Process(cmd.Process.Pid, cpus); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return Result{}, err
		}
	}
	err := cmd.Wait()
	r := Result{Name: name}
	if cpu != nil {
		s1, r1 := cpu()
		r.ServerCPU, r.RedisCPU = s1-s0, r1-r0
	}
	if err != nil && out.Len() == 0 {
		return Result{}, fmt.Errorf("ghz: %v\n%s", err, errb.String())
	}
	if ps := cmd.ProcessState; ps != nil {
		r.LoadCPU = ps.UserTime() + ps.SystemTime()
	}
	var rep struct {
		Count   int64         `json:"count"`
		Total   time.Duration `json:"total"`
		Rps     float64       `json:"rps"`
		Latency []struct {
			Percentage int           `json:"percentage"`
			Latency    time.Duration `json:"latency"`
		} `json:"latencyDistribution"`
		StatusCodes map[string]int64 `json:"statusCodeDistribution"`
		ErrorDist   map[string]int64 `json:"errorDistribution"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return Result{}, fmt.Errorf("ghz output: %v\n%.500s\n%s", err, out.String(), errb.String())
	}
	r.Elapsed = rep.Total
	for code, n := range rep.StatusCodes {
		if code == "OK" {
			r.Requests += n
		} else {
			r.Errors += n
		}
	}
	for msg, n := range rep.ErrorDist {
		if r.FirstErr == nil {
			r.FirstErr = fmt.Errorf("%s (%d)", msg, n)
		}
	}
	for _, p := range rep.Latency {
		switch p.Percentage {
		case 50:
			r.P50 = p.Latency
		case 99:
			r.P99 = p.Latency
		}
	}
	return r, nil
}
