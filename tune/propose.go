package tune

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
)

// The proposer is the Python side of a run whose points come from Python: a
// user's SearchSpace class (--space-module) or an Optuna study (--study-name,
// --optuna-storage, --pruner). It only proposes; this engine runs every
// trial, writes every results file and sets the exit code. The protocol is
// in PROTOCOL.md, "Proposals from Python".

// ProposerFactory starts the Python proposer.
type ProposerFactory interface {
	StartProposer(ctx context.Context) (*ProposerConn, error)
}

// ProposerConn is a started proposer: requests go to In, one JSON line
// each; answers come from Out; Close ends it.
type ProposerConn struct {
	In    io.WriteCloser
	Out   io.Reader
	Close func() error
}

// ExecProposer runs `Python -m mneme.propose`.
type ExecProposer struct {
	Python string
	Stderr io.Writer
}

// StartProposer implements ProposerFactory.
func (e ExecProposer) StartProposer(ctx context.Context) (*ProposerConn, error) {
	cmd := exec.CommandContext(ctx, e.Python, "-m", "mneme.propose")
	cmd.Stderr = e.Stderr
	setProcessGroup(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the Python proposer %s: %w", e.Python, err)
	}
	var once sync.Once
	var werr error
	return &ProposerConn{In: in, Out: out, Close: func() error {
		once.Do(func() {
			in.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case werr = <-done:
			case <-time.After(5 * time.Second):
				killProcessGroup(cmd)
				werr = <-done
			}
		})
		return werr
	}}, nil
}

// proposeRequest is one request line to the proposer.
type proposeRequest struct {
	Op string `json:"op"`
	// open
	SpaceModule    string   `json:"space_module,omitempty"`
	SpaceArgs      []string `json:"space_args,omitempty"`
	Params         []Param  `json:"params,omitempty"`
	Sampler        string   `json:"sampler,omitempty"`
	Trials         int      `json:"trials,omitempty"`
	Seed           uint64   `json:"seed,omitempty"`
	StudyName      string   `json:"study_name,omitempty"`
	OptunaStorage  string   `json:"optuna_storage,omitempty"`
	Pruner         string   `json:"pruner,omitempty"`
	RecordDatabase string   `json:"record_database,omitempty"`
	RecordID       string   `json:"record_id,omitempty"`
	// tell
	ID     int      `json:"id,omitempty"`
	Loss   *float64 `json:"loss,omitempty"`
	Status string   `json:"status,omitempty"`
}

// proposeAnswer is one answer line from the proposer.
type proposeAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// open
	Space *struct {
		Name     string        `json:"name"`
		Params   []Param       `json:"params"`
		Size     *int64        `json:"size"`
		Feasible *int64        `json:"feasible"`
		Baseline *mneme.Config `json:"baseline"`
	} `json:"space,omitempty"`
	// Points, in an open answer, are every proposal at once (exhaustive and
	// random): no ask or tell follows.
	Points []proposal `json:"points,omitempty"`
	// ask
	Done bool `json:"done,omitempty"`
	proposal
}

// proposal is one proposed point: an ask answer, or one of an open
// answer's points.
type proposal struct {
	ID     int           `json:"id,omitempty"`
	Point  Point         `json:"params,omitempty"`
	Config *mneme.Config `json:"config,omitempty"`
	Reason string        `json:"reason,omitempty"`
}

// proposer is the Go end of the conversation.
type proposer struct {
	conn *ProposerConn
	rd   *bufio.Reader
	enc  *json.Encoder
}

func (p *proposer) call(req proposeRequest) (proposeAnswer, error) {
	var a proposeAnswer
	ended := mneme.BadInput(fmt.Errorf("the Python proposer (python -m mneme.propose) ended before answering %s: "+
		"can that Python import the mneme package? Set MNEME_PYTHON, or PYTHONPATH to the repository's python folder (its messages are above)", req.Op))
	if err := p.enc.Encode(req); err != nil {
		// A proposer that exited closes the pipe: the write fails first.
		return a, ended
	}
	line, tooLong, err := readLine(p.rd)
	switch {
	case tooLong:
		return a, fmt.Errorf("the Python proposer: answer to %s longer than %d bytes", req.Op, maxLine)
	case err != nil && len(line) == 0:
		return a, ended
	}
	if err := jsonfield.Check(line); err != nil {
		return a, fmt.Errorf("the Python proposer: answer to %s: %v", req.Op, err)
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return a, fmt.Errorf("the Python proposer: answer to %s is not an answer: %v", req.Op, err)
	}
	if !a.OK {
		return a, mneme.BadInput(fmt.Errorf("%s", strings.TrimSpace(a.Error)))
	}
	return a, nil
}

// ProposerSampler is a Sampler whose points the Python proposer chooses.
type ProposerSampler struct {
	p     *proposer
	space *Space
	name  string
	// ids are the proposer's ids of the points asked and not yet told.
	ids map[string][]int
	err error
	// batch holds the proposals the open answer gave all at once; batched
	// is set when it did, and then nothing is asked or told.
	batch   []proposal
	batched bool
}

