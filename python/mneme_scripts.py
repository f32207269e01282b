#!/usr/bin/env python3
"""Runs Mneme's published tuning scripts and config files, unchanged, on a recording.

Mneme's users tune with the example scripts of its repository and the
`mneme tune` config files of its documentation. This driver runs local copies
of them (fetched byte for byte from the repository Olympus-HPC/Mneme into
COPIES, at their paths there, with COPIES/SOURCE naming path and commit; they
are not part of this repository) against this Python package and `mneme
tune`, on a recorded kernel: each in a fresh folder under OUT, with the
arguments its own usage asks for. The documentation's Python example and its
two config.yml files are taken from its tuning page (Olympus-HPC/Mneme/docs/usage/tune.md)
as printed there and saved where the page says to save them; the command line
names the recording, which wins over the file's placeholder. One line per script:

  == mneme script NAME: PASS (best config ...)
  == mneme script NAME: FAIL (why; log: OUT/NAME.log)

A script passes when it exits 0, prints no traceback, its baseline verified
and it reports a best configuration. Exits 1 when a script failed or none ran.

Usage: mneme_scripts.py --copies COPIES --record-db KERNEL.json [--record-id ID]
       [--out OUT] [--only NAME ...] [--timeout SECONDS] [--trials N]
Environment: MNEME_BIN (the mneme binary, for `mneme tune`), PYTHONPATH (this
package; gpu-checks.sh sets it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

# Sources are named by their path in Mneme's repository; the copies keep
# that path below COPIES.
REPO = "Olympus-HPC/Mneme/"
DOCS_PAGE = "Olympus-HPC/Mneme/docs/usage/tune.md"

SPEEDUP = re.compile(r"speedup(?: of|\s+over\s+base\s*line\s*:|=)\s*([-+0-9.eE]+|inf|nan)")
BEST_LINE = re.compile(r"^\s*(BEST:|Best config)")
FAILED_BASELINE = re.compile(r"Cannot verify baseline|Baseline replay did not verify")


@dataclass
class Script:
    """One published script or config file and how to run it."""

    name: str
    source: str  # REPO + its path there

    @property
    def copy(self) -> str:
        """Its path below the copies."""
        return self.source.removeprefix(REPO)
    argv: Callable[["Run"], list[str]]
    # Files to write into the work folder before running: path -> text.
    files: Callable[["Run"], dict[str, str]] = field(default=lambda run: {})
    # Results folder of a `mneme tune` run, relative to the work folder.
    results_dir: Callable[["Run"], str | None] = field(default=lambda run: None)
    # A Proteus file the script exports into the work folder: it must name
    # the kernel, and its entry is reported with the best configuration.
    proteus: str | None = None
    # Its space shrinks the grid below the data (fractions of the recorded
    # grid), which only a kernel that loops over its data survives: it runs
    # on the grid-stride recording when one is given.
    grid_stride: bool = False


@dataclass
class Run:
    copies: Path
    db: Path
    record_id: str
    python: str
    mneme: str
    trials: int
    # The recording a grid_stride script runs on (db and record_id without).
    stride_db: Path | None = None
    stride_id: str = ""

    def for_script(self, script: "Script") -> "Run":
        """The run a script sees: the grid-stride recording for a grid_stride script, when given."""
        if script.grid_stride and self.stride_db is not None:
            return replace(self, db=self.stride_db, record_id=self.stride_id)
        return self

    def text(self, source: str) -> str:
        return (self.copies / source.removeprefix(REPO)).read_text(encoding="utf-8")

    def path(self, source: str) -> str:
        return str(self.copies / source.removeprefix(REPO))


def fenced_blocks(markdown: str, lang: str) -> list[str]:
    """The bodies of the page's ```lang blocks, in order, exactly as printed."""
    return re.findall(r"^```" + re.escape(lang) + r"\n(.*?)^```\s*$", markdown, flags=re.S | re.M)


