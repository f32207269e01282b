package deploy

import (
	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
)

// AnnotationSource names where an annotation plan came from, for warnings.
const AnnotationSource = `annotate("jit")`

// AnnotationPlan is the plan of a kernel annotated for run-time
// specialization (Proteus's __attribute__((annotate("jit", I, ...)))): its
// listed arguments (1-based) folded in at every launch, one variant per
// value set, compiled at O3 as Proteus does.
func AnnotationPlan(a appabi.JITAnnotation) *Plan {
	c := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Prune: true, Internalize: true}
	for _, i := range a.Args {
		c.SpecializeArgs = append(c.SpecializeArgs, i-1)
	}
	c.Specialize = len(c.SpecializeArgs) > 0
	return &Plan{Kernel: a.Kernel, Source: AnnotationSource, Config: c}
}

// AddAnnotations adds the annotated kernels that no tuned file lists (a
// tuned configuration wins over an annotation). It returns the count added.
func (p Plans) AddAnnotations(anns []appabi.JITAnnotation) int {
	n := 0
	for _, a := range anns {
		if _, tuned := p[a.Kernel]; tuned {
			continue
		}
		p[a.Kernel] = AnnotationPlan(a)
		n++
	}
	return n
}
