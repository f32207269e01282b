package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// Status is what the runtime reports to `mneme record` through the status
// file. It is rewritten atomically whenever something worth reporting
// happens, so it is current even when the application crashes.
type Status struct {
	PID                int     `json:"pid"`
	Finished           bool    `json:"finished"` // the application exited through exit()
	Fatbinaries        int     `json:"fatbinaries"`
	KernelsRegistered  int     `json:"kernels_registered"`
	GlobalsRegistered  int     `json:"globals_registered"`
	LaunchesSeen       int64   `json:"launches_seen"`
	LaunchesSelected   int64   `json:"launches_selected"`
	InstancesRecorded  int     `json:"instances_recorded"`
	KernelsRecorded    int     `json:"kernels_recorded"`
	StatsKernels       int     `json:"stats_kernels,omitempty"`      // kernels in the launch statistics file
	InstancesReplaced  int     `json:"instances_replaced,omitempty"` // gave their place to a new launch shape (--max-recordings)
	Allocations        int64   `json:"allocations"`
	ManagedAllocations int64   `json:"managed_allocations"`
	ArenaBase          string  `json:"arena_base,omitempty"`
	ArenaSize          uint64  `json:"arena_size,omitempty"`
	ArenaPeak          uint64  `json:"arena_peak,omitempty"` // physical bytes mapped; through the driver, the most the tracked allocations held at once
	SnapshotBytes      int64   `json:"snapshot_bytes"`       // written to snapshot files
	SnapshotRawBytes   int64   `json:"snapshot_raw_bytes"`   // device data they hold, before compression
	SnapshotSeconds    float64 `json:"snapshot_seconds"`     // the application held for them (planning, copies, writes not left to the background)
	// Where recording time went (seconds), for the overhead report.
	LoadSeconds  float64 `json:"load_seconds"`  // loading this library into the application and starting it
	ArenaSeconds float64 `json:"arena_seconds"` // reserving and mapping the arena, allocating
	IRSeconds    float64 `json:"ir_seconds"`    // finding and extracting kernels' IR
	CopySeconds  float64 `json:"copy_seconds"`  // device-to-host snapshot copies (with the writing they overlap, when staged)
	// The device-to-host copies themselves and what fingerprints spared.
	CopiedBytes         int64   `json:"copied_bytes"`          // moved from the device to the host
	CopyTransferSeconds float64 `json:"copy_transfer_seconds"` // the GPU's time on staged transfers
	FingerprintSeconds  float64 `json:"fingerprint_seconds"`   // hashing chunks on the GPU
	// Chunks by how they were stored. A recording through the driver
	// (record/inject) copies every chunk to the host and hashes it there:
	// its zero and referenced chunks were copied, but not stored.
	ChunksCopied      int64    `json:"chunks_copied"`
	ChunksZero        int64    `json:"chunks_zero"`        // all zero: neither copied nor stored
	ChunksReferenced  int64    `json:"chunks_referenced"`  // already in the database: referenced, not copied
	ShadowSeconds     float64  `json:"shadow_seconds"`     // copies of the chunks to store, for the background writer
	HostShadows       int64    `json:"host_shadows"`       // snapshots copied into host memory and written later
	DeviceShadows     int64    `json:"device_shadows"`     // snapshots copied on the device and drained later
	ShadowRefusals    int64    `json:"shadow_refusals"`    // snapshots written at once for want of memory
	BackgroundSeconds float64  `json:"background_seconds"` // writing shadowed snapshots while the application ran
	DBWriteSeconds    float64  `json:"db_write_seconds"`   // kernel JSON files
	ArenaError        string   `json:"arena_error,omitempty"`
	Errors            []string `json:"errors,omitempty"`
	ErrorsDropped     int      `json:"errors_dropped,omitempty"`

	// The snapshot that moved the most bytes, typically a first copy of
	// fresh data: its rate is the one to hold against the bus, which the
	// totals blur with small snapshots whose copies waited on the driver.
	LargestCopyBytes   int64   `json:"largest_copy_bytes,omitempty"`
	LargestCopySeconds float64 `json:"largest_copy_seconds,omitempty"` // its GPU time on the transfers
}

// maxStatusErrors bounds the error list, so an application that fails the
// same way a million times does not grow the file without limit.
const maxStatusErrors = 50

// addCopies counts one snapshot's device-to-host copies.
func (s *Status) addCopies(st CopyStats) {
	s.CopiedBytes += st.Bytes
	s.CopyTransferSeconds += st.TransferSeconds
	if st.Bytes > s.LargestCopyBytes && st.TransferSeconds > 0 {
		s.LargestCopyBytes, s.LargestCopySeconds = st.Bytes, st.TransferSeconds
	}
}

func (s *Status) addError(msg string) {
	if len(s.Errors) >= maxStatusErrors {
		s.ErrorsDropped++
		return
	}
	s.Errors = append(s.Errors, msg)
}

// WriteStatus replaces dir's status file atomically (a temporary file
// renamed over it). It is not fsynced: it only has to outlive the
// application, not the machine.
func WriteStatus(dir string, s *Status) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return db.ReplaceFile(filepath.Join(dir, StatusFileName), append(data, '\n'))
}

// ErrNoStatus means the runtime never wrote a status file: it was not loaded
// into the application.
var ErrNoStatus = errors.New("no recording status file")

// ReadStatus reads dir's status file.
func ReadStatus(dir string) (*Status, error) {
	path := filepath.Join(dir, StatusFileName)
	data, err := safefile.ReadFile(path, safefile.MaxJSON)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoStatus, path)
	}
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &s, nil
}