def page_path(page: str, pattern: str, what: str) -> str:
    """A relative path the page names (where to save its example, which config to pass)."""
    m = re.search(pattern, page)
    if not m:
        raise ValueError(f"{DOCS_PAGE}: does not say {what}")
    rel = m.group(1)
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise ValueError(f"{DOCS_PAGE}: {what} {rel!r} is not a path inside a work folder")
    return rel


def docs_example_path(run: Run) -> str:
    return page_path(run.text(DOCS_PAGE), r"Save the following as `([^`]+)`", "where to save its example")


def docs_config_path(run: Run) -> str:
    return page_path(run.text(DOCS_PAGE), r"mneme tune --config ([^\s`]+)", "which config file to pass")


def docs_example(run: Run) -> str:
    blocks = fenced_blocks(run.text(DOCS_PAGE), "python")
    if not blocks:
        raise ValueError(f"{DOCS_PAGE}: no ```python block")
    return blocks[0]


def docs_config(run: Run, index: int) -> str:
    blocks = fenced_blocks(run.text(DOCS_PAGE), "yaml")
    if len(blocks) <= index:
        raise ValueError(f"{DOCS_PAGE}: {len(blocks)} ```yaml block(s), want at least {index + 1}")
    return blocks[index]


def yaml_value(text: str, key: str) -> str | None:
    """A top-level scalar of a config file (the results folder), without a YAML library."""
    m = re.search(r"^" + re.escape(key) + r":\s*\"?([^\"\n#]+?)\"?\s*$", text, flags=re.M)
    return m.group(1) if m else None


def py(source: str) -> Callable[[Run], list[str]]:
    return lambda run: [run.python, run.path(source)]


def standard_args(run: Run) -> list[str]:
    return ["--record-db", str(run.db), "--record-id", run.record_id]


def tune_config(run: Run) -> list[str]:
    return [run.mneme, "tune", "--config", docs_config_path(run), "--record-database", str(run.db), "--record-id", run.record_id]


CUDA_VEC_ADD = "Olympus-HPC/Mneme/examples/cuda_vec_add/tune_threads.py"
HIP_VEC_ADD = "Olympus-HPC/Mneme/examples/hip_vec_add/tune_threads.py"
BEZIER = "Olympus-HPC/Mneme/examples/hecbench/bezier-surface/tune.py"
WSM5 = "Olympus-HPC/Mneme/examples/hecbench/wsm5/tune.py"
WSM5_PASSES = "Olympus-HPC/Mneme/examples/hecbench/wsm5/tune_passes.py"
MINIFE = "Olympus-HPC/Mneme/examples/hecbench/miniFE/tune.py"

SCRIPTS: list[Script] = [
    Script("cuda_vec_add/tune_threads.py", CUDA_VEC_ADD,
           lambda run: py(CUDA_VEC_ADD)(run) + standard_args(run) + ["--num-trials", str(run.trials)]),
    Script("hip_vec_add/tune_threads.py", HIP_VEC_ADD, lambda run: py(HIP_VEC_ADD)(run) + [str(run.db), run.record_id]),
    Script("hecbench/bezier-surface/tune.py", BEZIER, lambda run: py(BEZIER)(run) + standard_args(run) + ["-o", "bezier-tuned.json"],
           proteus="bezier-tuned.json"),
    Script("hecbench/wsm5/tune.py", WSM5, lambda run: py(WSM5)(run) + standard_args(run)),
    Script("hecbench/wsm5/tune_passes.py", WSM5_PASSES, lambda run: py(WSM5_PASSES)(run) + standard_args(run)),
    Script("hecbench/miniFE/tune.py", MINIFE, lambda run: py(MINIFE)(run) + standard_args(run), grid_stride=True),
    Script("docs example", DOCS_PAGE,
           lambda run: [run.python, docs_example_path(run)] + standard_args(run),
           files=lambda run: {docs_example_path(run): docs_example(run)}),
    Script("docs config.yml (space module)", DOCS_PAGE, tune_config,
           files=lambda run: {docs_example_path(run): docs_example(run), docs_config_path(run): docs_config(run, 0)},
           results_dir=lambda run: yaml_value(docs_config(run, 0), "results_dir")),
    Script("docs config.yml (built-in launch space)", DOCS_PAGE, tune_config,
           files=lambda run: {docs_config_path(run): docs_config(run, 1)},
           results_dir=lambda run: yaml_value(docs_config(run, 1), "results_dir")),
]