// Name implements Sampler.
func (s *ProposerSampler) Name() string { return s.name }

// Err is the proposer's failure that ended the proposals, if any.
func (s *ProposerSampler) Err() error { return s.err }

// Ask implements Sampler: a point the proposer chose, with its configuration
// when the proposer derived it (a --space-module class does). A point whose
// derivation failed in Python is told back as invalid_config and the next
// one asked.
func (s *ProposerSampler) Ask() (Point, bool) {
	for s.err == nil {
		a, ok := s.next()
		if !ok {
			return nil, false
		}
		if a.Point == nil {
			a.Point = Point{}
		}
		if s.space.proposed != nil {
			if a.Config == nil {
				s.tell(a.ID, math.Inf(1), mneme.StatusInvalidConfig)
				continue
			}
			s.space.proposed.configs[a.Point.Key()] = *a.Config
		}
		k := a.Point.Key()
		s.ids[k] = append(s.ids[k], a.ID)
		return a.Point, true
	}
	return nil, false
}

// next is the next proposal: from the batch when the open answer gave one,
// else asked of the proposer.
func (s *ProposerSampler) next() (proposal, bool) {
	if s.batched {
		if len(s.batch) == 0 {
			return proposal{}, false
		}
		a := s.batch[0]
		s.batch = s.batch[1:]
		return a, true
	}
	a, err := s.p.call(proposeRequest{Op: "ask"})
	if err != nil {
		s.err = err
		return proposal{}, false
	}
	return a.proposal, !a.Done
}

// Tell implements Sampler.
func (s *ProposerSampler) Tell(pt Point, loss float64, status mneme.Status) {
	k := pt.Key()
	ids := s.ids[k]
	if len(ids) == 0 {
		return // a resumed trial: the proposer never asked for it
	}
	s.ids[k] = ids[1:]
	s.tell(ids[0], loss, status)
}

func (s *ProposerSampler) tell(id int, loss float64, status mneme.Status) {
	if s.err != nil || s.batched {
		return
	}
	req := proposeRequest{Op: "tell", ID: id, Status: string(status)}
	if !math.IsInf(loss, 0) && !math.IsNaN(loss) {
		req.Loss = &loss
	}
	if _, err := s.p.call(req); err != nil {
		s.err = err
	}
}

// proposedSpace is what a space defined in Python keeps on the Go side: the
// configurations the proposer derived, by point.
type proposedSpace struct {
	configs  map[string]mneme.Config
	size     int64
	feasible int64
	finite   bool
}

// openProposer opens a session with a started proposer. With a
// --space-module class the space is the proposer's (its parameters for the
// records, its configurations for the trials); otherwise Optuna proposes
// points of space, which this engine derives.
func openProposer(conn *ProposerConn, opts Options, t *target, space *Space) (*ProposerSampler, *Space, func() error, error) {
	p := &proposer{conn: conn, rd: bufio.NewReaderSize(conn.Out, 64<<10), enc: json.NewEncoder(conn.In)}
	p.enc.SetEscapeHTML(false)
	req := proposeRequest{Op: "open", SpaceModule: opts.SpaceModule, SpaceArgs: opts.SpaceArgs, Sampler: canonicalSampler(opts.Sampler),
		Trials: opts.Trials, Seed: opts.Seed, StudyName: opts.StudyName, OptunaStorage: opts.OptunaStorage, Pruner: opts.Pruner,
		RecordDatabase: t.kernelFile(), RecordID: t.inst.DynamicHash}
	if opts.SpaceModule == "" {
		req.Params = space.Params
	}
	a, err := p.call(req)
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	if opts.SpaceModule != "" {
		if a.Space == nil || len(a.Space.Params) == 0 {
			conn.Close()
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("--space-module %s: the class has no dimensions", opts.SpaceModule))
		}
		ps := &proposedSpace{configs: map[string]mneme.Config{}}
		if a.Space.Size != nil {
			ps.size, ps.finite = *a.Space.Size, true
		}
		if a.Space.Feasible != nil {
			ps.feasible = *a.Space.Feasible
		}
		base := space.Baseline
		if a.Space.Baseline != nil {
			base = *a.Space.Baseline
		}
		s := &Space{Name: a.Space.Name, Params: a.Space.Params, Baseline: base, Vars: space.Vars, Limits: space.Limits, proposed: ps}
		s.Derive = func(pt Point) (mneme.Config, error) {
			c, ok := ps.configs[pt.Key()]
			if !ok {
				return c, errors.New("a point the Python proposer did not derive")
			}
			return c, nil
		}
		space = s
	}
	return &ProposerSampler{p: p, space: space, name: canonicalSampler(opts.Sampler) + " (Python)", ids: map[string][]int{},
		batch: a.Points, batched: a.Points != nil}, space, conn.Close, nil
}

// kernelFile is the recording's kernel JSON, which the Python side loads.
func (t *target) kernelFile() string {
	p := filepath.Join(t.dbDir, t.kernel.StaticHash+".json")
	if _, err := os.Stat(p); err != nil {
		return t.dbDir
	}
	return p
}
