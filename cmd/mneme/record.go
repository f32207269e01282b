package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/session"
)

type recordFlags struct {
	rdb           string
	vass          string
	kernels       string
	maxRecordings int
	skip          int
	overwrite     bool
	compress      bool
	withTuned     bool
	recordRanks   string
}

func init() {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "record [-rdb DIR] [-vass GiB] [--kernels REGEX] [--max-recordings N] [--skip N] -- APP [ARGS...]",
		Short: "Run an application built with the mneme compilers and record its kernel launches",
		Long: `record runs APP with ARGS (stdin, stdout and stderr pass through) and records
its kernel launches into the database directory -rdb: for each selected launch,
the device memory before and after it, the kernel's IR, its geometry and
argument values. The application must have been built with the compilers that
` + "`mneme config cc`/`mneme config cxx`" + ` print.

While recording, device allocations come from one virtual range of -vass GiB
(by default as large as the GPU's memory: it is address space only) at a
fixed device address, so every launch can later be replayed at the same
addresses. A launch is selected when --kernels (a regular expression) matches
the kernel's mangled or demangled name; the first --skip matching launches are
let through. Without --max-recordings every distinct launch (geometry, shared
memory and argument values) is recorded; with it, at most that many per
kernel: distinct launches until the kernel has that many, then a launch of a
new shape (grid, block, dynamic shared memory) takes the place of a second
instance of a shape, or of the instance of a smaller shape, so a kernel run
at several problem sizes keeps its sizes rather than its first launches.
Repeats only count.

Every launch, recorded or not, is counted in the launch statistics written
to ` + "`" + `LaunchStats.mnemestats` + "`" + ` in -rdb (every 2 s and at exit): each kernel's launch
shapes, argument values and sampled GPU time; mneme inspect shows them.

mneme record exits with the application's exit code; when the application
succeeded but nothing could be recorded (no kernels registered, arena too
small, errors while recording) it exits 1. The database stays valid even if
the application crashes: every recorded launch is complete on disk.

In an MPI job (mpirun ... mneme record -rdb DIR -- APP) only rank 0 records by
default; --record-ranks all or a list such as 0,3,5 chooses, and when several
ranks record each writes DIR/rank-N, whose kernels carry their "Rank".`,
		// -rdb and -vass are single-dash long flags as in Mneme, which pflag
		// would read as shorthand clusters; they are normalized first.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if helped, err := parseMnemeFlags(cmd, args, "rdb", "vass", "kernels", "max-recordings", "skip"); helped || err != nil {
				return err
			}
			return runRecord(cmd.ErrOrStderr(), cmd.Flags().Args(), &f)
		},
	}
	f.register(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

// register defines the flags of mneme record on fl.
func (f *recordFlags) register(fl *pflag.FlagSet) {
	fl.SetInterspersed(false) // everything from APP on belongs to the application
	fl.StringVar(&f.rdb, "rdb", "mneme-rdb", "recording database directory (created if missing)")
	fl.StringVar(&f.vass, "vass", record.VASSAuto, "size of the recording arena in GiB (fractions allowed); auto: the GPU's memory")
	fl.StringVar(&f.kernels, "kernels", "", "record only kernels whose mangled or demangled name matches this regular expression")
	fl.IntVar(&f.maxRecordings, "max-recordings", 0, "instances to record per kernel; once full, a new launch shape replaces a second instance of a shape or a smaller shape (0: every distinct launch)")
	fl.IntVar(&f.skip, "skip", 0, "let this many matching launches pass before recording")
	fl.BoolVar(&f.overwrite, "overwrite", false, "replace a recording already in -rdb")
	fl.BoolVar(&f.compress, "zstd", true, "zstd-compress snapshot chunks where that saves at least 1/8 of them (--zstd=false stores them raw)")
	fl.BoolVar(&f.withTuned, "with-tuned-kernels", false, "let the launches it does not record run the tuned kernels that MNEME_TUNED_KERNELS or PROTEUS_TUNED_KERNELS names (recorded launches always run and record the application's own code); without it tuned files are ignored")
	fl.StringVar(&f.recordRanks, "record-ranks", "0", "in an MPI job (rank from FLUX_TASK_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, MPI_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK, PMIX_RANK or PBS_TASKNUM): the ranks that record, all or a list such as 0,3,5; the others run untouched, and with several each records into -rdb/rank-N")
	fl.BoolP("help", "h", false, "help for record")
}

func runRecord(stderr io.Writer, args []string, f *recordFlags) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	return session.Record(session.Options{DB: f.rdb, VASS: f.vass, Kernels: f.kernels, MaxRecordings: f.maxRecordings,
		Skip: f.skip, Overwrite: f.overwrite, Compress: f.compress, WithTunedKernels: f.withTuned, RecordRanks: f.recordRanks, Command: args}, stderr)
}
