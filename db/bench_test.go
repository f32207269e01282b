package db

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. On a shared, loaded machine
// bytes per CPU-second ("GB/s-cpu") measures the code where wall-clock
// throughput measures the neighbours; with -cpu 1 it is the one-core figure.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration, bytesPerOp uint64) {
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/used.Seconds()/1e9, "GB/s-cpu")
	}
}

// benchSnapshots are 64 MiB of the contents a recorder meets: a smooth float
// field, untouched (zero) memory and incompressible bytes.
func benchSnapshots() []struct {
	name string
	s    *Snapshot
} {
	const size = 64 << 20
	mk := func(d []byte) *Snapshot {
		return &Snapshot{Blobs: []Blob{{Addr: 0x153940000000, Size: uint64(len(d)), Data: d}}, Args: [][]byte{make([]byte, 8)}}
	}
	return []struct {
		name string
		s    *Snapshot
	}{
		{"floats", mk(floatData(size))},
		{"zeros", mk(make([]byte, size))},
		{"random", mk(randomData(size, 5))},
	}
}

// Run with -cpu 1,2 (or more) to see single-core and parallel throughput.
func BenchmarkEncodeSnapshot(b *testing.B) {
	for _, c := range benchSnapshots() {
		for _, compress := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/compress=%v", c.name, compress), func(b *testing.B) {
				cw := &countingWriter{w: io.Discard}
				b.SetBytes(int64(c.s.RawSize()))
				start := cpuTime()
				for b.Loop() {
					cw.n = 0
					if err := EncodeSnapshot(cw, c.s, SnapshotOptions{Compress: compress}); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, start, c.s.RawSize())
				b.ReportMetric(float64(cw.n)/float64(c.s.RawSize()), "ratio")
			})
		}
	}
}

func BenchmarkDecodeSnapshot(b *testing.B) {
	for _, c := range benchSnapshots() {
		for _, compress := range []bool{false, true} {
			var buf bytes.Buffer
			if err := EncodeSnapshot(&buf, c.s, SnapshotOptions{Compress: compress}); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/compress=%v", c.name, compress), func(b *testing.B) {
				b.SetBytes(int64(c.s.RawSize()))
				start := cpuTime()
				for b.Loop() {
					if _, err := DecodeSnapshotBytes(buf.Bytes()); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, start, c.s.RawSize())
			})
		}
	}
}

// The file benchmarks include the page cache and, with sync, the disk.
func BenchmarkWriteSnapshot(b *testing.B) {
	dir := b.TempDir()
	for _, c := range benchSnapshots() {
		for _, opts := range []SnapshotOptions{{NoSync: true}, {Compress: true, NoSync: true}, {Compress: true}} {
			b.Run(fmt.Sprintf("%s/compress=%v/sync=%v", c.name, opts.Compress, !opts.NoSync), func(b *testing.B) {
				b.SetBytes(int64(c.s.RawSize()))
				start := cpuTime()
				for b.Loop() {
					if _, err := WriteSnapshot(filepath.Join(dir, "s.mneme"), c.s, opts); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, start, c.s.RawSize())
			})
		}
	}
}

func BenchmarkReadSnapshot(b *testing.B) {
	dir := b.TempDir()
	for _, c := range benchSnapshots() {
		for _, compress := range []bool{false, true} {
			path := filepath.Join(dir, fmt.Sprintf("%s-%v.mneme", c.name, compress))
			if _, err := WriteSnapshot(path, c.s, SnapshotOptions{Compress: compress, NoSync: true}); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/compress=%v", c.name, compress), func(b *testing.B) {
				b.SetBytes(int64(c.s.RawSize()))
				start := cpuTime()
				for b.Loop() {
					if _, err := ReadSnapshot(path); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, start, c.s.RawSize())
			})
		}
	}
}

func BenchmarkChangedRanges(b *testing.B) {
	pro := benchSnapshots()[0].s
	epi := &Snapshot{Blobs: []Blob{{Addr: pro.Blobs[0].Addr, Size: pro.Blobs[0].Size, Data: append([]byte{}, pro.Blobs[0].Data...)}}}
	epi.Blobs[0].Data[len(epi.Blobs[0].Data)/2]++
	b.SetBytes(int64(pro.RawSize()))
	for b.Loop() {
		if r := ChangedRanges(pro, epi); len(r) != 1 {
			b.Fatal(len(r))
		}
	}
}
