package session

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// rankVariables are the variables MPI launchers set to a process's rank, in
// the order Mneme reads them: the first one set names the rank.
var rankVariables = []string{"FLUX_TASK_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MPI_RANK",
	"SLURM_PROCID", "JSM_NAMESPACE_RANK", "PMIX_RANK", "PBS_TASKNUM"}

// Rank is this process's rank in an MPI job and the variable it came from;
// ok is false outside a job (no variable set).
func Rank(getenv func(string) string) (rank int, variable string, ok bool, err error) {
	for _, v := range rankVariables {
		s := strings.TrimSpace(getenv(v))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, v, false, fmt.Errorf("%s=%q: not a rank (a non-negative integer)", v, s)
		}
		return n, v, true, nil
	}
	return 0, "", false, nil
}

// RankSelection is --record-ranks: "all", or a comma-separated list of
// ranks ("0", the default, or "0,3,5").
type RankSelection struct {
	All   bool
	Ranks []int // sorted, without repeats
}

// ParseRankSelection reads --record-ranks; empty is rank 0.
func ParseRankSelection(s string) (RankSelection, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return RankSelection{Ranks: []int{0}}, nil
	case "all":
		return RankSelection{All: true}, nil
	}
	seen := map[int]bool{}
	var sel RankSelection
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return RankSelection{}, fmt.Errorf("--record-ranks %q: want all or a comma-separated list of ranks such as 0,3,5", s)
		}
		if !seen[n] {
			seen[n] = true
			sel.Ranks = append(sel.Ranks, n)
		}
	}
	sort.Ints(sel.Ranks)
	return sel, nil
}

// Has reports whether the selection records rank.
func (s RankSelection) Has(rank int) bool {
	if s.All {
		return true
	}
	i := sort.SearchInts(s.Ranks, rank)
	return i < len(s.Ranks) && s.Ranks[i] == rank
}

// Several reports whether more than one rank may record, so that each needs
// a folder of its own inside the database directory.
func (s RankSelection) Several() bool { return s.All || len(s.Ranks) > 1 }

// RankDir is the folder of one rank's recording inside the database
// directory when several ranks record into it.
func RankDir(rank int) string { return fmt.Sprintf("rank-%d", rank) }
