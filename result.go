package mneme

// Status is how one replay of one configuration (a trial) ended, as in
// Mneme's tuner. It is a string in JSON, so results written before the type
// existed, and workers in other languages, read the same.
type Status string

// Trial statuses. Only StatusVerified has a valid time.
const (
	StatusVerified           Status = "verified"
	StatusInvalidLaunch      Status = "invalid_launch"
	StatusInvalidConfig      Status = "invalid_config"
	StatusCompileError       Status = "compile_error"
	StatusRuntimeError       Status = "runtime_error"
	StatusFailedVerification Status = "failed_verification"
	StatusInternalError      Status = "internal_error"
	StatusTimeout            Status = "timeout"
	StatusCrashed            Status = "crashed"
)

// Statuses lists every trial status, the success first.
func Statuses() []Status {
	return []Status{StatusVerified, StatusInvalidLaunch, StatusInvalidConfig, StatusCompileError,
		StatusRuntimeError, StatusFailedVerification, StatusInternalError, StatusTimeout, StatusCrashed}
}

func (s Status) String() string { return string(s) }

// Known reports whether s is one of the statuses above; an unknown one (from
// a newer worker, say) is kept as it is but counts as a failure.
func (s Status) Known() bool {
	for _, k := range Statuses() {
		if s == k {
			return true
		}
	}
	return false
}

// Result is what one replay of one configuration produced. The field names
// follow Mneme's replay result; times are seconds, exec_time is nanoseconds
// per timed iteration.
type Result struct {
	PreprocessIRTime float64   `json:"preprocess_ir_time"`
	OptTime          float64   `json:"opt_time"`
	CodegenTime      float64   `json:"codegen_time"`
	PtxasTime        float64   `json:"ptxas_time"`
	CacheHit         string    `json:"cache_hit,omitempty"` // "memory", "disk" or empty
	ObjSize          int       `json:"obj_size"`
	ExecTime         []float64 `json:"exec_time"`
	Timer            string    `json:"timer,omitempty"` // "cupti" or "events"
	Verified         bool      `json:"verified"`
	Executed         bool      `json:"executed"`
	Failed           bool      `json:"failed"`
	Status           Status    `json:"status"`
	Error            string    `json:"error,omitempty"`
	StartTime        string    `json:"start_time"`
	EndTime          string    `json:"end_time"`
	GPUID            int       `json:"gpu_id"`
	GPUName          string    `json:"gpu_name,omitempty"`
	PtxasOptions     []string  `json:"ptxas_options,omitempty"`
	ConstMemUsage    int       `json:"const_mem_usage"`
	LocalMemUsage    int       `json:"local_mem_usage"`
	SharedMemUsage   int       `json:"shared_mem_usage"`
	RegUsage         int       `json:"reg_usage"`
	SpillStores      int       `json:"spill_stores"`
	SpillLoads       int       `json:"spill_loads"`
	// Timing split of one replay (seconds, means over the timed iterations).
	ResetTime  float64 `json:"reset_time,omitempty"`
	LaunchTime float64 `json:"launch_time,omitempty"`
	SyncTime   float64 `json:"sync_time,omitempty"`
	VerifyTime float64 `json:"verify_time,omitempty"`
	// Mismatch describes the first difference found by verification.
	Mismatch string `json:"mismatch,omitempty"`
	// Verification has per-buffer figures of typed verification (modes
	// auto and ulp): every buffer the kernel writes or the recording shows
	// changed, and every buffer that differs.
	Verification []BufferVerification `json:"verification,omitempty"`
}

// BufferVerification is how one recorded buffer (an allocation or a device
// global) compared with the recording. Errors are over the elements that
// differ with both sides finite; relative error is |got-want| divided by
// max(|got|, |want|).
type BufferVerification struct {
	Buffer    string  `json:"buffer"` // "allocation 0x7f0000000000 (arg 2)" or "global NAME"
	Type      string  `json:"type"`   // f16, bf16, f32, f64, or untyped (compared bitwise)
	Bound     string  `json:"bound"`  // what an element may differ by, e.g. "16 ulp or rel 1e-05", "bitwise"
	Passed    bool    `json:"passed"`
	Elements  uint64  `json:"elements"`             // elements compared (bytes when untyped)
	Differing uint64  `json:"differing"`            // elements not equal (NaN payloads and the sign of zero aside)
	Failing   uint64  `json:"failing"`              // elements outside the bound
	NonFinite uint64  `json:"non_finite,omitempty"` // differing elements with NaN or infinity on one side
	MaxAbs    float64 `json:"max_abs"`
	MaxRel    float64 `json:"max_rel"`
	MaxULP    uint64  `json:"max_ulp"`
	// FirstIndex is the first failing element, else the first differing
	// one (a byte offset when untyped); absent when the buffer is equal.
	// Got and Want quote that element.
	FirstIndex *uint64 `json:"first_index,omitempty"`
	Got        string  `json:"got,omitempty"`
	Want       string  `json:"want,omitempty"`
}
