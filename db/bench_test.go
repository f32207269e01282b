package db

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
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
// field, one with structure at two scales whose chunks never repeat (as
// examples/tracer's), untouched (zero) memory and incompressible bytes.
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
		{"field", mk(fieldData(size))},
		{"zeros", mk(make([]byte, size))},
		{"random", mk(randomData(size, 5))},
	}
}

// Run with -cpu 1,2 (or more) to see single-core and parallel throughput.
func BenchmarkEncodeSnapshot(b *testing.B) {
	for _, c := range benchSnapshots() {
		for _, opts := range []SnapshotOptions{{}, {Compress: true}, {Compress: true, Fast: true}} {
			name := fmt.Sprintf("%s/compress=%v", c.name, opts.Compress)
			if opts.Fast {
				name += "/fast-planes"
			}
			b.Run(name, func(b *testing.B) {
				cw := &countingWriter{w: io.Discard}
				b.SetBytes(int64(c.s.RawSize()))
				start := cpuTime()
				for b.Loop() {
					cw.n = 0
					if err := EncodeSnapshot(cw, c.s, opts); err != nil {
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

// fieldData is examples/tracer's initial field from element 3e8 on: float32
// values near 0.5 with a slow sine and a 7919-periodic cosine factor.
func fieldData(n int) []byte {
	b := make([]byte, n/4*4)
	for k := 0; k < len(b)/4; k++ {
		i := 300_000_000 + k
		v := 0.5 + 0.25*float32(math.Sin(float64(float32(i)*1e-6)))*float32(math.Cos(float64(float32(i%7919)*7.9e-4)))
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
	}
	return b
}

// BenchmarkWriteSnapshotFile writes 512 MiB of the field into a snapshot
// file as the recorder does (compressed byte planes, no fsync), next to the
// same encoding into io.Discard: the difference is the file's share, one
// goroutine copying the compressed bytes into the page cache.
func BenchmarkWriteSnapshotFile(b *testing.B) {
	const size = 512 << 20
	s := &Snapshot{Blobs: []Blob{{Addr: 0x153940000000, Size: size, Data: fieldData(size)}}, Args: [][]byte{make([]byte, 8)}}
	opts := SnapshotOptions{Compress: true, Fast: true, NoSync: true}
	dir := b.TempDir()
	for _, sink := range []string{"discard", "file"} {
		b.Run(sink, func(b *testing.B) {
			b.SetBytes(size)
			start := cpuTime()
			for b.Loop() {
				var err error
				if sink == "file" {
					_, err = WriteSnapshot(filepath.Join(dir, "s.mneme"), s, opts)
				} else {
					err = EncodeSnapshot(io.Discard, s, opts)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start, size)
		})
	}
}
