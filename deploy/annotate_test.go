package deploy

import (
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme/appabi"
)

func TestAnnotationPlans(t *testing.T) {
	plans := Plans{"tuned": &Plan{Kernel: "tuned", Source: "t.json"}}
	n := plans.AddAnnotations([]appabi.JITAnnotation{{Kernel: "tuned", Args: []int{1}}, {Kernel: "k", Args: []int{4, 5}}, {Kernel: "none"}})
	if n != 2 {
		t.Fatalf("added %d plans, want 2 (the tuned kernel keeps its tuned plan)", n)
	}
	if plans["tuned"].Source != "t.json" {
		t.Error("an annotation replaced a tuned plan")
	}
	k := plans["k"]
	if !k.Config.Specialize || !slices.Equal(k.Config.SpecializeArgs, []int{3, 4}) || k.Config.Passes != "default<O3>" || k.Source != AnnotationSource {
		t.Errorf("plan of k: %+v", k)
	}
	if plans["none"].Config.Specialize {
		t.Error("an annotation without arguments specializes nothing")
	}
	if err := k.Config.Validate(); err != nil {
		t.Errorf("annotation plan does not validate: %v", err)
	}
}
