package deploy

import "github.com/mneme-gpu/mneme"

// CompileRequest asks `mneme deploy compile-variant` (the compiler runs in
// its own process: the runtime library links no LLVM) for one variant of a
// kernel: the kernel's embedded IR compiled under Config for the GPU the
// command finds, with the launch's argument bytes for the arguments Config
// specializes.
type CompileRequest struct {
	Executable string       `json:"executable"` // an ELF file whose mneme_ir section holds the kernel's IR
	Kernel     string       `json:"kernel"`     // mangled name
	Config     mneme.Config `json:"config"`
	Args       [][]byte     `json:"args"` // every argument's bytes, in order
}

// Global is a global variable of a compiled kernel's code.
type Global struct {
	Name         string `json:"name"`
	AddressSpace int    `json:"address_space"` // NVPTX: 1 global, 4 constant
	ReadOnly     bool   `json:"read_only"`
}

// CompileResponse is the compiled variant and what the runtime must know to
// key and run it.
type CompileResponse struct {
	Cubin []byte `json:"cubin"`
	// Folded are the argument indices whose values were compiled in.
	Folded []int `json:"folded"`
	// Scalars are the arguments a configuration that specializes without
	// naming arguments folds (FoldedArgs): the kernel's, not this compile's.
	Scalars []int `json:"scalars"`
	// ArgSizes are the kernel's parameter sizes in bytes.
	ArgSizes []int `json:"arg_sizes"`
	// Globals are the variables the kernel's code keeps its own copies of:
	// the runtime must make those the host also sees agree with the
	// application's.
	Globals        []Global `json:"globals"`
	Arch           string   `json:"arch"`
	Registers      int      `json:"registers"`
	CompileSeconds float64  `json:"compile_seconds"`
}

// Facts are what the runtime needs about a kernel before it can key a
// variant, kept on disk beside the variants so a warm run compiles nothing.
func (r *CompileResponse) Facts() KernelFacts {
	return KernelFacts{ScalarArgs: r.Scalars, ArgSizes: r.ArgSizes, Globals: r.Globals}
}