def describe(config: Any) -> str:
    """A configuration dict in one short phrase."""
    if not isinstance(config, dict):
        return repr(config)

    def dim(d: Any) -> str:
        return "x".join(str(d.get(k, 1)) for k in "xyz") if isinstance(d, dict) else "?"

    parts = [f"block {dim(config.get('block'))}", f"grid {dim(config.get('grid'))}"]
    passes = str(config.get("passes", ""))
    parts.append("passes " + (passes if len(passes) <= 40 else passes[:37] + "..."))
    for key in ("specialize", "specialize_dims"):
        if config.get(key):
            parts.append(key)
    if config.get("set_launch_bounds"):
        parts.append(f"launch bounds {config.get('max_threads')},{config.get('min_blocks_per_sm')}")
    if "codegen_opt" in config:
        parts.append(f"codegen O{config['codegen_opt']}")
    return ", ".join(parts)


def printed_config(output: str) -> dict[str, Any] | None:
    """The last configuration the script printed as an indented JSON object (Optuna's best trial)."""
    best = None
    for m in re.finditer(r"^\{\n.*?^\}$", output, flags=re.S | re.M):
        try:
            doc = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(doc, dict) and "block" in doc and "grid" in doc:
            best = doc
    return best


def best_from_output(output: str) -> str | None:
    """What the script reports as best: its BEST/Best line, else the best trial it printed,
    else its fastest verified experiment by the speedups it printed."""
    lines = output.splitlines()
    for line in reversed(lines):
        if BEST_LINE.match(line):
            return line.strip()
    config = printed_config(output)
    if config is not None:
        return describe(config)
    best: tuple[float, str] | None = None
    for line in lines:
        m = SPEEDUP.search(line)
        if m:
            try:
                v = float(m.group(1))
            except ValueError:
                continue
            if best is None or v > best[0]:
                best = (v, line.strip())
    return best[1] if best else None


def best_from_results(folder: Path) -> str | None:
    """The best configuration of a `mneme tune` results folder (summary.json, best.json)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
        best = json.loads((folder / "best.json").read_text())
    except (OSError, ValueError):
        return None
    trials = summary.get("trials")
    if summary.get("best_trial", -1) < 0:
        return f"the baseline: nothing of {trials} trials beat it"
    config = best.get("best", {}).get("config") if isinstance(best, dict) else None
    return f"{describe(config)}, speedup {summary.get('best_speedup', 0):.3f} over {trials} trials"


def proteus_export(path: Path) -> str | None:
    """The one kernel entry of an exported Proteus file, in one phrase; None when absent or malformed."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or len(doc) != 1:
        return None
    ((kernel, entry),) = doc.items()
    if not isinstance(entry, dict) or "Pipeline" not in entry:
        return None
    pipeline = str(entry["Pipeline"])
    flags = " ".join(k for k in ("SpecializeArgs", "SpecializeDims", "LaunchBounds") if entry.get(k) is True)
    return (f"exported to Proteus for {kernel}: Pipeline {pipeline if len(pipeline) <= 40 else pipeline[:37] + '...'}"
            f"{', ' + flags if flags else ''}")


