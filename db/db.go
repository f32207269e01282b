package db

import (
	"errors"
	"fmt"
	"github.com/mneme-gpu/mneme"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// DB is a recording database opened for reading: every kernel file of a
// directory (or the single kernel file it was opened with).
type DB struct {
	Dir     string    // the directory the files named inside kernels live in
	Kernels []*Kernel // sorted by kernel name, then static hash
}

// Errors of Find, for callers that map them to exit codes.
var (
	ErrNoInstance        = errors.New("no such instance")
	ErrAmbiguousInstance = errors.New("ambiguous instance id")
)

// rankDirs lists the rank-N subdirectories of dir that hold kernel files:
// where `mneme record --record-ranks` put several ranks' recordings.
func rankDirs(dir string) []string {
	subs, _ := filepath.Glob(filepath.Join(dir, "rank-*"))
	var out []string
	for _, sd := range subs {
		if k, _ := filepath.Glob(filepath.Join(sd, "*.json")); len(k) > 0 {
			out = append(out, sd)
		}
	}
	sort.Strings(out)
	return out
}

// Open reads a database directory (every <static-hash>.json in it) or one
// kernel file. Any file that does not read back cleanly fails the whole open,
// naming the file.
func Open(path string) (*DB, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("recording database %s: does not exist", path)
		}
		return nil, fmt.Errorf("recording database %s: %w", path, err)
	}
	d := &DB{}
	var files []string
	if fi.IsDir() {
		d.Dir = path
		files, err = filepath.Glob(filepath.Join(path, "*.json"))
		if err != nil {
			return nil, fmt.Errorf("recording database %s: %w", path, err)
		}
		if len(files) == 0 {
			if ranks := rankDirs(path); len(ranks) > 0 {
				return nil, fmt.Errorf("recording database %s: no kernel files (*.json) in the directory; it holds the recordings of several MPI ranks, one database each: %s", path, strings.Join(ranks, ", "))
			}
			return nil, fmt.Errorf("recording database %s: no kernel files (*.json) in the directory", path)
		}
	} else {
		if !strings.HasSuffix(path, ".json") {
			return nil, fmt.Errorf("recording database %s: want a database directory or a kernel .json file", path)
		}
		d.Dir = filepath.Dir(path)
		files = []string{path}
	}
	for _, f := range files {
		var k *Kernel
		if fi.IsDir() {
			k, err = readKernelIn(d.Dir, filepath.Base(f))
			// A kernel's file is named by its static hash: a copy under
			// another name would be a second kernel of the same hash,
			// whose instances no id could tell apart.
			if err == nil && filepath.Base(f) != k.StaticHash+".json" {
				err = mneme.BadInput(fmt.Errorf("%s: StaticHash %q is not the file's name (a kernel file is named <StaticHash>.json)", f, k.StaticHash))
			}
		} else {
			k, err = ReadKernel(f)
		}
		if err != nil {
			return nil, err
		}
		d.Kernels = append(d.Kernels, k)
	}
	sort.Slice(d.Kernels, func(i, j int) bool {
		a, b := d.Kernels[i], d.Kernels[j]
		if a.KernelName != b.KernelName {
			return a.KernelName < b.KernelName
		}
		return a.StaticHash < b.StaticHash
	})
	return d, nil
}

// Path is the location of a file named inside the database (an IR module or a snapshot).
func (d *DB) Path(name string) string { return filepath.Join(d.Dir, name) }

// NumInstances counts the instances of all kernels.
func (d *DB) NumInstances() int {
	n := 0
	for _, k := range d.Kernels {
		n += len(k.Instances)
	}
	return n
}

// InstanceRef names one instance: its kernel and its dynamic hash.
type InstanceRef struct {
	Kernel   *Kernel
	Instance *Instance
}

// ID is the unambiguous "<static-hash>/<dynamic-hash>" form Find accepts.
func (r InstanceRef) ID() string { return r.Kernel.StaticHash + "/" + r.Instance.DynamicHash }

// All lists every instance in kernel order, then dynamic hash order.
func (d *DB) All() []InstanceRef {
	var out []InstanceRef
	for _, k := range d.Kernels {
		for _, id := range k.InstanceIDs() {
			out = append(out, InstanceRef{k, k.Instances[id]})
		}
	}
	return out
}

