package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/gateway"
)

// The Kubernetes artefacts: deploy/k8s's plain manifests and the Helm
// chart of deploy/helm/sluice, rendered with several value sets. Every
// document is decoded strictly into the Kubernetes API types (a misspelt
// or misplaced field fails, as kubectl apply --validate=strict would), and
// every sluice container is checked against the binary: its args and
// SLUICE_* variables parse as its command's, its probes ask the right
// listener for the right path, its config passes sluice check, its grace
// period covers the drain (checkManifest), and it runs as non-root on a
// read-only root.

// k8sObjects is one manifest's documents, decoded.
type k8sObjects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	pdbs        []*policyv1.PodDisruptionBudget
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeManifest decodes every document of b strictly into its kind's
// API type; a kind this test does not know fails it.
func decodeManifest(t *testing.T, name string, b []byte) *k8sObjects {
	t.Helper()
	objs := &k8sObjects{}
	for i, doc := range docSep.Split(string(b), -1) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		var into any
		switch head.APIVersion + " " + head.Kind {
		case " ":
			continue // empty (a comment, or a template that rendered nothing)
		case "apps/v1 Deployment":
			into = appendNew(&objs.deployments)
		case "v1 Service":
			into = appendNew(&objs.services)
		case "v1 ConfigMap":
			into = appendNew(&objs.configMaps)
		case "v1 Secret":
			into = appendNew(&objs.secrets)
		case "policy/v1 PodDisruptionBudget":
			into = appendNew(&objs.pdbs)
		default:
			t.Fatalf("%s: document %d: %s %s: a kind this test does not know", name, i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: document %d (%s): %v", name, i, head.Kind, err)
		}
	}
	return objs
}

// appendNew appends a new T to l and returns it.
func appendNew[T any](l *[]*T) *T {
	v := new(T)
	*l = append(*l, v)
	return v
}

// secretValue is key of the Secret or ConfigMap named name, if objs has it.
func (o *k8sObjects) secretValue(name, key string) (string, bool) {
	for _, s := range o.secrets {
		if s.Name == name {
			if v, ok := s.StringData[key]; ok {
				return v, true
			}
			if v, ok := s.Data[key]; ok {
				return string(v), true
			}
		}
	}
	for _, c := range o.configMaps {
		if c.Name == name {
			v, ok := c.Data[key]
			return v, ok
		}
	}
	return "", false
}

// checkK8s checks objs and returns the sluice commands its Deployments run.
func checkK8s(t *testing.T, name string, b []byte) []string {
	t.Helper()
	objs := decodeManifest(t, name, b)
	if checkManifest(t, name, b) != len(objs.deployments) {
		t.Errorf("%s: the stop timeouts of %d Deployments checked, want each", name, len(objs.deployments))
	}
	var cmds []string
	for _, d := range objs.deployments {
		where := name + ": Deployment " + d.Name
		pod := d.Spec.Template
		if !selects(d.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("%s: selector %v does not select its pods %v", where, d.Spec.Selector.MatchLabels, pod.Labels)
		}
		checkPodSecurity(t, where, &pod.Spec)
		if n := len(pod.Spec.Containers); n != 1 {
			t.Fatalf("%s: %d containers, want sluice's alone", where, n)
		}
		c := &pod.Spec.Containers[0]
		cmd := checkContainer(t, where, objs, c, pod.Spec.Volumes)
		cmds = append(cmds, cmd)
		checkServed(t, where, objs, d, c)
	}
	return cmds
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPodSecurity(t *testing.T, where string, spec *corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: the pod does not ask runAsNonRoot", where)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container %s: want readOnlyRootFilesystem and no privilege escalation", where, c.Name)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: container %s: want a memory request and limit", where, c.Name)
		}
	}
}

// probeWant is what each command's probes ask: readiness and liveness
// paths, on the listener of which flag.
var probeWant = map[string]struct{ ready, live, flag string }{
	"serve": {"/readyz", "/healthz", "admin-listen"},
	"rls":   {"/readyz", "/healthcheck", "http-listen"},
}

// checkContainer parses the container's args and environment as its
// command does, checks its probes against the listeners they give and its
// config with sluice check, and returns the command.
func checkContainer(t *testing.T, where string, objs *k8sObjects, c *corev1.Container, vols []corev1.Volume) string {
	t.Helper()
	where += ": container " + c.Name
	if len(c.Command) > 0 || len(c.Args) == 0 {
		t.Fatalf("%s: command %q args %q: want the image's entrypoint with args", where, c.Command, c.Args)
	}
	cmd := c.Args[0]
	want, ok := probeWant[cmd]
	if !ok {
		t.Fatalf("%s: runs sluice %q", where, cmd)
	}
	env := containerEnv(t, where, objs, c)
	flags := parseAs(t, where, cmd, c.Args[1:], env)
	if file := checkConfigFiles(t, where, objs, cmd, c, vols, flags); file != "" && cmd == "serve" {
		// Without the flags, the listeners are the config's.
		cfg, err := gateway.ParseFile(file)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if flags["listen"] == "" {
			flags["listen"] = cfg.Listen
		}
		if flags["admin-listen"] == "" {
			flags["admin-listen"] = cfg.AdminListen
		}
	}
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"readiness", want.ready, c.ReadinessProbe}, {"liveness", want.live, c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", where, p.kind)
			continue
		}
		got := p.probe.HTTPGet
		port := portNumber(t, where, c, got.Port.String())
		if _, lp, _ := strings.Cut(flags[want.flag], ":"); got.Path != p.path || strconv.Itoa(port) != lp {
			t.Errorf("%s: %s probe asks %s on port %d, want %s on --%s's %q", where, p.kind, got.Path, port, p.path, want.flag, flags[want.flag])
		}
	}
	return cmd
}