def run_one(script: Script, run: Run, out: Path, timeout: float) -> tuple[bool, str]:
    """Runs one script in its own folder; (passed, what to say)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", script.name).strip("-")
    work = out / slug
    log = out / f"{slug}.log"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        if not (run.copies / script.copy).is_file():
            return False, f"no copy of {script.source} in {run.copies}"
        for rel, text in script.files(run).items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text, encoding="utf-8")
        argv = script.argv(run)
    except (OSError, ValueError) as e:
        return False, str(e)
    try:
        p = subprocess.run(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=os.environ.copy())
        output, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else ""
        log.write_text(output)
        return False, f"no end within {timeout:.0f} s; log: {log}"
    except OSError as e:
        return False, f"{argv[0]}: {e}"
    log.write_text(f"$ {' '.join(argv)}\n(in {work})\n{output}")
    tail = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
    if rc != 0:
        return False, f"exit status {rc}: {tail[:200]}; log: {log}"
    if "Traceback (most recent call last)" in output:
        return False, f"a traceback: {tail[:200]}; log: {log}"
    if FAILED_BASELINE.search(output):
        return False, f"the baseline did not verify; log: {log}"
    rel = script.results_dir(run)
    best = best_from_results(work / rel) if rel else best_from_output(output)
    if best is None:
        return False, f"no best configuration reported; log: {log}"
    if script.proteus:
        export = proteus_export(work / script.proteus)
        if export is None:
            return False, f"no Proteus file {script.proteus} naming one kernel; log: {log}"
        best += f"; {export}"
    return True, f"best config {best}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--copies", required=True, type=Path, help="the folder of fetched copies (holding SOURCE)")
    ap.add_argument("--record-db", required=True, type=Path, help="the recorded kernel's JSON file")
    ap.add_argument("--record-id", help="the instance (dynamic hash); default: the file's first")
    ap.add_argument("--grid-stride-db", type=Path,
                    help="a recorded grid-stride kernel's JSON file (its first instance), for the scripts whose space shrinks the grid")
    ap.add_argument("--out", type=Path, default=Path("mneme-scripts"), help="work folders and logs")
    ap.add_argument("--only", nargs="*", help="run only these scripts (names as printed)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per script")
    ap.add_argument("--trials", type=int, default=40, help="--num-trials for the scripts that ask for it")
    a = ap.parse_args(argv)
    if not (a.copies / "SOURCE").is_file():
        print(f"mneme_scripts: --copies {a.copies}: no SOURCE file (not a folder of fetched copies)", file=sys.stderr)
        return 2
    try:
        instances = json.loads(a.record_db.read_text())["instances"]
        record_id = a.record_id or next(iter(instances))
    except (OSError, ValueError, KeyError, StopIteration, TypeError) as e:
        print(f"mneme_scripts: --record-db {a.record_db}: not a kernel file with instances ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if record_id not in instances:
        print(f"mneme_scripts: --record-id {record_id}: no such instance in {a.record_db} (recorded: {', '.join(instances)})", file=sys.stderr)
        return 2
    stride_db, stride_id = None, ""
    if a.grid_stride_db is not None:
        try:
            stride_id = str(next(iter(json.loads(a.grid_stride_db.read_text())["instances"])))
        except (OSError, ValueError, KeyError, StopIteration, TypeError) as e:
            print(f"mneme_scripts: --grid-stride-db {a.grid_stride_db}: not a kernel file with instances ({type(e).__name__}: {e})",
                  file=sys.stderr)
            return 2
        stride_db = a.grid_stride_db.resolve()
    mneme = os.environ.get("MNEME_BIN") or shutil.which("mneme") or "mneme"
    run = Run(a.copies.resolve(), a.record_db.resolve(), str(record_id), sys.executable, mneme, a.trials, stride_db, stride_id)
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SCRIPTS if not a.only or s.name in a.only]
    if not chosen:
        print(f"mneme_scripts: --only {a.only}: no such script ({', '.join(s.name for s in SCRIPTS)})", file=sys.stderr)
        return 2
    failed = 0
    for s in chosen:
        ok, what = run_one(s, run.for_script(s), out, a.timeout)
        failed += not ok
        print(f"== mneme script {s.name}: {'PASS' if ok else 'FAIL'} ({what})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
