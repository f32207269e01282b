package session

import (
	"slices"
	"strings"
	"testing"
)

func TestRankFromLaunchers(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, _, ok, err := Rank(env(nil)); ok || err != nil {
		t.Errorf("outside a job: ok %v, error %v", ok, err)
	}
	for _, v := range rankVariables {
		if r, got, ok, err := Rank(env(map[string]string{v: " 7 "})); !ok || err != nil || r != 7 || got != v {
			t.Errorf("%s=7: rank %d from %s, ok %v, error %v", v, r, got, ok, err)
		}
	}
	// Several launchers' variables: the first in Mneme's order names the rank.
	r, v, _, _ := Rank(env(map[string]string{"SLURM_PROCID": "3", "OMPI_COMM_WORLD_RANK": "1", "PBS_TASKNUM": "9"}))
	if r != 1 || v != "OMPI_COMM_WORLD_RANK" {
		t.Errorf("rank %d from %s, want 1 from OMPI_COMM_WORLD_RANK", r, v)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if _, _, ok, err := Rank(env(map[string]string{"PMI_RANK": bad})); ok || err == nil || !strings.Contains(err.Error(), "PMI_RANK") {
			t.Errorf("PMI_RANK=%q: ok %v, error %v; want an error naming the variable", bad, ok, err)
		}
	}
}

func TestRankSelection(t *testing.T) {
	def, err := ParseRankSelection("")
	if err != nil || !def.Has(0) || def.Has(1) || def.Several() {
		t.Errorf("default: %+v %v", def, err)
	}
	all, _ := ParseRankSelection("all")
	if !all.Has(0) || !all.Has(4096) || !all.Several() {
		t.Errorf("all: %+v", all)
	}
	list, err := ParseRankSelection("5, 0,3,5")
	if err != nil || !slices.Equal(list.Ranks, []int{0, 3, 5}) || !list.Has(3) || list.Has(4) || list.Has(6) || !list.Several() {
		t.Errorf("list: %+v %v", list, err)
	}
	one, _ := ParseRankSelection("2")
	if one.Several() || !one.Has(2) || one.Has(0) {
		t.Errorf("one rank: %+v", one)
	}
	for _, bad := range []string{"0,", "x", "-1", "1;2", "al"} {
		if _, err := ParseRankSelection(bad); err == nil || !strings.Contains(err.Error(), "--record-ranks") {
			t.Errorf("%q: error %v, want one naming --record-ranks", bad, err)
		}
	}
	if RankDir(3) != "rank-3" {
		t.Errorf("RankDir(3) = %q", RankDir(3))
	}
}
