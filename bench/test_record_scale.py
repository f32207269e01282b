"""The verdicts record_scale.py prints for the GPU checks (make test runs this)."""
import record_scale as rs

GIB = 1 << 30


def test_overhead_bound_judges_only_programs_in_scope() -> None:
    line = rs.verdict([("small", 1.30, 4 << 20, 0.4), ("tracer", 1.08, 4 * GIB, 1.5), ("short", 1.9, 9 * GIB, 0.36)])
    assert "met by every one: tracer 1.080" in line
    assert "outside the bound: small 1.300 (4.0 MiB on the device, 0.40 s plainly), short 1.900 (0.36 s plainly)" in line
    assert "not met" not in line


def test_overhead_bound_names_who_missed_it() -> None:
    line = rs.verdict([("tracer", 1.101, 4 * GIB, 1.5), ("long", 1.02, 4 * GIB, 6.0)])
    assert line.endswith(": not met by tracer 1.101; met by long 1.020")


def test_copy_target_is_judged_on_the_largest_snapshot() -> None:
    line = rs.copy_verdict([("tiny", 2 << 20, 0.01), ("tracer", 4 * GIB, 0.92), ("bigmem", 3 * GIB, 0.45)])
    assert ": not met by bigmem 0.45; met by tracer 0.92; too small to judge: tiny (2.0 MiB)" in line


def test_nothing_in_scope_is_said() -> None:
    assert "nothing in scope" in rs.verdict([("small", 1.0, 1, 0.1)])
    assert "nothing in scope" in rs.copy_verdict([])
