package storeurl_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storeurl"
)

// decide applies a 2-a-minute limit three times and checks the answers.
func decide(t *testing.T, st *storeurl.Store, key string) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		d, err := st.Apply(ctx, ratelimit.Request{Key: key, Limit: ratelimit.PerMinute(2), N: 1})
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v; want allowed only for the first 2", i, d, err)
		}
	}
}

// TestRedisTLSFromURL: a Redis that requires client certificates, with
// the CA, certificate and key named in the rediss:// URL.
func TestRedisTLSFromURL(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("redis CA")
	srvCert, srvKey, err := ca.Server("redis").Write(dir, "redis")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.Client("sluice", []string{"sluice"}).Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	redistest.Start(t, "--tls-port", strconv.Itoa(port), "--tls-cert-file", srvCert, "--tls-key-file", srvKey,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "yes")
	base := "rediss://127.0.0.1:" + strconv.Itoa(port)
	opts := storeurl.Options{Redis: redisstore.Options{Timeout: 10 * time.Second, RequireAtStart: true}}

	st, err := storeurl.Open(context.Background(), base+"?tls_ca="+caFile+"&tls_cert="+cliCert+"&tls_key="+cliKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	decide(t, st, "tls-url")
	if strings.Contains(st.URL(), "tls_") && !strings.Contains(st.URL(), cliCert) {
		t.Errorf("URL() = %q", st.URL())
	}

	// Without the client certificate the server refuses the handshake;
	// without the CA, the client refuses the server.
	for _, u := range []string{base + "?tls_ca=" + caFile, base + "?tls_cert=" + cliCert + "&tls_key=" + cliKey} {
		if st, err := storeurl.Open(context.Background(), u, opts); err == nil {
			st.Close()
			t.Errorf("%s: opened", u)
		}
	}
}

// startSentinel runs `redis-server FILE --sentinel` monitoring master as
// NAME, and returns its address once it answers and knows the master.
func startSentinel(t *testing.T, master *redistest.Server, name string) string {
	t.Helper()
	bin, _, err := redistest.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile sentinel.log\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 60000\nsentinel auth-pass %s s3cret\n",
		port, dir, name, master.Port, name, name)), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
	for {
		if reply, err := command(addr, "SENTINEL", "get-master-addr-by-name", name); err == nil && strings.Contains(reply, strconv.Itoa(master.Port)) {
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
			t.Fatalf("sentinel on %s did not report the master in a minute:\n%s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// command sends one RESP command and returns the reply's lines.
func command(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
	}
	r := bufio.NewReader(c)
	first, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	out := first
	if strings.HasPrefix(first, "*") {
		n, _ := strconv.Atoi(strings.TrimSpace(first[1:]))
		for range 2 * n {
			l, err := r.ReadString('\n')
			if err != nil {
				return out, err
			}
			out += l
		}
	}
	return out, nil
}

// TestRedisSentinel: a redis-sentinel:// URL reaches the master through
// a real Sentinel, and decisions are made there.
func TestRedisSentinel(t *testing.T) {
	master := redistest.Start(t)
	// The password after the start: redistest checks the start with a
	// PING without one.
	if reply, err := command(master.Addr, "CONFIG", "SET", "requirepass", "s3cret"); err != nil || !strings.HasPrefix(reply, "+OK") {
		t.Fatalf("CONFIG SET requirepass: %q, %v", reply, err)
	}
	sentinel := startSentinel(t, master, "mymaster")
	// A second address that answers nothing: rueidis tries the
	// sentinels in turn.
	dead, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("redis-sentinel://:s3cret@%s,127.0.0.1:%d/mymaster", sentinel, dead)
	st, err := storeurl.Open(context.Background(), u, storeurl.Options{Redis: redisstore.Options{Timeout: 10 * time.Second, RequireAtStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Contains(st.URL(), "s3cret") {
		t.Errorf("URL() shows the password: %s", st.URL())
	}
	decide(t, st, "through-sentinel")
	if ok, detail := st.Ready(); !ok {
		t.Fatalf("not ready: %s", detail)
	}
	// The state is on the master.
	n := dbsize(t, master.Addr, "s3cret")
	if n == 0 {
		t.Fatal("no key on the master after deciding through the sentinel")
	}
	// A master name the sentinel does not know fails.
	bad := fmt.Sprintf("redis-sentinel://:s3cret@%s/othermaster", sentinel)
	if st, err := storeurl.Open(context.Background(), bad, storeurl.Options{Redis: redisstore.Options{Timeout: 2 * time.Second, RequireAtStart: true}}); err == nil {
		st.Close()
		t.Fatal("an unknown master set opened")
	}
}

// dbsize counts the master's keys over one authenticated connection.
func dbsize(t *testing.T, addr, password string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$6\r\nDBSIZE\r\n", len(password), password)
	r := bufio.NewReader(c)
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
		t.Fatalf("AUTH: %q, %v", l, err)
	}
	l, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(l, ":") {
		t.Fatalf("DBSIZE: %q, %v", l, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(l[1:]))
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
