"""The table bench/run.sh prints from `go test -bench` output (make test runs this)."""
import io

import pytest

import benchtable as bt

OUTPUT = """goos: linux
goarch: amd64
pkg: github.com/mneme-gpu/mneme/cmd/mneme-rt/shim/shimtest
cpu: Intel(R) Xeon(R)
BenchmarkForwardedLaunch-2     	       1	 512345678 ns/op	         3.100 ns/added	         2.000 ns/plain-launch	         5.100 ns/wrapped-launch
BenchmarkLaunchStatsUpdate-2   	       1	 98765432 ns/op	       140.0 ns/update
PASS
ok  	github.com/mneme-gpu/mneme/cmd/mneme-rt/shim/shimtest	4.2s
goos: linux
pkg: github.com/mneme-gpu/mneme/jit
BenchmarkColdCompile-2         	     100	  11800000 ns/op
BenchmarkCacheHit              	  600000	      1900 ns/op
--- SKIP: BenchmarkDiskCacheHit
    bench_test.go:50: no CUDA driver found
pkg: github.com/mneme-gpu/mneme/record
BenchmarkRecordInstance/random/zstd=false-2         	       4	 250000000 ns/op	 536.87 MB/s
--- FAIL: BenchmarkBroken
"""


def rows() -> list[bt.Row]:
    return bt.parse(OUTPUT.splitlines(keepends=True))


def test_each_result_keeps_its_package_and_metrics() -> None:
    r = {x.name: x for x in rows()}
    assert r["BenchmarkForwardedLaunch"].package.endswith("/shimtest")
    assert r["BenchmarkForwardedLaunch"].metrics == {"ns/op": 512345678.0, "ns/added": 3.1, "ns/plain-launch": 2.0, "ns/wrapped-launch": 5.1}
    assert r["BenchmarkColdCompile"].package.endswith("/jit")
    assert r["BenchmarkCacheHit"].metrics == {"ns/op": 1900.0}
    assert r["BenchmarkRecordInstance/random/zstd=false"].metrics["MB/s"] == 536.87
    assert r["BenchmarkRecordInstance/random/zstd=false"].package.endswith("/record")


def test_skips_and_failures_are_rows() -> None:
    r = {x.name: x for x in rows()}
    assert r["BenchmarkDiskCacheHit"].status == "skipped"
    assert r["BenchmarkBroken"].status == "failed"
    assert r["BenchmarkColdCompile"].status == "ok"


def test_verdicts_follow_the_targets_metric() -> None:
    r = {x.name: x for x in rows()}
    # The shim's figure is ns/added, not the loop's ns/op.
    assert bt.verdict(r["BenchmarkForwardedLaunch"]) == ("shim adds <= 1 us a launch", "yes")
    assert bt.verdict(r["BenchmarkLaunchStatsUpdate"])[1] == "NO"
    assert bt.verdict(r["BenchmarkColdCompile"])[1] == "yes"
    # No figure, no verdict; no target, neither.
    assert bt.verdict(r["BenchmarkDiskCacheHit"]) == ("cache hit <= 0.5 ms", "")
    assert bt.verdict(r["BenchmarkRecordInstance/random/zstd=false"]) == ("", "")


def test_bound_is_inclusive_and_each_side_judged() -> None:
    at = bt.Row("BenchmarkCacheHit", "jit", {"ns/op": 0.5e6})
    over = bt.Row("BenchmarkCacheHit", "jit", {"ns/op": 0.5e6 + 1})
    assert bt.verdict(at)[1] == "yes"
    assert bt.verdict(over)[1] == "NO"
    # A rate's bound is a floor, judged on its own metric.
    fast = bt.Row("BenchmarkGPUReplayVecAdd/iterations=1", "replay", {"ns/op": 9e6, "replays/s": 500.0})
    slow = bt.Row("BenchmarkGPUReplayVecAdd/iterations=1", "replay", {"ns/op": 1e3, "replays/s": 499.0})
    assert bt.verdict(fast) == (">= 500 replays/s", "yes")
    assert bt.verdict(slow)[1] == "NO"


def test_table_prints_human_times() -> None:
    lines = bt.table(rows())
    assert lines[0].startswith("| benchmark | package | time |")
    cold = next(line for line in lines if line.startswith("| BenchmarkColdCompile "))
    assert "| jit | 11.8 ms/op |" in cold and cold.endswith("| yes |")
    hit = next(line for line in lines if line.startswith("| BenchmarkCacheHit "))
    assert "1.9 us/op" in hit
    skipped = next(line for line in lines if line.startswith("| BenchmarkDiskCacheHit "))
    assert "| skipped |" in skipped


def test_main_fails_on_a_missed_target_or_failure(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(OUTPUT))
    assert bt.main() == 1
    err = capsys.readouterr().err
    assert "BenchmarkLaunchStatsUpdate" in err and "BenchmarkBroken" in err
    good = "pkg: x/jit\nBenchmarkCacheHit-2  100  1900 ns/op\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(good))
    assert bt.main() == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("PASS\n"))
    assert bt.main() == 1
