package session

import "testing"

// Every launcher's rank variable, in Mneme's order of precedence: each row
// names the rank alone, and each wins over every later one.
func TestRankVariablesEveryRowInOrder(t *testing.T) {
	want := []string{"FLUX_TASK_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MPI_RANK",
		"SLURM_PROCID", "JSM_NAMESPACE_RANK", "PMIX_RANK", "PBS_TASKNUM"}
	for i, v := range want {
		env := map[string]string{v: "5"}
		if r, got, ok, err := Rank(func(k string) string { return env[k] }); !ok || err != nil || r != 5 || got != v {
			t.Errorf("%s alone: rank %d from %q, ok %v, %v", v, r, got, ok, err)
		}
		for _, later := range want[i+1:] {
			env := map[string]string{v: "1", later: "2"}
			if r, got, _, _ := Rank(func(k string) string { return env[k] }); r != 1 || got != v {
				t.Errorf("%s and %s: rank %d from %s, want 1 from %s", v, later, r, got, v)
			}
		}
	}
	if len(rankVariables) != len(want) {
		t.Errorf("rank variables %v, want %v", rankVariables, want)
	}
}
