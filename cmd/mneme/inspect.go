package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

func init() {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "inspect DB_DIR|KERNEL.json",
		Short: "List the kernels and recorded instances of a recording database",
		Long: `inspect prints every kernel of a recording database and every recorded
instance of it: the instance id (give it, or any unique prefix, to replay -rid),
grid and block, dynamic shared memory, the argument values decoded by kind,
how often the launch occurred, and the sizes of the snapshots around it. A
header line names the GPU and toolchain the database was recorded with.

When the recording kept launch statistics (` + db.LaunchStatsFileName + `), they follow:
every kernel the application launched, recorded or not, by its share of the
run's GPU time (events on a sample of launches, scaled to all), with its
launch shapes (each shape's share of the kernel's time, its mean timed
launch and the instances recorded for it), the share of its time whose
shapes have a recorded instance, and per argument whether it held one value
over the run or how many it took. A database whose kernels were none of
them recorded shows its statistics alone.
--json prints the same as one JSON document ("launch_stats").`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withExit(exitUsage, fmt.Errorf("inspect: want one database directory or kernel .json file, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := inspectPath(args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return withExit(exitFailure, enc.Encode(doc))
			}
			if doc.NumKernels > 0 {
				if err := printInspectTable(cmd.OutOrStdout(), doc); err != nil {
					return withExit(exitFailure, err)
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "database %s: no kernel was recorded\n", termSafe(doc.Database, false))
			}
			if doc.LaunchStats != nil {
				return withExit(exitFailure, printStatsTable(cmd.OutOrStdout(), doc.LaunchStats))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON document instead of a table")
	rootCmd.AddCommand(cmd)
}

// inspectDoc is what `inspect --json` prints.
type inspectDoc struct {
	Database     string          `json:"database"`
	NumKernels   int             `json:"num_kernels"`
	NumInstances int             `json:"num_instances"`
	Kernels      []inspectKernel `json:"kernels"`
	// LaunchStats are the run's launch statistics; absent from recordings
	// made before they were kept.
	LaunchStats *inspectStats `json:"launch_stats,omitempty"`
}

// inspectPath reads a database (or one kernel file) and its launch
// statistics. A directory with statistics and no kernel file (no kernel
// was selected, or none could be recorded) is shown by its statistics.
func inspectPath(path string) (inspectDoc, error) {
	d, err := db.Open(path)
	if err != nil {
		// Only a directory without kernel files: a kernel file that does
		// not read is an error, whatever else the directory holds.
		fi, statErr := os.Stat(path)
		if kernels, _ := filepath.Glob(filepath.Join(path, "*.json")); statErr != nil || !fi.IsDir() || len(kernels) > 0 {
			return inspectDoc{}, err
		}
		s, serr := db.ReadLaunchStats(path)
		if serr != nil {
			return inspectDoc{}, err
		}
		return inspectDoc{Database: path, Kernels: []inspectKernel{}, LaunchStats: describeStats(s, nil, filepath.Join(path, db.LaunchStatsFileName), nil)}, nil
	}
	doc := describeDB(d)
	s, err := db.ReadLaunchStats(d.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return inspectDoc{}, err
	default:
		doc.LaunchStats = describeStats(s, d, filepath.Join(d.Dir, db.LaunchStatsFileName), shortIDs(d))
	}
	return doc, nil
}

type inspectKernel struct {
	StaticHash    string      `json:"static_hash"`
	KernelName    string      `json:"kernel_name"`
	DemangledName string      `json:"demangled_name"`
	IRModule      inspectFile `json:"ir_module"`
	// Code is "machine" for a kernel recorded through the driver (no IR:
	// DeviceCode is its code), "ir" otherwise.
	Code       string            `json:"code"`
	DeviceCode *inspectFile      `json:"device_code,omitempty"`
	VAddr      string            `json:"va_addr"`
	VASize     uint64            `json:"va_size"`
	Device     db.DeviceInfo     `json:"device"`
	Toolchain  db.Toolchain      `json:"toolchain"`
	Params     []inspectParam    `json:"params"`
	Instances  []inspectInstance `json:"instances"`
}

type inspectParam struct {
	Name          string `json:"name"`
	Kind          string `json:"kind"`
	Size          uint64 `json:"size"`
	Specializable bool   `json:"specializable"`
}

type inspectInstance struct {
	ID          string       `json:"id"`       // <static-hash>/<dynamic-hash>, always unambiguous
	ShortID     string       `json:"short_id"` // shortest form that -rid accepts unambiguously
	Grid        mneme.Dim3   `json:"grid"`
	Block       mneme.Dim3   `json:"block"`
	SharedMem   uint32       `json:"shared_mem"`
	Args        []inspectArg `json:"args"`
	Occurrences int          `json:"occurrences"`
	RecordedAt  string       `json:"recorded_at,omitempty"`
	Prologue    inspectFile  `json:"prologue"`
	Epilogue    inspectFile  `json:"epilogue"`
}

type inspectArg struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Hex   string `json:"hex"`
	Value string `json:"value"` // decoded by kind: decimal, float, 0x pointer, or hex bytes
}

type inspectFile struct {
	File    string `json:"file"`
	Bytes   uint64 `json:"bytes"`
	Present bool   `json:"present"`
}

func describeFile(d *db.DB, name string, recorded uint64) inspectFile {
	f := inspectFile{File: name, Bytes: recorded}
	if fi, err := os.Stat(d.Path(name)); err == nil && fi.Mode().IsRegular() {
		f.Present = true
		f.Bytes = uint64(fi.Size())
	}
	return f
}

func describeDB(d *db.DB) inspectDoc {
	doc := inspectDoc{Database: d.Dir, NumKernels: len(d.Kernels), NumInstances: d.NumInstances(), Kernels: []inspectKernel{}}
	short := shortIDs(d)
	for _, k := range d.Kernels {
		ik := inspectKernel{
			StaticHash: k.StaticHash, KernelName: k.KernelName, DemangledName: k.DemangledName,
			Code: db.CodeIR, VAddr: k.VAddr, VASize: k.VASize,
			Device: k.Device, Toolchain: k.Toolchain, Params: []inspectParam{}, Instances: []inspectInstance{},
		}
		if k.MachineCodeOnly() {
			ik.Code = db.CodeMachine
		} else {
			ik.IRModule = describeFile(d, k.Modules[0], 0)
		}
		if k.DeviceCode != "" {
			dc := describeFile(d, k.DeviceCode, 0)
			ik.DeviceCode = &dc
		}
		for i := range k.ArgSizes {
			ik.Params = append(ik.Params, inspectParam{Name: k.ArgNames[i], Kind: k.ArgKinds[i].String(), Size: k.ArgSizes[i], Specializable: k.Specializations[i]})
		}
		for _, id := range k.InstanceIDs() {
			inst := k.Instances[id]
			ref := db.InstanceRef{Kernel: k, Instance: inst}
			ii := inspectInstance{
				ID: ref.ID(), ShortID: short[ref.ID()], Grid: inst.GridDims, Block: inst.BlockDims,
				SharedMem: inst.SharedMem, Args: []inspectArg{}, Occurrences: inst.Occurrences, RecordedAt: inst.RecordedAt,
				Prologue: describeFile(d, inst.Prologue, inst.PrologueBytes),
				Epilogue: describeFile(d, inst.Epilogue, inst.EpilogueBytes),
			}
			args, _ := inst.ArgBytes() // validated when the database was opened
			for i, a := range args {
				ii.Args = append(ii.Args, inspectArg{Name: k.ArgNames[i], Kind: k.ArgKinds[i].String(), Hex: hex.EncodeToString(a), Value: k.ArgKinds[i].Format(a)})
			}
			ik.Instances = append(ik.Instances, ii)
		}
		doc.Kernels = append(doc.Kernels, ik)
	}
	return doc
}

// shortIDs gives each instance the shortest id (at least 8 digits of its
// dynamic hash) that Find resolves to it alone; a dynamic hash two kernels
// share gets the <static-hash>/<dynamic-hash> form.
func shortIDs(d *db.DB) map[string]string {
	all := d.All()
	// Sorted by dynamic hash, the longest prefix an instance shares with any
	// other is the one it shares with a neighbour: one more digit (at
	// least 8) is unique, which is what db.Find resolves.
	sorted := append([]db.InstanceRef(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Instance.DynamicHash < sorted[j].Instance.DynamicHash })
	uniform := true // every dynamic hash of one length, as db.DynamicHash makes them
	for _, r := range all {
		uniform = uniform && len(r.Instance.DynamicHash) == len(all[0].Instance.DynamicHash)
	}
	resolves := func(id string, r db.InstanceRef) bool {
		k, inst, err := d.Find(id)
		return err == nil && k == r.Kernel && inst == r.Instance
	}
	out := make(map[string]string, len(all))
	for i, r := range sorted {
		dh := r.Instance.DynamicHash
		shared := 0
		for _, j := range []int{i - 1, i + 1} {
			if j >= 0 && j < len(sorted) {
				shared = max(shared, commonPrefix(dh, sorted[j].Instance.DynamicHash))
			}
		}
		if id := dh[:min(max(8, shared+1), len(dh))]; shared < len(dh) && (uniform || resolves(id, r)) {
			out[r.ID()] = id
			continue
		}
		// The same launch recorded for two kernels: qualify it.
		sh := r.Kernel.StaticHash
		id := sh[:min(8, len(sh))] + "/" + dh[:min(8, len(dh))]
		if !resolves(id, r) {
			id = r.ID()
		}
		out[r.ID()] = id
	}
	return out
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func humanBytes(n uint64) string { return db.FormatSize(n) }

func fileCell(f inspectFile) string {
	if !f.Present {
		return "missing"
	}
	return humanBytes(f.Bytes)
}

// describeRecording is the header line for one device and toolchain.
func describeRecording(dev db.DeviceInfo, tc db.Toolchain) string {
	var parts []string
	if dev.Arch != "" {
		parts = append(parts, dev.Arch)
	}
	if dev.ComputeCapability != "" {
		parts = append(parts, "compute "+dev.ComputeCapability)
	}
	if dev.SMCount > 0 {
		parts = append(parts, fmt.Sprintf("%d SMs", dev.SMCount))
	}
	if dev.TotalMem > 0 {
		parts = append(parts, humanBytes(dev.TotalMem))
	}
	if dev.DriverVersion > 0 {
		parts = append(parts, fmt.Sprintf("driver %d.%d", dev.DriverVersion/1000, dev.DriverVersion%1000/10))
	}
	name := dev.Name
	if name == "" {
		name = "an unrecorded GPU"
	}
	s := "recorded on " + name
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	var tools []string
	for _, t := range []struct{ name, v string }{{"mneme", tc.Mneme}, {"LLVM", tc.LLVM}, {"clang", tc.Clang}, {"CUDA", tc.CUDA}} {
		if t.v != "" {
			tools = append(tools, t.name+" "+t.v)
		}
	}
	if len(tools) > 0 {
		s += " with " + strings.Join(tools, ", ")
	}
	return s
}

func printInspectTable(w io.Writer, doc inspectDoc) error {
	fmt.Fprintf(w, "database %s: %d kernels, %d instances\n", termSafe(doc.Database, false), doc.NumKernels, doc.NumInstances)
	// Usually one line; a database merged from several runs may have more.
	recordings := map[string][]string{}
	for _, k := range doc.Kernels {
		line := describeRecording(k.Device, k.Toolchain)
		recordings[line] = append(recordings[line], k.StaticHash)
	}
	lines := make([]string, 0, len(recordings))
	for line := range recordings {
		lines = append(lines, line)
	}
	sort.Strings(lines)
	for _, line := range lines {
		if len(lines) > 1 {
			line += fmt.Sprintf(" [%d kernels]", len(recordings[line]))
		}
		fmt.Fprintln(w, termSafe(line, false))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tINSTANCE\tGRID\tBLOCK\tSHMEM\tARGS\tOCC\tPROLOGUE\tEPILOGUE")
	for _, k := range doc.Kernels {
		name := k.DemangledName
		if name == "" {
			name = k.KernelName
		}
		switch {
		case k.Code == db.CodeMachine:
			name += " (machine code only)"
		case !k.IRModule.Present:
			name += " (IR missing)"
		}
		for _, inst := range k.Instances {
			args := make([]string, len(inst.Args))
			for i, a := range inst.Args {
				label := a.Name
				if label == "" {
					label = "arg" + strconv.Itoa(i)
				}
				args[i] = label + "=" + a.Value
			}
			// Tabs too: they would shift the table's columns.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", cell(name), cell(inst.ShortID), inst.Grid, inst.Block, inst.SharedMem,
				cell(strings.Join(args, " ")), inst.Occurrences, cell(fileCell(inst.Prologue)), cell(fileCell(inst.Epilogue)))
		}
	}
	return tw.Flush()
}

// cell is a table cell as the terminal may show it: escaped, tabs included.
func cell(s string) string { return strings.ReplaceAll(termSafe(s, false), "\t", `\t`) }