// containerEnv is the container's environment, a Secret's value read
// from the Secret when the manifest has it, else a stand-in.
func containerEnv(t *testing.T, where string, objs *k8sObjects, c *corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			var ok bool
			v, ok = objs.secretValue(r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			if !ok {
				if r.SecretKeyRef.Optional == nil || !*r.SecretKeyRef.Optional {
					t.Logf("%s: %s from Secret %s, not in the manifest: a stand-in", where, e.Name, r.SecretKeyRef.Name)
				}
				v = "stand-in"
				if e.Name == "SLUICE_STORE" {
					v = "redis://127.0.0.1:6379/0"
				}
			}
		} else if e.ValueFrom != nil {
			t.Fatalf("%s: %s: only values and Secrets' keys are checked", where, e.Name)
		}
		env[e.Name] = v
	}
	return env
}

// parseAs parses args and env as sluice cmd does (its SLUICE_*
// variables, unknown ones refused), and returns every flag's value.
func parseAs(t *testing.T, where, cmd string, args []string, env map[string]string) map[string]string {
	t.Helper()
	oldLookup, oldEnviron := lookupEnv, environ
	defer func() { lookupEnv, environ = oldLookup, oldEnviron }()
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	environ = func() []string {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return kv
	}
	values := map[string]string{}
	var stderr bytes.Buffer
	var err error
	switch cmd {
	case "serve":
		var f *serveFlags
		if f, err = parseServeFlags(args, &stderr); err == nil {
			values["config"], values["listen"], values["admin-listen"] = f.configFile, f.listen, f.adminListen
		}
	case "rls":
		cfg, _, perr := parseRLSFlags(args, &stderr)
		if err = perr; err == nil {
			values["config-dir"], values["http-listen"], values["grpc-listen"] = cfg.Where()
		}
	}
	if err != nil {
		t.Fatalf("%s: sluice %s %q with its environment: %v\n%s", where, cmd, args, err, stderr.String())
	}
	return values
}

// portNumber resolves a probe's or Service's port, a number or a name of
// the container's ports.
func portNumber(t *testing.T, where string, c *corev1.Container, port string) int {
	t.Helper()
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	for _, p := range c.Ports {
		if p.Name == port {
			return int(p.ContainerPort)
		}
	}
	t.Errorf("%s: no port named %q", where, port)
	return 0
}

// checkConfigFiles writes the files the container mounts from the
// manifest's ConfigMaps and Secrets into a directory and runs sluice check
// on its config there: the gateway's config file, or the RLS's rules
// directory. It returns the copy of the config file or directory, or ""
// when the manifest holds none of the container's files.
func checkConfigFiles(t *testing.T, where string, objs *k8sObjects, cmd string, c *corev1.Container, vols []corev1.Volume, flags map[string]string) string {
	t.Helper()
	root := t.TempDir()
	mounted := 0
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("%s: mount %s: no such volume", where, m.Name)
		}
		name := ""
		switch v := vols[i]; {
		case v.ConfigMap != nil:
			name = v.ConfigMap.Name
		case v.Secret != nil:
			name = v.Secret.SecretName
		}
		if m.SubPath != "" {
			t.Errorf("%s: mount %s with subPath: the kubelet never updates it, so the server never reloads it", where, m.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, key := range objectKeys(objs, name) {
			v, _ := objs.secretValue(name, key)
			if err := os.WriteFile(filepath.Join(dir, key), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			mounted++
		}
	}
	if mounted == 0 {
		return "" // mounted from a Secret the manifest does not hold (existingSecret)
	}
	target := flags["config"]
	if cmd == "rls" {
		target = flags["config-dir"]
	}
	file := filepath.Join(root, target)
	if cmd == "serve" {
		// Absolute paths in the config are the pod's: make them the copy's.
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: --config %s is not in the mounted volumes: %v", where, target, err)
		}
		b = regexp.MustCompile(`(?m)(:\s+)(/etc/sluice/)`).ReplaceAll(b, []byte("${1}"+root+"${2}"))
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check", file}, &out, &out); err != nil {
		t.Errorf("%s: sluice check %s: %v\n%s", where, target, err, out.String())
	}
	return file
}

