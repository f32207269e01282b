package tune

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mneme-gpu/mneme/spec"
)

// Worker protocol operations (tune/PROTOCOL.md).
const (
	OpOpen    = "open"
	OpCompile = "compile"
	OpRun     = "run"
	OpClose   = "close"
)

// Verification modes of OpenParams.Verify.
const (
	VerifyBitwise   = "bitwise"
	VerifyTolerance = "tolerance"
	VerifyNone      = "none"
)

// VerifyOptions say how a replay's output is compared with the recording.
type VerifyOptions struct {
	Mode string  `json:"mode,omitempty"` // bitwise (default), tolerance, none
	ATol float64 `json:"atol,omitempty"`
	RTol float64 `json:"rtol,omitempty"`
}

// OpenParams are the fields of an "open" request.
type OpenParams struct {
	DB          string        `json:"db"`
	Kernel      string        `json:"kernel,omitempty"`
	Instance    string        `json:"instance,omitempty"`
	GPU         int           `json:"gpu"`
	Iterations  int           `json:"iterations"`
	Warmup      int           `json:"warmup"`
	Verify      VerifyOptions `json:"verify"`
	CacheDir    string        `json:"cache_dir,omitempty"`
	CompileOnly bool          `json:"compile_only,omitempty"`
}

// Validate checks the fields a worker cannot do without.
func (p OpenParams) Validate() error {
	if p.DB == "" {
		return errors.New("open: db is empty")
	}
	if p.Iterations < 1 {
		return fmt.Errorf("open: iterations %d: must be at least 1", p.Iterations)
	}
	if p.Warmup < 0 {
		return fmt.Errorf("open: warmup %d: must not be negative", p.Warmup)
	}
	if p.GPU < 0 {
		return fmt.Errorf("open: gpu %d: must not be negative", p.GPU)
	}
	switch p.Verify.Mode {
	case "", VerifyBitwise, VerifyTolerance, VerifyNone:
	default:
		return fmt.Errorf("open: verify.mode %q: want bitwise, tolerance or none", p.Verify.Mode)
	}
	return nil
}

// Request is one line a client writes to a worker's stdin.
type Request struct {
	ID     int64        `json:"id"`
	Op     string       `json:"op"`
	Open   *OpenParams  `json:"open,omitempty"`
	Config *spec.Config `json:"config,omitempty"`
}

// DeviceLimits are the GPU properties the built-in spaces are derived from;
// an "open" response carries them.
type DeviceLimits struct {
	Name                 string `json:"name,omitempty"`
	Arch                 string `json:"arch,omitempty"`
	SMCount              int    `json:"sm_count"`
	MaxThreadsPerBlock   int    `json:"max_threads_per_block"`
	MaxSharedMemPerBlock int    `json:"max_shared_mem_per_block"`
	RegsPerSM            int    `json:"regs_per_sm"`
	WarpSize             int    `json:"warp_size"`
}

// Response is one line a worker writes to its stdout.
type Response struct {
	ID     int64         `json:"id"`
	OK     bool          `json:"ok"`
	Error  string        `json:"error,omitempty"`
	Result *spec.Result  `json:"result,omitempty"`
	Device *DeviceLimits `json:"device,omitempty"`
	Kernel string        `json:"kernel,omitempty"`
	// Closing says the worker exits after this answer (the run left its
	// CUDA context unusable); the client sends it nothing more.
	Closing bool `json:"closing,omitempty"`
	// NoGPU marks a failed open on a machine without a usable GPU.
	NoGPU bool `json:"no_gpu,omitempty"`
}

// UnusableSession is implemented by sessions that can become unusable (a
// sticky CUDA error); Serve then marks the answer Closing and returns
// ErrSessionUnusable.
type UnusableSession interface {
	Unusable() bool
}

// ErrSessionUnusable is Serve's result after it answered a request that left
// the session unusable.
var ErrSessionUnusable = errors.New("the session became unusable")

// ErrNoGPU is wrapped by a Session's Open error when the machine has no
// usable GPU (no driver, no device); the answer then carries no_gpu, and the
// Executor's Start error wraps it again on the client's side.
var ErrNoGPU = errors.New("no GPU")

// OpenInfo is what a Session reports after opening.
type OpenInfo struct {
	Device *DeviceLimits
	Kernel string
}

// Session is the worker side of the protocol: the replay engine implements it
// and Serve drives it from the request stream.
type Session interface {
	Open(p OpenParams) (OpenInfo, error)
	// Compile and Run report per-configuration failures in the Result's
	// status; they never fail the protocol.
	Compile(c spec.Config) spec.Result
	Run(c spec.Config) spec.Result
	Close() error
}

// maxLine bounds one protocol line; configurations are small, but a result
// with many exec times must still fit.
const maxLine = 16 << 20

// Serve reads requests from in, calls s and writes one response per request to
// out, until "close" or end of input. It returns nil after a clean close or
// EOF, and the error when reading or writing the streams fails.
func Serve(in io.Reader, out io.Writer, s Session) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	enc := json.NewEncoder(out)
	opened := false
	defer func() {
		if opened {
			_ = s.Close()
		}
	}()
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var req Request
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			if werr := enc.Encode(Response{ID: req.ID, Error: "malformed request: " + err.Error()}); werr != nil {
				return werr
			}
			continue
		}
		resp := Response{ID: req.ID}
		closing := false
		switch req.Op {
		case OpOpen:
			switch {
			case opened:
				resp.Error = "open: the session is already open"
			case req.Open == nil:
				resp.Error = "open: missing \"open\" parameters"
			default:
				if err := req.Open.Validate(); err != nil {
					resp.Error = err.Error()
					break
				}
				info, err := s.Open(*req.Open)
				if err != nil {
					resp.Error = "open: " + err.Error()
					resp.NoGPU = errors.Is(err, ErrNoGPU)
					break
				}
				opened = true
				resp.OK, resp.Device, resp.Kernel = true, info.Device, info.Kernel
			}
		case OpCompile, OpRun:
			switch {
			case !opened:
				resp.Error = req.Op + ": the session is not open (send \"open\" first)"
			case req.Config == nil:
				resp.Error = req.Op + ": missing \"config\""
			default:
				var r spec.Result
				if req.Op == OpRun {
					r = s.Run(*req.Config)
				} else {
					r = s.Compile(*req.Config)
				}
				resp.OK, resp.Result = true, &r
				if u, ok := s.(UnusableSession); ok && u.Unusable() {
					resp.Closing = true
				}
			}
		case OpClose:
			closing = true
			resp.OK = true
			if opened {
				opened = false
				if err := s.Close(); err != nil {
					resp.OK, resp.Error = false, "close: "+err.Error()
				}
			}
		default:
			resp.Error = fmt.Sprintf("unknown op %q (want open, compile, run or close)", req.Op)
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if resp.Closing {
			return ErrSessionUnusable
		}
		if closing {
			return nil
		}
	}
	return sc.Err()
}
