package redisstore_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestResetAndSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, url string }{
		{"standalone", redistest.Shared(t).URL()},
		{"cluster", redistest.SharedCluster(t).URL()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := prefix() + "reset-test-" + tc.name + ":" // of its own: a run leaves its keys charged
			a, err := redisstore.Open(ctx, tc.url, redisstore.Options{Prefix: prefix, RequireAtStart: true, DenyCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := redisstore.Open(ctx, tc.url, redisstore.Options{Prefix: prefix, RequireAtStart: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, alg := range ratelimit.Algorithms() {
				req := ratelimit.Request{Key: "who-" + alg.String(), Limit: ratelimit.PerHour(2), Algorithm: alg, N: 2}
				if d, err := a.Apply(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("%v: got %+v %v", alg, d, err)
				}
				if d, _ := a.Apply(ctx, req); d.Allowed {
					t.Fatalf("%v: second: got allowed, want denied", alg)
				}
				// Reset through b: the state is gone from Redis for every
				// process (a peek through b finds a full quota).
				if err := b.Reset(ctx, req.Key); err != nil {
					t.Fatal(err)
				}
				peek := req
				peek.N = 0
				if d, err := b.Apply(ctx, peek); err != nil || d.Remaining != 2 {
					t.Errorf("%v: peek after reset: got %+v %v, want 2 remaining", alg, d, err)
				}
				if err := a.Reset(ctx, "absent"); err != nil {
					t.Fatal(err)
				}
				// a's denial cache holds the denial until a's own Reset.
				if err := a.Reset(ctx, req.Key); err != nil {
					t.Fatal(err)
				}
				if d, err := a.Apply(ctx, req); err != nil || !d.Allowed {
					t.Errorf("%v: after reset: got %+v %v, want allowed", alg, d, err)
				}
			}
			// Settings: one process writes, another reads.
			v0, err := b.SettingsVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.PutSetting(ctx, "override/x", `{"rate":5}`); err != nil {
				t.Fatal(err)
			}
			v1, fields, err := b.Settings(ctx)
			if err != nil || v1 == v0 || fields["override/x"] != `{"rate":5}` {
				t.Fatalf("got version %d (was %d) fields %v err %v", v1, v0, fields, err)
			}
			if err := b.DeleteSettings(ctx, "override/x"); err != nil {
				t.Fatal(err)
			}
			v2, fields, err := a.Settings(ctx)
			if err != nil || v2 == v1 || len(fields) != 0 {
				t.Errorf("after delete: got version %d fields %v err %v", v2, fields, err)
			}
		})
	}
}
