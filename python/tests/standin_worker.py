"""A stand-in for `mneme worker` that speaks tune/PROTOCOL.md without a GPU.

The configuration's `passes` text chooses the behaviour of a `run`:
"crash" exits with code 3 mid-request; "hang" never answers; "slow:MS" sleeps
MS milliseconds, then answers; "fault" answers runtime_error marked closing,
then exits 4; "noise" writes a non-JSON line to stdout first; "badtype"
answers a result whose exec_time is a string; "deep" answers a line nested
100000 deep; "badjson" answers a line that starts like an answer but is not
JSON; anything else
verifies with `iterations` exec times of block.x nanoseconds and reports
`spill_loads` (an extra figure). Environment: STANDIN_EVENTS appends one line
per event to that file; STANDIN_FAIL_OPEN=N makes the first N opens of any
process fail (counted in the file STANDIN_FAIL_COUNTER), "all" makes every
open fail, "nogpu" makes every open fail with no_gpu.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def event(text: str) -> None:
    path = os.environ.get("STANDIN_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {text}\n")


def open_should_fail() -> str | None:
    mode = os.environ.get("STANDIN_FAIL_OPEN", "")
    if mode in ("all", "nogpu"):
        return mode
    if mode.isdigit():
        counter = os.environ["STANDIN_FAIL_COUNTER"]
        n = int(open(counter).read() or 0) if os.path.exists(counter) else 0
        if n < int(mode):
            with open(counter, "w") as f:
                f.write(str(n + 1))
            return "once"
    return None


def answer(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> int:
    params: dict[str, Any] | None = None
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            answer({"id": 0, "ok": False, "error": f"malformed request: {e}"})
            continue
        rid, op = req.get("id", 0), req.get("op")
        if op == "open":
            failure = open_should_fail()
            if failure:
                event(f"open-failed gpu={req['open'].get('gpu')}")
                answer({"id": rid, "ok": False, "error": "open: told to fail", "no_gpu": failure == "nogpu"})
                continue
            params = req["open"]
            event(f"open gpu={params['gpu']} db={params['db']} instance={params.get('instance')}")
            print(f"stand-in worker: opened on GPU {params['gpu']}", file=sys.stderr, flush=True)
            answer({"id": rid, "ok": True, "kernel": "_Z6vecaddPKfS0_Pfi",
                    "device": {"name": "stand-in GPU", "arch": "sm_90", "sm_count": 4, "max_threads_per_block": 1024,
                               "max_shared_mem_per_block": 49152, "regs_per_sm": 65536, "warp_size": 32}})
        elif op == "run":
            if params is None:
                answer({"id": rid, "ok": False, "error": "run: the session is not open"})
                continue
            config = req["config"]
            passes = config.get("passes", "")
            event(f"run {passes} block={config['block']['x']}")
            if passes == "crash":
                os._exit(3)
            if passes == "hang":
                time.sleep(3600)
            if passes.startswith("slow:"):
                time.sleep(int(passes[5:]) / 1000)
            if passes == "noise":
                sys.stdout.write("this line is not JSON\n")
            if passes == "badtype":
                answer({"id": rid, "ok": True, "result": {"status": "verified", "verified": True, "exec_time": "fast"}})
                continue
            if passes == "deep":
                sys.stdout.write('{"id": %d, "ok": true, "result": %s%s}\n' % (rid, "[" * 100000, "]" * 100000))
                sys.stdout.flush()
                continue
            if passes == "badjson":
                sys.stdout.write('{"id": %d, "ok": tru\n' % rid)
                sys.stdout.flush()
                continue
            if passes == "fault":
                answer({"id": rid, "ok": True, "closing": True,
                        "result": {"status": "runtime_error", "failed": True, "executed": True, "verified": False,
                                   "error": "an illegal memory access was encountered", "exec_time": [],
                                   "gpu_id": params["gpu"]}})
                return 4
            n = params["iterations"]
            answer({"id": rid, "ok": True, "result": {
                "status": "verified", "verified": True, "executed": True, "failed": False,
                "exec_time": [float(config["block"]["x"])] * n, "gpu_id": params["gpu"],
                "reg_usage": 16, "obj_size": 1024, "spill_loads": 0, "ptxas_time": 0.001,
                "start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:00:01Z"}})
        elif op == "close":
            event("close")
            answer({"id": rid, "ok": True})
            return 0
        else:
            answer({"id": rid, "ok": False, "error": f"unknown op {op!r}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
