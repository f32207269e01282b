package mneme

import (
	"os"
	"regexp"
	"testing"
)

// The Python tune CLI's status table (python/tests/test_status_table.py
// checks its classification row by row) lists exactly the statuses of
// Statuses(), so a status added here gets a row there.
func TestPythonStatusTableHasEveryStatus(t *testing.T) {
	b, err := os.ReadFile("python/tests/test_status_table.py")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^    \("([a-z_]+)", "[a-z_]+"\),$`).FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = true
	}
	for _, s := range Statuses() {
		if !rows[string(s)] {
			t.Errorf("status %s has no row in python/tests/test_status_table.py", s)
		}
	}
	if len(rows) != len(Statuses()) {
		t.Errorf("the Python table has %d rows, Statuses() %d", len(rows), len(Statuses()))
	}
}
