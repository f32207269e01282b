"""python/mneme_scripts.py, the driver of Mneme's published scripts in gpu-checks.sh.

Its verdicts are checked on stand-ins written here at the copies' paths; where
the fetched copies themselves are present (.mneme-published/ at the
repository root, never committed), they run unchanged against this package
with the stand-in worker as `mneme`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INSTANCE, STANDIN

PYTHON_DIR = Path(__file__).resolve().parents[1]
DRIVER = PYTHON_DIR / "mneme_scripts.py"
COPIES = PYTHON_DIR.parent / ".mneme-published"

sys.path.insert(0, str(PYTHON_DIR))
import mneme_scripts as ms  # noqa: E402


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


# Each stand-in prints its arguments, then behaves as one kind of outcome.
ECHO = "import sys\nprint('ARGS', sys.argv[1:])\n"
# The page names where its example goes and which config file to pass; the
# driver takes both from it.
DOCS = '''# Tuning

Save the following as `spaces/from_the_docs.py`:

```python
import sys
print("ARGS", sys.argv[1:])
print("BEST: passes=default<O1> blockDim.x=128 mean=70.0 speedup=1.25")
```

```yaml
record_database: placeholder.json
space_module: spaces/from_the_docs.py:EntireSpace
results_dir: mneme-tune-results/vecadd-exhaustive
```

Run it with `mneme tune --config configs/tune.yml`.

The equivalent config file is:

```yaml
record_database: placeholder.json
space_preset: launch
results_dir: mneme-tune-results/vecadd-builtin
```
'''
# A `mneme tune` stand-in: checks the config file is where the page says,
# that the space module is beside it, and writes the results the page names.
FAKE_MNEME = r'''import json, pathlib, re, sys
args = sys.argv[1:]
assert args[:3] == ["tune", "--config", "configs/tune.yml"], args
text = pathlib.Path(args[2]).read_text()
if "space_module" in text:
    assert pathlib.Path("spaces/from_the_docs.py").is_file()
out = pathlib.Path(re.search(r"^results_dir: (.*)$", text, re.M).group(1))
out.mkdir(parents=True)
builtin = "space_preset" in text
(out / "summary.json").write_text(json.dumps({"trials": 9, "best_trial": -1 if builtin else 4, "best_speedup": 1 if builtin else 1.5}))
(out / "best.json").write_text(json.dumps({"best": {"config": {"grid": {"x": 8, "y": 1, "z": 1}, "block": {"x": 512, "y": 1, "z": 1},
                                                            "passes": "default<O2>", "codegen_opt": 3}}}))
print("record", args[args.index("--record-database") + 1], args[args.index("--record-id") + 1])
'''


def copy_of(source: str) -> str:
    return source.removeprefix(ms.REPO)


@pytest.fixture
def copies(tmp_path: Path) -> Path:
    # Stand-ins at the copies' paths; wsm5's pass-pipeline script has none.
    root = tmp_path / "copies"
    write(root, "SOURCE", "stand-ins\n")
    write(root, copy_of(ms.CUDA_VEC_ADD), ECHO + "print(' Experiment 1 with hash:aa has speedup of 1.1 and total time is 9')\n"
          "print(' Experiment 2 with hash:bb has speedup of 1.3 and total time is 8')\nprint('null')\n")
    write(root, copy_of(ms.HIP_VEC_ADD), ECHO + "print('Cannot verify baseline execution exiting')\n")
    write(root, copy_of(ms.BEZIER), ECHO + "raise SystemExit(main())\n")
    write(root, copy_of(ms.WSM5), ECHO + "print('Best config has specialize: True shows speedup over base line : 1.2')\n")
    write(root, copy_of(ms.MINIFE), ECHO + "import json\nprint(json.dumps({'grid': {'x': 4}, 'block': {'x': 64}, "
          "'passes': 'default<O3>', 'set_launch_bounds': True, 'max_threads': 128, 'min_blocks_per_sm': 2}, indent=2))\n")
    write(root, copy_of(ms.DOCS_PAGE), DOCS)
    return root


def drive(copies: Path, recording: Path, tmp_path: Path, *extra: str) -> tuple[int, dict[str, str], str]:
    mneme = tmp_path / "fake-mneme"
    mneme.write_text(FAKE_MNEME)
    wrapper = tmp_path / "mneme"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {mneme} \"$@\"\n")
    wrapper.chmod(0o755)
    p = subprocess.run([sys.executable, str(DRIVER), "--copies", str(copies), "--record-db", str(recording), "--record-id", INSTANCE,
                        "--out", str(tmp_path / "out"), "--trials", "7", "--timeout", "60", *extra],
                       env={**os.environ, "MNEME_BIN": str(wrapper)}, capture_output=True, text=True, timeout=300)
    lines = dict(re.findall(r"^== mneme script (.+?): (.*)$", p.stdout, flags=re.M))
    return p.returncode, lines, p.stdout + p.stderr


def test_each_script_gets_a_verdict_and_its_best(copies: Path, recording: Path, tmp_path: Path) -> None:
    rc, lines, out = drive(copies, recording, tmp_path)
    assert rc == 1, out
    assert set(lines) == {s.name for s in ms.SCRIPTS}, out
    assert lines["cuda_vec_add/tune_threads.py"] == "PASS (best config Experiment 2 with hash:bb has speedup of 1.3 and total time is 8)"
    assert lines["hip_vec_add/tune_threads.py"].startswith("FAIL (the baseline did not verify")
    assert lines["hecbench/bezier-surface/tune.py"].startswith("FAIL (exit status 1: NameError")
    assert lines["hecbench/wsm5/tune.py"] == "PASS (best config Best config has specialize: True shows speedup over base line : 1.2)"
    assert lines["hecbench/wsm5/tune_passes.py"].startswith(f"FAIL (no copy of {ms.WSM5_PASSES} in ")
    assert lines["hecbench/miniFE/tune.py"] == "PASS (best config block 64x1x1, grid 4x1x1, passes default<O3>, launch bounds 128,2)"
    assert lines["docs example"] == "PASS (best config BEST: passes=default<O1> blockDim.x=128 mean=70.0 speedup=1.25)"
    assert lines["docs config.yml (space module)"] == (
        "PASS (best config block 512x1x1, grid 8x1x1, passes default<O2>, codegen O3, speedup 1.500 over 9 trials)")
    assert lines["docs config.yml (built-in launch space)"] == "PASS (best config the baseline: nothing of 9 trials beat it)"


def test_scripts_get_the_arguments_their_usage_asks_for(copies: Path, recording: Path, tmp_path: Path) -> None:
    rc, lines, out = drive(copies, recording, tmp_path, "--only", "cuda_vec_add/tune_threads.py", "hip_vec_add/tune_threads.py",
                           "docs example", "docs config.yml (space module)")
    logs = {p.name: p.read_text() for p in (tmp_path / "out").glob("*.log")}
    db = str(recording.resolve())
    assert f"ARGS ['--record-db', '{db}', '--record-id', '{INSTANCE}', '--num-trials', '7']" in logs["cuda_vec_add-tune_threads-py.log"]
    assert f"ARGS ['{db}', '{INSTANCE}']" in logs["hip_vec_add-tune_threads-py.log"]
    assert f"ARGS ['--record-db', '{db}', '--record-id', '{INSTANCE}']" in logs["docs-example.log"]
    # The command line names the recording; the file's placeholder loses.
    assert f"record {db} {INSTANCE}" in logs["docs-config-yml-space-module.log"]
    # The docs' example ran as saved where the page says, from its own folder.
    assert (tmp_path / "out" / "docs-example").joinpath("spaces/from_the_docs.py").is_file()
    assert set(lines) == {"cuda_vec_add/tune_threads.py", "hip_vec_add/tune_threads.py", "docs example",
                          "docs config.yml (space module)"}, out


def test_an_exporting_script_must_write_its_proteus_file(copies: Path, recording: Path, tmp_path: Path) -> None:
    best = "print('Best config shows speedup over base line : 1.4 and total time: 5')\n"
    write(copies, copy_of(ms.BEZIER), ECHO + best)
    _, lines, out = drive(copies, recording, tmp_path, "--only", "hecbench/bezier-surface/tune.py")
    assert lines["hecbench/bezier-surface/tune.py"].startswith("FAIL (no Proteus file bezier-tuned.json naming one kernel"), out
    export = ("import json, sys\nout = sys.argv[sys.argv.index('-o') + 1]\n"
              "json.dump({'_Z6vecaddPKfS0_Pfi': {'Pipeline': 'default<O2>', 'SpecializeArgs': True, 'LaunchBounds': False}}, open(out, 'w'))\n")
    write(copies, copy_of(ms.BEZIER), ECHO + best + export)
    _, lines, out = drive(copies, recording, tmp_path, "--only", "hecbench/bezier-surface/tune.py")
    assert lines["hecbench/bezier-surface/tune.py"] == (
        "PASS (best config Best config shows speedup over base line : 1.4 and total time: 5; "
        "exported to Proteus for _Z6vecaddPKfS0_Pfi: Pipeline default<O2>, SpecializeArgs)"), out


def test_bad_invocations_exit_2(copies: Path, recording: Path, tmp_path: Path) -> None:
    (copies / "SOURCE").unlink()
    rc, _, out = drive(copies, recording, tmp_path)
    assert rc == 2 and "no SOURCE file" in out
    write(copies, "SOURCE", "x")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    rc, _, out = drive(copies, bad, tmp_path)
    assert rc == 2 and "--record-db" in out
    rc, _, out = drive(copies, recording, tmp_path, "--only", "nope")
    assert rc == 2 and "no such script" in out


def test_a_hanging_script_times_out(copies: Path, recording: Path, tmp_path: Path) -> None:
    write(copies, copy_of(ms.WSM5), "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    p = subprocess.run([sys.executable, str(DRIVER), "--copies", str(copies), "--record-db", str(recording), "--out", str(tmp_path / "out"),
                        "--timeout", "1", "--only", "hecbench/wsm5/tune.py"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert "== mneme script hecbench/wsm5/tune.py: FAIL (no end within 1 s" in p.stdout


def test_best_from_output_prefers_the_scripts_own_best() -> None:
    out = "[0] passes=a blockDim.x=64 mean=2 speedup=0.9\n[1] passes=b blockDim.x=64 mean=1 speedup=1.8\nBEST: passes=b speedup=1.8\n"
    assert ms.best_from_output(out) == "BEST: passes=b speedup=1.8"
    assert ms.best_from_output(out.replace("BEST: passes=b speedup=1.8\n", "")) == "[1] passes=b blockDim.x=64 mean=1 speedup=1.8"
    assert ms.best_from_output("nothing verified\n") is None


@pytest.mark.skipif(not (COPIES / "SOURCE").is_file(), reason=f"no fetched copies of Mneme's scripts in {COPIES}")
def test_published_scripts_run_unchanged_against_the_package(recording: Path, tmp_path: Path) -> None:
    # The stand-in worker times each replay as block.x ns and verifies it:
    # every script's baseline verifies and it reports a best configuration.
    wrapper = tmp_path / "mneme"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {STANDIN}\n")
    wrapper.chmod(0o755)
    names = [s.name for s in ms.SCRIPTS if s.results_dir(ms.Run(COPIES, recording, INSTANCE, "", "", 1)) is None]
    env = {**os.environ, "MNEME_BIN": str(wrapper), "PYTHONPATH": str(PYTHON_DIR)}
    p = subprocess.run([sys.executable, str(DRIVER), "--copies", str(COPIES), "--record-db", str(recording), "--out", str(tmp_path / "out"),
                        "--trials", "10", "--only", *names], env=env, capture_output=True, text=True, timeout=900)
    lines = dict(re.findall(r"^== mneme script (.+?): (.*)$", p.stdout, flags=re.M))
    assert set(lines) == set(names), p.stdout + p.stderr
    failed = {k: v for k, v in lines.items() if not v.startswith("PASS (best config ")}
    assert not failed, failed
    assert p.returncode == 0


def test_grid_stride_scripts_run_on_the_grid_stride_recording(tmp_path: Path) -> None:
    # miniFE's space shrinks the grid: it gets the grid-stride recording when
    # one is given, and the others keep the vector add; without one, all do.
    run = ms.Run(tmp_path, tmp_path / "vecadd.json", "v1", "python3", "mneme", 5, tmp_path / "stride.json", "s1")
    for s in ms.SCRIPTS:
        seen = run.for_script(s)
        want = (tmp_path / "stride.json", "s1") if s.name == "hecbench/miniFE/tune.py" else (tmp_path / "vecadd.json", "v1")
        assert (seen.db, seen.record_id) == want, s.name
    plain = ms.Run(tmp_path, tmp_path / "vecadd.json", "v1", "python3", "mneme", 5)
    assert all(plain.for_script(s) == plain for s in ms.SCRIPTS)


def test_a_grid_stride_db_without_instances_is_refused(copies: Path, recording: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"instances": {}}')
    p = subprocess.run([sys.executable, str(DRIVER), "--copies", str(copies), "--record-db", str(recording), "--grid-stride-db", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--grid-stride-db" in p.stderr and str(bad) in p.stderr, p.stderr
