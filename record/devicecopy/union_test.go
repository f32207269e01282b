package devicecopy

import "testing"

// The bus time of overlapping copies is counted once.
func TestUnionSeconds(t *testing.T) {
	for _, c := range []struct {
		iv   [][2]float64
		want float64
	}{
		{nil, 0},
		{[][2]float64{{1, 2}}, 1},
		{[][2]float64{{3, 4}, {1, 2}}, 2},
		{[][2]float64{{1, 3}, {2, 4}}, 3},
		{[][2]float64{{1, 5}, {2, 3}, {6, 7}}, 5},
		{[][2]float64{{0, 1}, {1, 2}}, 2},
		{[][2]float64{{-0.5, 1}, {2, 3}}, 2.5}, // a copy that started before the reference event
	} {
		if got := unionSeconds(c.iv); got != c.want {
			t.Errorf("unionSeconds(%v) = %v, want %v", c.iv, got, c.want)
		}
	}
}
