package spec

// Trial statuses, as in Mneme's tuner.
const (
	StatusVerified           = "verified"
	StatusInvalidLaunch      = "invalid_launch"
	StatusInvalidConfig      = "invalid_config"
	StatusCompileError       = "compile_error"
	StatusRuntimeError       = "runtime_error"
	StatusFailedVerification = "failed_verification"
	StatusInternalError      = "internal_error"
	StatusTimeout            = "timeout"
	StatusCrashed            = "crashed"
)

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
	Status           string    `json:"status"`
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
}
