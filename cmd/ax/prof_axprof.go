//go:build axprof

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"
)

// A binary built with -tags axprof (for measurements only, never shipped)
// profiles itself when AX_PROF_DIR names a directory: from AX_PROF_AFTER
// (a duration, default 10s) after it starts, for AX_PROF_FOR (default 30s),
// it records a CPU profile (and an execution trace with AX_PROF_TRACE=1),
// then writes its block, mutex and goroutine profiles, each file named by
// its pid. The burst test uses it (AX_TEST_TAGS=axprof) to find where the
// API's and the lease's latency come from.
func init() {
	dir := os.Getenv("AX_PROF_DIR")
	if dir == "" {
		return
	}
	after, err := time.ParseDuration(cmpOr(os.Getenv("AX_PROF_AFTER"), "10s"))
	if err != nil {
		panic(err)
	}
	span, err := time.ParseDuration(cmpOr(os.Getenv("AX_PROF_FOR"), "30s"))
	if err != nil {
		panic(err)
	}
	runtime.SetBlockProfileRate(int(time.Millisecond))
	runtime.SetMutexProfileFraction(10)
	pid := strconv.Itoa(os.Getpid())
	go func() {
		time.Sleep(after)
		cpu, err := os.Create(filepath.Join(dir, "cpu."+pid))
		if err != nil {
			panic(err)
		}
		_ = pprof.StartCPUProfile(cpu)
		var tf *os.File
		if os.Getenv("AX_PROF_TRACE") != "" {
			tf, _ = os.Create(filepath.Join(dir, "trace."+pid))
			_ = trace.Start(tf)
		}
		time.Sleep(span)
		pprof.StopCPUProfile()
		cpu.Close()
		if tf != nil {
			trace.Stop()
			tf.Close()
		}
		for _, p := range []string{"block", "mutex", "goroutine"} {
			f, err := os.Create(filepath.Join(dir, p+"."+pid))
			if err != nil {
				continue
			}
			_ = pprof.Lookup(p).WriteTo(f, 0)
			f.Close()
		}
		fmt.Fprintln(os.Stderr, "axprof: profiles written to", dir)
	}()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
