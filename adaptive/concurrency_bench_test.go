package adaptive

import (
	"testing"
	"time"
)

// benchLimiters are the limiters whose acquire+release is measured, with
// a limit no benchmark goroutine reaches and a real clock.
func benchLimiters() map[string]Limiter {
	lo := LimiterOptions{Initial: 1000, Max: 1000, Seed: 1}
	return map[string]Limiter{
		"gradient": NewGradient(GradientOptions{LimiterOptions: lo}),
		"vegas":    NewVegas(VegasOptions{LimiterOptions: lo}),
	}
}

// BenchmarkAcquireRelease is the hot path: Acquire, then Done (which reads
// the clock and records a sample).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, name := range []string{"gradient", "vegas"} {
		b.Run(name+"/serial", func(b *testing.B) {
			l := benchLimiters()[name]
			b.ReportAllocs()
			for b.Loop() {
				tok, ok := l.Acquire()
				if !ok {
					b.Fatal("refused")
				}
				tok.Done()
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			l := benchLimiters()[name]
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, ok := l.Acquire()
					if !ok {
						b.Error("refused")
						return
					}
					tok.Done()
				}
			})
		})
	}
}

// BenchmarkAcquireReleaseSample4 times one request in 4
// (LimiterOptions.Sample).
func BenchmarkAcquireReleaseSample4(b *testing.B) {
	l := NewGradient(GradientOptions{LimiterOptions: LimiterOptions{Initial: 1000, Max: 1000, Seed: 1, Sample: 4}})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tok, _ := l.Acquire()
			tok.Done()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tok, _ := l.Acquire()
				tok.Done()
			}
		})
	})
}

// BenchmarkAcquireReleaseRTT releases with a latency the caller measured:
// one clock read instead of two.
func BenchmarkAcquireReleaseRTT(b *testing.B) {
	l := benchLimiters()["gradient"]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, _ := l.Acquire()
			tok.DoneRTT(time.Millisecond)
		}
	})
}

// BenchmarkReject is the refusal at the limit.
func BenchmarkReject(b *testing.B) {
	l := NewGradient(GradientOptions{LimiterOptions: LimiterOptions{Initial: 1, Max: 1, Seed: 1}})
	tok, _ := l.Acquire()
	defer tok.Ignore()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := l.Acquire(); ok {
				b.Error("admitted over the limit")
				return
			}
		}
	})
}
