package tune

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
)

// Worker protocol operations (tune/PROTOCOL.md).
const (
	OpOpen    = "open"
	OpCompile = "compile"
	OpRun     = "run"
	OpClose   = "close"
)

// OpenParams are the fields of an "open" request.
type OpenParams struct {
	DB          string              `json:"db"`
	Kernel      string              `json:"kernel,omitempty"`
	Instance    string              `json:"instance,omitempty"`
	GPU         int                 `json:"gpu"`
	Iterations  int                 `json:"iterations"`
	Warmup      int                 `json:"warmup"`
	Verify      mneme.VerifyOptions `json:"verify"`
	CacheDir    string              `json:"cache_dir,omitempty"`
	CompileOnly bool                `json:"compile_only,omitempty"`
	ColdL2      bool                `json:"cold_l2,omitempty"`
	Timer       string              `json:"timer,omitempty"`
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
	if err := ValidateVerify(p.Verify); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	return nil
}

// Request is one line a client writes to a worker's stdin.
type Request struct {
	ID     int64         `json:"id"`
	Op     string        `json:"op"`
	Open   *OpenParams   `json:"open,omitempty"`
	Config *mneme.Config `json:"config,omitempty"`
}

// Response is one line a worker writes to its stdout.
type Response struct {
	ID     int64               `json:"id"`
	OK     bool                `json:"ok"`
	Error  string              `json:"error,omitempty"`
	Result *mneme.Result       `json:"result,omitempty"`
	Device *mneme.DeviceLimits `json:"device,omitempty"`
	Kernel string              `json:"kernel,omitempty"`
	// Closing says the worker exits after this answer (the run left its
	// CUDA context unusable); the client sends it nothing more.
	Closing bool `json:"closing,omitempty"`
	// NoGPU marks a failed open on a machine without a usable GPU: the
	// Session's Open error matched mneme.ErrNoGPU, and the Executor's Start
	// error matches it again on the client's side.
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

// OpenInfo is what a Session reports after opening.
type OpenInfo struct {
	Device *mneme.DeviceLimits
	Kernel string
}

// Session is the worker side of the protocol: the replay engine implements it
// and Serve drives it from the request stream.
type Session interface {
	Open(p OpenParams) (OpenInfo, error)
	// Compile and Run report per-configuration failures in the Result's
	// status; they never fail the protocol.
	Compile(c mneme.Config) mneme.Result
	Run(c mneme.Config) mneme.Result
	Close() error
}

// maxLine bounds one protocol line; configurations are small, but a result
// with many exec times must still fit.
const maxLine = 16 << 20

// Serve reads requests from in, calls s and writes one response per request to
// out, until "close" or end of input. It returns nil after a clean close or
// EOF, and the error when reading or writing the streams fails.
func Serve(in io.Reader, out io.Writer, s Session) error {
	br := bufio.NewReaderSize(in, 64<<10)
	enc := json.NewEncoder(out)
	sv := &server{s: s}
	defer func() {
		if sv.opened {
			_ = s.Close()
		}
	}()
	for {
		raw, tooLong, readErr := readLine(br)
		if tooLong {
			// The rest of the line was skipped: answer it, and read on.
			if err := enc.Encode(Response{Error: fmt.Sprintf("malformed request: the line is longer than the limit of %d bytes", maxLine)}); err != nil {
				return err
			}
			continue
		}
		if readErr != nil && (readErr != io.EOF || len(raw) == 0) {
			if readErr == io.EOF {
				return nil
			}
			return readErr
		}
		line := strings.TrimSpace(string(raw))
		if line == "" {
			continue
		}
		var req Request
		err := jsonfield.Check([]byte(line))
		if err == nil {
			err = json.Unmarshal([]byte(line), &req)
		}
		if err != nil {
			if werr := enc.Encode(Response{ID: req.ID, Error: "malformed request: " + err.Error()}); werr != nil {
				return werr
			}
			continue
		}
		resp, closing := sv.handle(req)
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
}

// server is Serve's side of one session: whether it is open.
type server struct {
	s      Session
	opened bool
}

// handle answers one well-formed request; closing is set for "close".
func (sv *server) handle(req Request) (resp Response, closing bool) {
	resp = Response{ID: req.ID}
	switch req.Op {
	case OpOpen:
		sv.open(req, &resp)
	case OpCompile, OpRun:
		sv.replay(req, &resp)
	case OpClose:
		closing = true
		resp.OK = true
		if sv.opened {
			sv.opened = false
			if err := sv.s.Close(); err != nil {
				resp.OK, resp.Error = false, "close: "+err.Error()
			}
		}
	default:
		resp.Error = fmt.Sprintf("unknown op %q (want open, compile, run or close)", req.Op)
	}
	return resp, closing
}

func (sv *server) open(req Request, resp *Response) {
	switch {
	case sv.opened:
		resp.Error = "open: the session is already open"
	case req.Open == nil:
		resp.Error = "open: missing \"open\" parameters"
	default:
		if err := req.Open.Validate(); err != nil {
			resp.Error = err.Error()
			return
		}
		info, err := sv.s.Open(*req.Open)
		if err != nil {
			resp.Error = "open: " + err.Error()
			resp.NoGPU = errors.Is(err, mneme.ErrNoGPU)
			return
		}
		sv.opened = true
		resp.OK, resp.Device, resp.Kernel = true, info.Device, info.Kernel
	}
}

// replay answers compile and run.
func (sv *server) replay(req Request, resp *Response) {
	switch {
	case !sv.opened:
		resp.Error = req.Op + ": the session is not open (send \"open\" first)"
	case req.Config == nil:
		resp.Error = req.Op + ": missing \"config\""
	default:
		var r mneme.Result
		if req.Op == OpRun {
			r = sv.s.Run(*req.Config)
		} else {
			r = sv.s.Compile(*req.Config)
		}
		resp.OK, resp.Result = true, &r
		if u, ok := sv.s.(UnusableSession); ok && u.Unusable() {
			resp.Closing = true
		}
	}
}

// readLine reads one line of at most maxLine bytes, without its newline. A
// longer line is skipped to its end and reported as tooLong, so one bad
// request costs neither the memory it declares nor the session.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine+1 { // +1: the newline
			line = nil
			tooLong = true
		} else if !tooLong {
			line = append(line, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return line, tooLong, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, nil
	}
}

// ValidateVerify checks the verify options a worker (and so the tuner) accepts: the
// modes auto, bitwise, ulp, tolerance and none (abs and rel are the
// command line's), with field names as the protocol spells them.
func ValidateVerify(v mneme.VerifyOptions) error {
	switch v.Mode {
	case "", mneme.VerifyAuto, mneme.VerifyBitwise, mneme.VerifyULP, mneme.VerifyTolerance, mneme.VerifyNone:
	default:
		return fmt.Errorf("verify.mode %q: want auto, bitwise, ulp, tolerance or none", v.Mode)
	}
	if v.ATol < 0 || v.RTol < 0 {
		return fmt.Errorf("verify.atol %g, verify.rtol %g: must not be negative", v.ATol, v.RTol)
	}
	return v.Validate()
}