// Find resolves an instance id: a full dynamic hash, a unique prefix of one,
// or "<static-hash>/<dynamic-hash>" (either part may be a unique prefix). An
// empty id selects the only instance of a database that has exactly one.
func (d *DB) Find(id string) (*Kernel, *Instance, error) {
	all := d.All()
	if id == "" {
		if len(all) == 1 {
			return all[0].Kernel, all[0].Instance, nil
		}
		return nil, nil, fmt.Errorf("%w: the database has %d instances; name one (%s)", ErrAmbiguousInstance, len(all), listIDs(all))
	}
	shPrefix, dhPrefix, qualified := strings.Cut(id, "/")
	if !qualified {
		shPrefix, dhPrefix = "", id
	}
	var exact, prefixed []InstanceRef
	for _, r := range all {
		if !strings.HasPrefix(r.Kernel.StaticHash, shPrefix) || !strings.HasPrefix(r.Instance.DynamicHash, dhPrefix) {
			continue
		}
		prefixed = append(prefixed, r)
		if r.Instance.DynamicHash == dhPrefix && (!qualified || r.Kernel.StaticHash == shPrefix) {
			exact = append(exact, r)
		}
	}
	matches := prefixed
	if len(exact) > 0 {
		matches = exact // a full hash wins over longer hashes it is a prefix of
	}
	switch len(matches) {
	case 1:
		return matches[0].Kernel, matches[0].Instance, nil
	case 0:
		return nil, nil, fmt.Errorf("%w %q in %s (it has %s)", ErrNoInstance, id, d.Dir, listIDs(all))
	default:
		return nil, nil, fmt.Errorf("%w %q: it matches %s; give more of it or use <static-hash>/<dynamic-hash>", ErrAmbiguousInstance, id, listIDs(matches))
	}
}

// listIDs names a few instances for an error message.
func listIDs(refs []InstanceRef) string {
	const show = 8
	var parts []string
	for i, r := range refs {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(refs)-show))
			break
		}
		parts = append(parts, r.ID()+" ("+r.Kernel.Name()+")")
	}
	if len(parts) == 0 {
		return "no instances"
	}
	return strings.Join(parts, ", ")
}

// ArgBytes decodes an instance's recorded argument bytes.
func (d *DB) ArgBytes(inst *Instance) ([][]byte, error) {
	args, err := inst.ArgBytes()
	if err != nil {
		return nil, fmt.Errorf("instance %s: %w", inst.DynamicHash, err)
	}
	return args, nil
}

// ReadPrologue reads the snapshot taken before the launch inst of kernel k,
// bounded by the kernel's arena and device (KernelLimits).
func (d *DB) ReadPrologue(k *Kernel, inst *Instance) (*Snapshot, error) {
	return d.readSnapshot(k, inst, inst.Prologue, "PrologueBytes", inst.PrologueBytes, true)
}

// ReadEpilogue reads the snapshot taken after the launch inst of kernel k.
func (d *DB) ReadEpilogue(k *Kernel, inst *Instance) (*Snapshot, error) {
	return d.readSnapshot(k, inst, inst.Epilogue, "EpilogueBytes", inst.EpilogueBytes, true)
}

// ReadPrologueMetadata reads only the metadata of the prologue snapshot
// (ReadSnapshotMetadata): what compiling the kernel needs of it.
func (d *DB) ReadPrologueMetadata(k *Kernel, inst *Instance) (*Snapshot, error) {
	return d.readSnapshot(k, inst, inst.Prologue, "PrologueBytes", inst.PrologueBytes, false)
}

// readSnapshot opens a snapshot of the database: a regular file inside its
// directory, not a link that leads out of it, of the size the kernel file
// records for it (field; 0: not recorded).
func (d *DB) readSnapshot(k *Kernel, inst *Instance, name, field string, size uint64, withData bool) (*Snapshot, error) {
	f, n, err := d.openSnapshot(k, inst, name, field, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeSnapshotIn(d.Dir, d.Path(name), f, n, KernelLimits(k), withData)
}

// openSnapshot opens a snapshot of the database, checked as readSnapshot
// says, and returns it with its size.
func (d *DB) openSnapshot(k *Kernel, inst *Instance, name, field string, size uint64) (*os.File, int64, error) {
	f, fi, err := safefile.OpenIn(d.Dir, name, 0)
	if err != nil {
		return nil, 0, err
	}
	if size != 0 && uint64(fi.Size()) != size {
		f.Close()
		return nil, 0, fmt.Errorf("%s: instances[%s].%s is %d bytes, but %s holds %d: truncated, or the files do not belong together",
			d.Path(KernelFileName(k.StaticHash)), inst.DynamicHash, field, size, d.Path(name), fi.Size())
	}
	return f, fi.Size(), nil
}

// ReadFile reads a file named inside the database (the IR, the device code)
// whole: a regular file of at most limit bytes inside the directory.
func (d *DB) ReadFile(name string, limit int64) ([]byte, error) {
	return safefile.ReadFileIn(d.Dir, name, limit)
}

// IRPath is the recorded bitcode of a kernel.
func (d *DB) IRPath(k *Kernel) string { return d.Path(k.Modules[0]) }