// objectKeys are the keys of the ConfigMap or Secret named name in objs.
func objectKeys(objs *k8sObjects, name string) []string {
	var keys []string
	for _, s := range objs.secrets {
		if s.Name == name {
			for k := range s.StringData {
				keys = append(keys, k)
			}
			for k := range s.Data {
				keys = append(keys, k)
			}
		}
	}
	for _, c := range objs.configMaps {
		if c.Name == name {
			for k := range c.Data {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// checkServed: a Service and a PodDisruptionBudget select d's pods, and
// the Service's target ports are the container's.
func checkServed(t *testing.T, where string, objs *k8sObjects, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	labels := d.Spec.Template.Labels
	services := 0
	for _, s := range objs.services {
		if !selects(s.Spec.Selector, labels) {
			continue
		}
		services++
		for _, p := range s.Spec.Ports {
			portNumber(t, where+": Service "+s.Name, c, p.TargetPort.String())
		}
	}
	pdbs := 0
	for _, p := range objs.pdbs {
		if p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, labels) {
			pdbs++
		}
	}
	if services != 1 || pdbs != 1 {
		t.Errorf("%s: %d Services and %d PodDisruptionBudgets select its pods, want one each", where, services, pdbs)
	}
}

// TestKubernetesManifests checks deploy/k8s/gateway.yaml, the gateway's
// plain manifests.
func TestKubernetesManifests(t *testing.T) {
	p := filepath.Join("..", "..", "deploy", "k8s", "gateway.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := checkK8s(t, p, b); !slices.Equal(got, []string{"serve"}) {
		t.Errorf("%s runs %q, want sluice serve", p, got)
	}
}

// helmBinary is helm: on PATH, else where scripts/test's go install puts
// it. Missing, the test skips, or fails under CI=true.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "no helm on PATH nor in $(go env GOPATH)/bin (scripts/test installs it)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + ": required under CI=true")
	}
	t.Skip(msg)
	return ""
}

// TestHelmChart renders deploy/helm/sluice with helm template for each
// value set and checks what it renders as the plain manifests.
func TestHelmChart(t *testing.T) {
	helm := helmBinary(t)
	chart := filepath.Join("..", "..", "deploy", "helm", "sluice")
	if out, err := exec.Command(helm, "lint", "--strict", chart).CombinedOutput(); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		set  []string
		want []string // the commands rendered, in order
		warn bool     // the notes warn of per-pod memory stores
	}{
		{"default", nil, []string{"serve"}, true},
		{"rls only", []string{"gateway.enabled=false", "rls.enabled=true"}, []string{"rls"}, true},
		{"both, Redis and secrets", []string{"rls.enabled=true", "storeURL=redis://:pw@redis.redis.svc:6379/0",
			"secrets.adminToken=t0ken", "secrets.apiKeys=457c6a6848a0bbde7277ab01d5b82d9dbd88e96ca457819589954be69b69b1ad alice pro"}, []string{"serve", "rls"}, false},
		{"existingSecret", []string{"rls.enabled=true", "existingSecret=mine", "gateway.pdb.minAvailable=1"}, []string{"serve", "rls"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "rel", chart, "--namespace", "sluice"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(helm, args...)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			if got := checkK8s(t, tc.name, out); !slices.Equal(got, tc.want) {
				t.Errorf("renders %q, want %q", got, tc.want)
			}
			if tc.name == "both, Redis and secrets" && !bytes.Contains(out, []byte("store: redis://:pw@")) {
				t.Errorf("the gateway's config has not storeURL as its store:\n%s", out)
			}
			notes := helmNotes(t, helm, chart, args[3:])
			for _, cmd := range tc.want {
				if line := "sluice " + cmd + ": "; !strings.Contains(notes, line) {
					t.Errorf("NOTES.txt has no %q line:\n%s", line, notes)
				}
			}
			if warned := strings.Contains(notes, "WARNING: no storeURL"); warned != tc.warn {
				t.Errorf("NOTES.txt warns of memory stores: %v, want %v:\n%s", warned, tc.warn, notes)
			}
		})
	}
}

// helmNotes renders the chart's NOTES.txt, which helm template leaves
// out, from a copy of the chart where it is a named template that a YAML
// template quotes.
func helmNotes(t *testing.T, helm, chart string, args []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sluice")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	tpl := filepath.Join(dir, "templates")
	notes, err := os.ReadFile(filepath.Join(tpl, "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"NOTES.txt":  "",
		"_notes.tpl": `{{- define "test.notes" -}}` + string(notes) + `{{- end -}}`,
		"notes.yaml": `notes: {{ include "test.notes" . | toJson }}`,
	} {
		if err := os.WriteFile(filepath.Join(tpl, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args = append([]string{"template", "rel", dir, "--show-only", "templates/notes.yaml"}, args...)
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("the notes: %v\n%s", err, out)
	}
	return doc.Notes
}
