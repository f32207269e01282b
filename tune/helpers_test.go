package tune

import "os"

func readTestdata(name string) ([]byte, error) { return os.ReadFile("testdata/" + name) }
