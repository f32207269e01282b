package deploy

import "github.com/mneme-gpu/mneme"

// TunedKernel is one entry of mneme_tuned_kernels.json (a JSON object keyed
// by mangled kernel name): the whole tuned configuration, where it was tuned,
// and the recorded launch it started from. tune writes it; ReadMnemeTuned
// reads it.
type TunedKernel struct {
	Config         mneme.Config `json:"config"`
	Instance       string       `json:"instance"`
	StaticHash     string       `json:"static_hash,omitempty"`
	GPU            string       `json:"gpu,omitempty"`
	Speedup        float64      `json:"speedup"`
	TimeNS         float64      `json:"time_ns"`
	BaselineTimeNS float64      `json:"baseline_time_ns"`
	Metric         string       `json:"metric"`
	TunedAt        string       `json:"tuned_at"`
	// RecordedBlock and RecordedGrid are the recorded launch's geometry the
	// tuning started from: Config.Block is a tuned block only where it
	// differs from RecordedBlock.
	RecordedBlock mneme.Dim3 `json:"recorded_block"`
	RecordedGrid  mneme.Dim3 `json:"recorded_grid"`
	// LaunchSearched is true when block shapes were searched and the kernel
	// was judged geometry-agnostic, so a tuned block may be applied at run
	// time; false (a kernel that depends on its block shape, even if
	// aggressive launch safety searched it) keeps the application's block
	// whatever Config says.
	LaunchSearched bool `json:"launch_searched"`
}

// ProteusKernel is one entry of Proteus's PROTEUS_TUNED_KERNELS file, as
// tune writes it. ReadProteusTuned does not decode into it: Proteus reads
// each field leniently (a wrong type counts as absent), which a struct
// decode cannot express.
type ProteusKernel struct {
	Pipeline            string `json:"Pipeline"`
	CodeGen             string `json:"CodeGen"`
	SpecializeArgs      bool   `json:"SpecializeArgs"`
	LaunchBounds        bool   `json:"LaunchBounds"`
	SpecializeDims      bool   `json:"SpecializeDims"`
	SpecializeDimsRange bool   `json:"SpecializeDimsRange"`
	OptLevel            string `json:"OptLevel"`
	CodeGenOptLevel     int    `json:"CodeGenOptLevel"`
	TunedMaxThreads     int    `json:"TunedMaxThreads"`
	MinBlocksPerSM      int    `json:"MinBlocksPerSM"`
}
