"""mneme.llvm reads LLVM 22 bitcode: functions, blocks, instructions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

llvmlite = pytest.importorskip("llvmlite", reason="llvmlite is not installed: pip install 'llvmlite>=0.50'")

from mneme import llvm  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

KERNEL_IR = r"""
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @scale(ptr %x, float %a, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %in = icmp slt i32 %tid, %n
  br i1 %in, label %body, label %exit
body:
  %idx = sext i32 %tid to i64
  %p = getelementptr float, ptr %x, i64 %idx
  %v = load float, ptr %p
  %r = fmul float %v, %a
  store float %r, ptr %p
  br label %exit
exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
"""


def bitcode_from_text(text: str) -> bytes:
    import llvmlite.binding as binding

    return bytes(binding.parse_assembly(text).as_bitcode())


def test_module_functions_blocks_instructions() -> None:
    module = llvm.parse_bitcode(bitcode_from_text(KERNEL_IR))
    assert module.triple == "nvptx64-nvidia-cuda"
    names = [f.name for f in module.functions]
    assert names == ["scale", "llvm.nvvm.read.ptx.sreg.tid.x"]
    scale = module.get_function("scale")
    assert not scale.is_declaration and module.get_function("llvm.nvvm.read.ptx.sreg.tid.x").is_declaration
    assert [b.name for b in scale.blocks] == ["entry", "body", "exit"]
    opcodes = [i.opcode for i in scale.instructions]
    assert opcodes == ["call", "icmp", "br", "sext", "getelementptr", "load", "fmul", "store", "br", "ret"]
    fmul = [i for i in scale.instructions if i.opcode == "fmul"][0]
    assert (fmul.name, fmul.type) == ("r", "float")
    assert "fmul float %v, %a" in str(fmul)
    assert len(scale.arguments) == 3
    with pytest.raises(NameError, match="no function named 'absent'"):
        module.get_function("absent")


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not readable LLVM bitcode"):
        llvm.parse_bitcode(b"definitely not bitcode")
    with pytest.raises(TypeError, match="want bytes"):
        llvm.parse_bitcode("text")  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("clang++-22") is None, reason="clang++-22 is not installed (scripts/setup.sh installs it)")
def test_reads_clang22_cuda_bitcode(tmp_path: Path) -> None:
    """Bitcode as `mneme record` stores it: clang-22's unoptimized CUDA device IR."""
    out = tmp_path / "vecadd.bc"
    subprocess.run(["clang++-22", "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
                    "--cuda-gpu-arch=sm_90", "-Xclang", "-target-feature", "-Xclang", "+ptx80",
                    "-O3", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(REPO / "llvm" / "testdata" / "vecadd.cu"), "-o", str(out)], check=True)
    module = llvm.parse_bitcode_file(out)
    kernel = module.get_function("_Z6vecaddPKfS0_Pfi")
    opcodes = [i.opcode for i in kernel.instructions]
    assert opcodes.count("fadd") == 1 and "getelementptr" in opcodes and opcodes[-1] == "ret"
