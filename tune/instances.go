package tune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/geometry"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// JobRunner runs a study's jobs: one Executor for one instance, or
// instanceExec for several.
type JobRunner interface {
	Submit(Job)
	Results() <-chan JobResult
	Capacity() int
	Err() error
	Device() (*mneme.DeviceLimits, string)
	SetTrialTimeout(time.Duration)
}

// SetTrialTimeout sets the limit of later run requests.
func (e *Executor) SetTrialTimeout(d time.Duration) { e.TrialTimeout = d }

// InstanceFigure is what one trial did on one of the instances it was tuned
// across (Trial.Instances).
type InstanceFigure struct {
	Instance string     `json:"instance"` // SH/DH
	Grid     mneme.Dim3 `json:"grid"`
	Block    mneme.Dim3 `json:"block"`
	// Launches is how many launches of the run the instance stands for.
	Launches float64      `json:"launches"`
	Status   mneme.Status `json:"status"`
	TimeNS   float64      `json:"time_ns,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// InstancesOptions are a tuning run across several recorded instances of one
// kernel: every configuration is replayed and verified on each, and the
// objective is the time the application would see, the sum of each
// instance's time times the launches it stands for. RunOptions.Stats gives
// the kernel's launch statistics (unset counts as a database without them)
// and RunOptions.MaxVariants is the runtime's variant cap
// (deploy.DefaultMaxVariants when zero).
type InstancesOptions struct {
	RunOptions
	// Kernel selects every instance of one kernel (mangled or demangled
	// name, or static hash); Instances selects instances by id. Give one.
	Kernel    string
	Instances []string
}

// member is one instance of a run across instances.
type member struct {
	t        *target
	id       string // SH/DH
	launches float64
	exec     *Executor
}

// RunInstances tunes a kernel across the instances the options select. With
// one instance selected it is Run.
func RunInstances(ctx context.Context, run InstancesOptions) error {
	opts := run.Options
	if err := CheckWorkers(opts.Workers, len(opts.GPUs), run.CompileWorkers); err != nil {
		return err
	}
	d, k, insts, err := selectInstances(opts.DB, run.Kernel, run.Instances)
	if err != nil {
		return err
	}
	if len(insts) == 1 {
		ro := run.RunOptions
		ro.Options.Instance = k.StaticHash + "/" + insts[0].DynamicHash
		return Run(ctx, ro)
	}
	var stats *KernelStats
	if run.Stats != nil {
		if stats, err = run.Stats(d.Dir, k); err != nil {
			return mneme.BadInput(fmt.Errorf("-rdb %s: launch statistics of %s: %w", opts.DB, k.Name(), err))
		}
	}
	maxVariants := run.MaxVariants
	if maxVariants <= 0 {
		maxVariants = deploy.DefaultMaxVariants
	}
	weights := instanceWeights(insts, stats)
	// The instance that stands for the most launches leads: its space is
	// the one sampled; the others follow its configurations.
	order := make([]int, len(insts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpFloatDesc(weights[a], weights[b])
	})
	var ids []string
	members := make([]*member, 0, len(insts))
	if opts.Output == "" {
		opts.Output = fmt.Sprintf("tune-%.8s-%d-instances", k.StaticHash, len(insts))
	}
	for _, i := range order {
		o := opts
		o.Instance = k.StaticHash + "/" + insts[i].DynamicHash
		t, err := loadTarget(&o)
		if err != nil {
			return err
		}
		members = append(members, &member{t: t, id: o.Instance, launches: weights[i]})
		ids = append(ids, o.Instance)
		if len(members) == 1 {
			opts.SpaceHash, opts.Kernel, opts.CacheDir = o.SpaceHash, o.Kernel, o.CacheDir
		}
	}
	opts.Instance = strings.Join(ids, ",")
	lead := members[0]
	geo, err := lead.t.applyLaunchSafety(&opts, run.AnalyzeGeometry, lead.t.dbDir, run.Resume)
	if err != nil {
		return err
	}
	fold := DecideFold(k, stats, maxVariants, insts)
	lead.t.space.applyFold(fold)
	lead.t.space.Constraints = append(lead.t.space.Constraints, everyInstanceConstraint(lead.t.space, members, geo.ExactCover))
	opts.SpaceHash = lead.t.space.Hash()
	desc := lead.t.space.Describe()
	if opts.Trials == 0 && !desc.Finite {
		opts.Trials = defaultTrialsInfinite
	}
	sampler, err := NewSampler(opts.Sampler, lead.t.space, opts.Seed)
	if err != nil {
		return mneme.BadInput(err)
	}
	if run.PrintSpace {
		return printSpace(run.Stdout, desc)
	}
	if run.DryRun {
		if err := printDryRun(run.Stdout, opts, lead.t, sampler, desc, geo); err != nil {
			return err
		}
		printMembers(run.Stdout, members, fold)
		fmt.Fprintln(run.Stdout, coverageNote(members, stats))
		return nil
	}
	var trialTimeout time.Duration
	if opts.TrialTimeout != "" {
		if trialTimeout, err = time.ParseDuration(opts.TrialTimeout); err != nil || trialTimeout <= 0 {
			return mneme.BadInput(fmt.Errorf("--trial-timeout %q: want a positive duration like 30s", opts.TrialTimeout))
		}
	}
	res, prior, logFile, err := openRun(opts, run.Resume, desc)
	if err != nil {
		return err
	}
	defer res.Close()
	defer logFile.Close()
	now := func() string { return time.Now().Format(time.RFC3339) }
	fmt.Fprintf(logFile, "%s mneme tune across %d instances of %s, %s space %q (%d points), sampler %s, trials %d\n",
		now(), len(members), k.Name(), spaceKind(opts), lead.t.space.Name, desc.Size, opts.Sampler, opts.Trials)
	for _, m := range members {
		fmt.Fprintf(logFile, "%s instance %s: grid %s block %s shared %d, stands for %.0f launches\n",
			now(), m.id, m.t.inst.GridDims, m.t.inst.BlockDims, m.t.inst.SharedMem, m.launches)
	}
	fmt.Fprintf(logFile, "%s %s\n%s %s\n%s %s\n", now(), geo.Note, now(), fold, now(), coverageNote(members, stats))

	x := &instanceExec{members: members, metric: opts.Metric, lead: lead.t.space.Baseline,
		variantCost: func(c mneme.Config) float64 { return fold.VariantCostNS(c, 1000*opts.VariantCostUS) }}
	for i, m := range members {
		ro := run.RunOptions
		if i > 0 {
			ro.CompileWorkers = 0 // one set of compile workers fills the shared cache
		}
		m.exec = newExecutor(ro, opts, m.t, trialTimeout, logFile)
	}
	if err := x.Start(ctx); err != nil {
		if !run.Resume {
			res.Close()
			os.Remove(filepath.Join(opts.Output, TrialsFile))
		}
		if errors.Is(err, mneme.ErrNoGPU) {
			return fmt.Errorf("tune needs a GPU: %w", err)
		}
		return err
	}
	defer x.Close()
	study := &Study{Space: lead.t.space, Sampler: sampler, Exec: x, Results: res, Opts: opts, Prior: prior,
		BaselineConfigs: lead.t.baselines(), Geometry: &geo, Log: logFile}
	return runInstanceTrials(ctx, run, study, k, members, stats, fold, desc)
}

// runInstanceTrials replays the baseline on every instance, runs the study,
// writes the results and prints the best configurations with the figures of
// each instance.
func runInstanceTrials(ctx context.Context, run InstancesOptions, study *Study, k *db.Kernel, members []*member, stats *KernelStats, fold FoldPolicy, desc Describe) error {
	base, err := study.RunBaseline(ctx)
	if err != nil {
		return err
	}
	if err := writeGeometry(study.Results, study.Geometry); err != nil {
		return err
	}
	opts := study.Opts
	// Device's second value is the kernel the workers opened, not the GPU.
	dev, _ := study.Exec.Device()
	gpuName := ""
	if dev != nil {
		gpuName = dev.Name
	}
	fmt.Fprintf(run.Stderr, "baseline: %s across %d instances on %s: %s (the launches' total by %s; trial 0, %s)\n",
		k.Name(), len(members), gpuName, fmtNS(base.TimeNS), opts.Metric, baselineKind(base.Config))
	fmt.Fprintln(run.Stderr, study.Geometry.Note)
	fmt.Fprintln(run.Stderr, fold)
	fmt.Fprintln(run.Stderr, coverageNote(members, stats))
	if run.BaselineOnly {
		return nil
	}
	runErr := runWithProgress(ctx, study, trialBudget(opts, desc), run.Progress)
	sum, err := study.Finish(k.KernelName, k.StaticHash, gpuName, desc.Size, len(study.Prior))
	if err != nil {
		return err
	}
	if err := amendTuned(study, k, members, stats, fold, sum); err != nil {
		return err
	}
	printBestTable(run.Stdout, study.Trials(), base, sum, opts)
	printInstanceFigures(run.Stdout, study, sum)
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return fmt.Errorf("interrupted after %d trials; continue with --resume", sum.Trials)
		}
		return runErr
	}
	return nil
}

// selectInstances finds the instances a run across instances tunes: every
// instance of the kernel named, or the instances given by id, which must
// belong to one kernel.
func selectInstances(dbPath, kernel string, ids []string) (*db.DB, *db.Kernel, []*db.Instance, error) {
	if dbPath == "" {
		return nil, nil, nil, mneme.BadInput(errors.New("-rdb: a recording database (directory or kernel .json) is required"))
	}
	if (kernel == "") == (len(ids) == 0) {
		return nil, nil, nil, mneme.BadInput(errors.New("--kernel or -rid: give one (the kernel whose instances to tune, or the instances)"))
	}
	d, err := db.Open(dbPath)
	if err != nil {
		return nil, nil, nil, mneme.BadInput(err)
	}
	if kernel != "" {
		var found []*db.Kernel
		for _, k := range d.Kernels {
			if k.KernelName == kernel || k.DemangledName == kernel || k.StaticHash == kernel || strings.HasPrefix(k.DemangledName, kernel+"(") {
				found = append(found, k)
			}
		}
		switch {
		case len(found) == 0:
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("--kernel %q: no kernel of that name or static hash in %s", kernel, dbPath))
		case len(found) > 1:
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("--kernel %q: %d kernels match; name one by its mangled name or static hash", kernel, len(found)))
		}
		k := found[0]
		var insts []*db.Instance
		for _, id := range k.InstanceIDs() {
			insts = append(insts, k.Instances[id])
		}
		if len(insts) == 0 {
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("--kernel %q: the recording holds no instance of it", kernel))
		}
		return d, k, insts, nil
	}
	var k *db.Kernel
	var insts []*db.Instance
	seen := map[*db.Instance]bool{}
	for _, id := range ids {
		ki, inst, err := d.Find(id)
		if err != nil {
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("-rid %s: %w", id, err))
		}
		if k != nil && ki != k {
			return nil, nil, nil, mneme.BadInput(fmt.Errorf("-rid %s: an instance of %s, not of %s: a run tunes one kernel", id, ki.Name(), k.Name()))
		}
		k = ki
		if !seen[inst] {
			seen[inst] = true
			insts = append(insts, inst)
		}
	}
	return d, k, insts, nil
}

// uncoveredShapes are the run's launch shapes (by the statistics) that no
// selected instance has.
func uncoveredShapes(members []*member, stats *KernelStats) []ShapeStats {
	if stats == nil {
		return nil
	}
	have := map[shapeKey]bool{}
	for _, m := range members {
		have[instShape(m.t.inst)] = true
	}
	var out []ShapeStats
	for _, s := range stats.Shapes {
		if !have[shapeKey{normDim(s.Grid), normDim(s.Block), s.SharedMem}] {
			out = append(out, s)
		}
	}
	return out
}

// coverageNote says how many of the run's launches the selected instances
// stand for, and which shapes none of them has.
func coverageNote(members []*member, stats *KernelStats) string {
	if stats == nil {
		return "coverage: no launch statistics: each instance stands for the launches the recording counted for it"
	}
	covered := 0.0
	for _, m := range members {
		covered += m.launches
	}
	note := fmt.Sprintf("coverage: the instances stand for %.0f of the run's %d launches", covered, stats.Launches)
	un := uncoveredShapes(members, stats)
	if len(un) == 0 {
		return note
	}
	var parts []string
	for _, s := range un {
		parts = append(parts, fmt.Sprintf("grid %s block %s shared %d (%d launches)", normDim(s.Grid), normDim(s.Block), s.SharedMem, s.Launches))
	}
	return note + "; shapes without an instance, which keep the application's own code: " + strings.Join(parts, ", ")
}

// shapeKey identifies a launch shape.
type shapeKey struct {
	grid, block mneme.Dim3
	shared      uint32
}

func instShape(inst *db.Instance) shapeKey {
	return shapeKey{normDim(inst.GridDims), normDim(inst.BlockDims), inst.SharedMem}
}

// instanceWeights are the launches each instance stands for: with
// statistics, its shape's launches shared among the selected instances of
// that shape; without, the launches the recording counted for it.
func instanceWeights(insts []*db.Instance, stats *KernelStats) []float64 {
	perShape := map[shapeKey]float64{}
	if stats != nil {
		for _, s := range stats.Shapes {
			perShape[shapeKey{normDim(s.Grid), normDim(s.Block), s.SharedMem}] += float64(s.Launches)
		}
	}
	count := map[shapeKey]int{}
	for _, inst := range insts {
		count[instShape(inst)]++
	}
	w := make([]float64, len(insts))
	for i, inst := range insts {
		if n, ok := perShape[instShape(inst)]; ok && n > 0 {
			w[i] = n / float64(count[instShape(inst)])
		} else {
			w[i] = float64(max(inst.Occurrences, 1))
		}
	}
	return w
}

func cmpFloatDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// forInstance is the configuration c (derived for the lead instance, whose
// recorded launch is lead) as instance inst launches it: the instance's own
// grid and block where c keeps the lead's recorded launch, else c's block
// with the grid recomputed to cover the instance's threads; always the
// instance's shared memory. Launch bounds that follow the block follow it.
func forInstance(c mneme.Config, lead mneme.Config, inst *db.Instance) mneme.Config {
	out := c
	g, b := normDim(inst.GridDims), normDim(inst.BlockDims)
	out.SharedMem = inst.SharedMem
	if c.Grid == lead.Grid && c.Block == lead.Block {
		out.Grid, out.Block = g, b
	} else {
		out.Block = c.Block
		out.Grid = mneme.Dim3{
			X: uint32(ceilDiv(uint64(g.X)*uint64(b.X), uint64(max(c.Block.X, 1)))),
			Y: uint32(ceilDiv(uint64(g.Y)*uint64(b.Y), uint64(max(c.Block.Y, 1)))),
			Z: uint32(ceilDiv(uint64(g.Z)*uint64(b.Z), uint64(max(c.Block.Z, 1)))),
		}
	}
	if c.SetLaunchBounds && c.MaxThreads == int(c.Block.Count()) {
		out.MaxThreads = int(out.Block.Count())
	}
	return out
}

// everyInstanceName is the constraint a run across instances adds: a
// configuration must be a valid launch for every instance.
const everyInstanceName = "the configuration is a valid launch for every instance"

// everyInstanceConstraint keeps the search to configurations whose launch
// is valid for every instance (within the device's limits, and covering
// exactly the instance's threads where the kernel's index is unguarded).
func everyInstanceConstraint(s *Space, members []*member, exactCover bool) Constraint {
	derive, lead := s.Derive, s.Baseline
	return Constraint{Name: everyInstanceName, Check: func(pt Point) (bool, error) {
		c, err := derive(pt)
		if err != nil {
			return true, nil // Evaluate reports the derivation's own error
		}
		for _, m := range members[1:] {
			ci := forInstance(c, lead, m.t.inst)
			if s.Limits.Check(ci) != nil || ci.Validate() != nil {
				return false, nil
			}
			if exactCover && !geometry.CoversExactly(ci.Grid, ci.Block, m.t.inst.GridDims, m.t.inst.BlockDims) {
				return false, nil
			}
		}
		return true, nil
	}}
}

// instanceExec runs each job on every instance, each on its own executor,
// and answers with one result: the first failure of any instance, or,
// when all verified, the total the application would see as the one
// execution time (so every metric of it is the total), with each
// instance's figures in Instances.
type instanceExec struct {
	members []*member
	metric  string
	lead    mneme.Config // the lead instance's recorded launch
	// variantCost is what a configuration's variants beyond the first cost
	// the application at their first launches (FoldPolicy.VariantCostNS),
	// added to its total; nil adds nothing.
	variantCost func(mneme.Config) float64

	mu      sync.Mutex
	pending map[int]*gather
	results chan JobResult
	stop    chan struct{}
	wg      sync.WaitGroup
}

// gather collects one job's results from every instance.
type gather struct {
	job  Job
	got  []JobResult
	have int
}

func (x *instanceExec) Start(ctx context.Context) error {
	x.pending = map[int]*gather{}
	x.results = make(chan JobResult, 64)
	x.stop = make(chan struct{})
	for i, m := range x.members {
		if err := m.exec.Start(ctx); err != nil {
			for _, started := range x.members[:i] {
				started.exec.Close()
			}
			return fmt.Errorf("instance %s: %w", m.id, err)
		}
	}
	for i, m := range x.members {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			for {
				select {
				case r := <-m.exec.Results():
					x.collect(i, r)
				case <-x.stop:
					return
				}
			}
		}()
	}
	return nil
}

func (x *instanceExec) Close() {
	close(x.stop)
	x.wg.Wait()
	for _, m := range x.members {
		m.exec.Close()
	}
}

func (x *instanceExec) Submit(j Job) {
	x.mu.Lock()
	x.pending[j.ID] = &gather{job: j, got: make([]JobResult, len(x.members))}
	x.mu.Unlock()
	for _, m := range x.members {
		m.exec.Submit(Job{ID: j.ID, Config: forInstance(j.Config, x.lead, m.t.inst)})
	}
}

func (x *instanceExec) collect(i int, r JobResult) {
	x.mu.Lock()
	g, ok := x.pending[r.Job.ID]
	if !ok {
		x.mu.Unlock()
		return
	}
	g.got[i] = r
	g.have++
	done := g.have == len(x.members)
	if done {
		delete(x.pending, r.Job.ID)
	}
	x.mu.Unlock()
	if done {
		select {
		case x.results <- combineInstances(g.job, g.got, x.members, x.metric, x.variantCost):
		case <-x.stop:
		}
	}
}

func (x *instanceExec) Results() <-chan JobResult { return x.results }

// Capacity is the smallest of the executors': a job occupies a worker of
// each.
func (x *instanceExec) Capacity() int {
	c := math.MaxInt
	for _, m := range x.members {
		c = min(c, m.exec.Capacity())
	}
	return c
}

func (x *instanceExec) Err() error {
	for _, m := range x.members {
		if err := m.exec.Err(); err != nil {
			return fmt.Errorf("instance %s: %w", m.id, err)
		}
	}
	return nil
}

func (x *instanceExec) Device() (*mneme.DeviceLimits, string) { return x.members[0].exec.Device() }

func (x *instanceExec) SetTrialTimeout(d time.Duration) {
	for _, m := range x.members {
		m.exec.SetTrialTimeout(d)
	}
}

// combineInstances makes one result of a job's results on every instance:
// the total the application would see, each instance's time times the
// launches it stands for, plus the first launches of the variants the
// configuration makes the runtime compile beyond one (variantCost).
func combineInstances(job Job, rs []JobResult, members []*member, metric string, variantCost func(mneme.Config) float64) JobResult {
	out := JobResult{Job: job, Worker: rs[0].Worker, GPU: rs[0].GPU, Start: rs[0].Start, End: rs[0].End}
	total := 0.0
	for i, r := range rs {
		m := members[i]
		fig := InstanceFigure{Instance: m.id, Grid: r.Job.Config.Grid, Block: r.Job.Config.Block, Launches: m.launches, Status: r.Status, Error: r.Error}
		if r.Start.Before(out.Start) {
			out.Start = r.Start
		}
		if r.End.After(out.End) {
			out.End = r.End
		}
		out.Crashes += r.Crashes
		if r.Status == mneme.StatusVerified {
			if t := MetricOf(metric, r.Result.ExecTime); t > 0 && !math.IsNaN(t) {
				fig.TimeNS = t
				total += t * m.launches
			} else {
				fig.Status, fig.Error = mneme.StatusInternalError, "verified result without execution times"
			}
		}
		if fig.Status != mneme.StatusVerified && out.Status == "" {
			out.Status, out.Error, out.Result = fig.Status, fmt.Sprintf("instance %s: %s", m.id, fig.Error), r.Result
			out.Worker, out.GPU = r.Worker, r.GPU
		}
		out.Instances = append(out.Instances, fig)
	}
	if out.Status == "" {
		out.Status = mneme.StatusVerified
		out.Result = rs[0].Result
		if variantCost != nil {
			out.VariantCostNS = variantCost(job.Config)
			total += out.VariantCostNS
		}
		out.Result.ExecTime = []float64{total}
	}
	return out
}

// amendTuned adds to the kernel's entry of the tuned file what a run across
// instances knows: each instance's figures, the folding and its statistics,
// and one configuration per launch-shape class where the classes' best
// configurations differ.
func amendTuned(study *Study, k *db.Kernel, members []*member, stats *KernelStats, fold FoldPolicy, sum Summary) error {
	if study.Results == nil {
		return nil
	}
	trials := study.Trials()
	var best Trial
	for _, t := range trials {
		if t.Number == sum.BestTrial {
			best = t
		}
	}
	if sum.BaselineIsBest {
		best = study.Baseline()
	}
	classes := shapeClasses(trials, study.Baseline(), best, members, study.Space.Baseline, len(uncoveredShapes(members, stats)) > 0, 1000*study.Opts.VariantCostUS)
	if sum.BaselineIsBest && len(classes) == 0 {
		sum.Folding = fold.String()
		return study.Results.WriteJSON(SummaryFile, sum)
	}
	var tk TunedKernel
	if sum.BaselineIsBest {
		// No single configuration wins, but some shapes have a winner of
		// their own: the entry's configuration is the baseline.
		b := study.Baseline()
		tk = TunedKernel{Config: b.Config, Instance: study.Opts.Instance, StaticHash: k.StaticHash, Speedup: 1,
			TimeNS: b.TimeNS, BaselineTimeNS: b.TimeNS, Metric: study.Opts.Metric, TunedAt: time.Now().UTC().Format(time.RFC3339)}
		tk.RecordedGrid, tk.RecordedBlock = study.recordedLaunch()
		tk.LaunchSearched = study.deploysBlock(sum)
	} else {
		entries := map[string]TunedKernel{}
		if err := readJSONFile(filepath.Join(study.Opts.Output, MnemeTunedFile), &entries); err != nil {
			return err
		}
		var ok bool
		if tk, ok = entries[k.KernelName]; !ok {
			return fmt.Errorf("%s: the entry of %s is missing", MnemeTunedFile, k.KernelName)
		}
	}
	baseFigs := figuresByInstance(study.Baseline())
	for _, f := range best.Instances {
		tk.Instances = append(tk.Instances, deploy.TunedInstance{Instance: f.Instance, Grid: f.Grid, Block: f.Block,
			SharedMem: memberOf(members, f.Instance).t.inst.SharedMem, Launches: f.Launches, TimeNS: f.TimeNS, BaselineTimeNS: baseFigs[f.Instance].TimeNS})
	}
	var insts []*db.Instance
	for _, m := range members {
		insts = append(insts, m.t.inst)
	}
	configs := []mneme.Config{tk.Config}
	for _, c := range classes {
		configs = append(configs, c.Config)
	}
	tk.Statistics, tk.Folded, tk.Classes = fold.Statistics, foldedArgs(configs, k, stats, insts), classes
	sum.Folding = fold.String()
	if err := study.Results.WriteJSON(SummaryFile, sum); err != nil {
		return err
	}
	return study.Results.MergeJSONMap(MnemeTunedFile, k.KernelName, tk)
}

func memberOf(members []*member, id string) *member {
	for _, m := range members {
		if m.id == id {
			return m
		}
	}
	return members[0]
}

func figuresByInstance(t Trial) map[string]InstanceFigure {
	out := map[string]InstanceFigure{}
	for _, f := range t.Instances {
		out[f.Instance] = f
	}
	return out
}

// shapeClasses groups the instances by launch shape and finds each class's
// best configuration (the smallest total over the class's instances among
// trials that verified on all of them). It returns one class per shape
// whose best beats the baseline there, and nothing when there is one shape
// or every class's best is the same configuration: one configuration then
// serves all.
//
// A shape's own best must save the application more than minSaving (a
// variant's first launch, VariantFirstLaunchNS) over best, the
// configuration chosen for all, on that shape's launches; else the shape
// takes best's configuration, whose code the other shapes share.
//
// With uncovered set (the run had launch shapes no selected instance has),
// every shape with a winner gets its class even when they agree, so that
// the launches of the uncovered shapes, never measured, run the
// application's own code.
func shapeClasses(trials []Trial, base, best Trial, members []*member, lead mneme.Config, uncovered bool, minSaving float64) []deploy.TunedClass {
	byShape := map[shapeKey][]*member{}
	var shapes []shapeKey
	for _, m := range members {
		s := instShape(m.t.inst)
		if _, ok := byShape[s]; !ok {
			shapes = append(shapes, s)
		}
		byShape[s] = append(byShape[s], m)
	}
	if len(shapes) < 2 && !uncovered {
		return nil
	}
	classTotal := func(t Trial, ms []*member) (float64, bool) {
		figs := figuresByInstance(t)
		total := 0.0
		for _, m := range ms {
			f, ok := figs[m.id]
			if !ok || f.Status != mneme.StatusVerified || f.TimeNS <= 0 {
				return 0, false
			}
			total += f.TimeNS * m.launches
		}
		return total, true
	}
	var classes []deploy.TunedClass
	keys := map[string]bool{}
	for _, s := range shapes {
		ms := byShape[s]
		baseTotal, ok := classTotal(base, ms)
		if !ok {
			continue
		}
		var bestT *Trial
		bestTotal := baseTotal
		for i := range trials {
			t := &trials[i]
			if t.IsBaseline() || !t.OK() {
				continue
			}
			if total, ok := classTotal(*t, ms); ok && total < bestTotal {
				bestT, bestTotal = t, total
			}
		}
		if bestT != nil && !best.IsBaseline() && best.OK() && bestT.ConfigKey != best.ConfigKey {
			if chosen, ok := classTotal(best, ms); ok && chosen < baseTotal && chosen-bestTotal < minSaving {
				bestT, bestTotal = &best, chosen // too little to pay for code of its own
			}
		}
		key := "baseline"
		if bestT != nil {
			key = bestT.ConfigKey
		}
		keys[key] = true
		if bestT == nil {
			continue // the application's own code serves this shape best
		}
		c := deploy.TunedClass{Grid: s.grid, Block: s.block, SharedMem: s.shared,
			Config: forInstance(bestT.Config, lead, ms[0].t.inst), TimeNS: bestTotal, BaselineTimeNS: baseTotal, Speedup: baseTotal / bestTotal}
		for _, m := range ms {
			c.Launches += m.launches
			c.Instances = append(c.Instances, m.id)
		}
		classes = append(classes, c)
	}
	if len(keys) < 2 && !uncovered {
		return nil
	}
	return classes
}

// printMembers lists a dry run's instances and the folding.
func printMembers(w interface{ Write([]byte) (int, error) }, members []*member, fold FoldPolicy) {
	fmt.Fprintf(w, "instances: %d, the first leads\n", len(members))
	for _, m := range members {
		fmt.Fprintf(w, "  %s  grid %s block %s shared %d  stands for %.0f launches\n", m.id, m.t.inst.GridDims, m.t.inst.BlockDims, m.t.inst.SharedMem, m.launches)
	}
	fmt.Fprintln(w, fold)
}

// printInstanceFigures prints the best configuration's time on each
// instance against the baseline's.
func printInstanceFigures(w interface{ Write([]byte) (int, error) }, study *Study, sum Summary) {
	var best Trial
	for _, t := range study.Trials() {
		if t.Number == sum.BestTrial {
			best = t
		}
	}
	if sum.BaselineIsBest {
		best = study.Baseline()
	}
	base := figuresByInstance(study.Baseline())
	fmt.Fprintln(w, "per instance (best configuration vs baseline):")
	for _, f := range best.Instances {
		b := base[f.Instance]
		speedup := 0.0
		if f.TimeNS > 0 {
			speedup = b.TimeNS / f.TimeNS
		}
		fmt.Fprintf(w, "  %s  grid %s block %s  x%.0f launches  %s vs %s  %.3fx\n", f.Instance, f.Grid, f.Block, f.Launches, fmtNS(f.TimeNS), fmtNS(b.TimeNS), speedup)
	}
}

// printSpace prints a space description as --print-space does.
func printSpace(w interface{ Write([]byte) (int, error) }, desc Describe) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // pipelines are written default<O3>
	return enc.Encode(desc)
}

// readJSONFile decodes a JSON file of the results directory.
func readJSONFile(path string, v any) error {
	data, err := safefile.ReadFile(path, safefile.MaxJSON)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
