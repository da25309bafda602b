"""Read the Triton backward's machine code without a GPU: compile it for a Hopper chip (sm_90) with
Triton's own ptxas, then count the instructions of its innermost loop.

The backward's two passes each spend one max (FMNMX) and one FMA (FFMA) per element-pair
(orderlib/kernels_triton.py); every other instruction in the walk over b (shared-memory loads of w
and p, the pipeline's copies, address arithmetic) is overhead the issue slots pay for. Per config
this prints the loop's instruction count, the share that is max + FMA, the shared-memory loads,
the registers per thread and any spills. It measures no speed: the sweep
(benchmarks/investigations/triton_backward_sweep.py) does that on a GPU, this only says what a config asks of the
chip. Strides are specialised as orderlib's launches specialise them (unit strides constant,
pointers and the other strides 16-divisible).

    .venv/bin/python benchmarks/investigations/triton_sass.py [--configs 32x64w1s3u8,8x256w1s3u8] [--arch 90]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.tools.disasm import get_sass

from orderlib import kernels_triton as K

UNIT = ("sqk", "spk", "swa", "sok")  # orderlib's calls pass these as 1: Triton makes them constants
INTS = ("na", "nb", "d", "b_per", "sqa", "sqk", "spb", "spk", "swa", "swb", "sos", "soa", "sok")
REGISTER = re.compile(r"(U?R|U?P|SB)\d+|RZ|URZ|PT|UPT")


def compile_backward(config: tuple[int, int, int, int, int], arch: int = 90, flip: bool = False):
    """The backward kernel compiled for sm_<arch> with one config (rows, columns, warps, stages, unroll)."""
    rows, cols, warps, stages, unroll = config
    sig = {n: "*fp32" for n in ("q_ptr", "p_ptr", "w_ptr", "r_ptr", "out_ptr")}
    sig.update({n: "constexpr" if n in UNIT else "i32" for n in INTS})
    sig.update({n: "constexpr" for n in ("FLIP", "BA", "BK", "UNROLL", "STAGES")})
    const = {"FLIP": flip, "BA": rows, "BK": cols, "UNROLL": unroll, "STAGES": stages, **{n: 1 for n in UNIT}}
    aligned = {"d", "sqa", "spb", "swb", "sos", "soa"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig) if sig[n].startswith("*") or n in aligned}
    src = ASTSource(fn=K.weighted_max_kernel, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps, "num_stages": stages})


def opcode(line: str) -> str | None:
    """The instruction's opcode without modifiers (FFMA, LDS, ...), or None for a label or blank line."""
    for tok in re.split(r"[\s;,\[\]]+", line):
        if re.fullmatch(r"[A-Z][A-Z0-9]*(\.[A-Z0-9_]+)*", tok) and not REGISTER.fullmatch(tok):
            return tok.split(".")[0]
    return None


def innermost_loop(sass: str) -> list[str]:
    """The longest block between a label and a branch back to it: the unrolled walk over b."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^\s*\.?(\w+):\s*$", line))}
    best: list[str] = []
    for i, line in enumerate(lines):
        m = re.search(r"\bBRA\b[^`\w]*`?\(?\.?(\w+)", line)
        if m and m.group(1) in labels and labels[m.group(1)] < i and i + 1 - labels[m.group(1)] > len(best):
            best = lines[labels[m.group(1)] : i + 1]
    return best


def resources(cubin: bytes) -> dict[str, int]:
    """Registers per thread and local-memory (spill) bytes, from cuobjdump."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True, check=True).stdout
    return {k: int(re.search(rf"{k}:(\d+)", out).group(1)) for k in ("REG", "STACK", "LOCAL")}


def loop_mix(config: tuple[int, int, int, int, int], arch: int = 90) -> dict[str, int]:
    """Opcode counts of the innermost loop of the backward under one config, plus its resources."""
    ck = compile_backward(config, arch)
    counts: dict[str, int] = {}
    for line in innermost_loop(get_sass(ck.asm["cubin"])):
        if op := opcode(line):
            counts[op] = counts.get(op, 0) + 1
    return {**counts, **resources(ck.asm["cubin"])}


def parse(text: str) -> tuple[int, int, int, int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)u(\d+)", text)
    if not m:
        raise SystemExit(f"config {text!r}: expected rows x columns w warps s stages u unroll, e.g. 32x64w1s3u8")
    return tuple(int(v) for v in m.groups())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--configs",
        default=",".join(f"{a}x{b}w{w}s{s}u{u}" for a, b, w, s, u in K.BACKWARD_CONFIGS) + ",8x256w1s3u8,16x128w1s3u8",
        help="rows x columns w warps s stages u unroll, comma-separated",
    )
    ap.add_argument("--arch", type=int, default=90, help="compute capability to compile for (90: H100, H200)")
    a = ap.parse_args()
    print(f"Triton {triton.__version__}, sm_{a.arch}; the backward's walk over b, per unrolled loop body")
    print(
        f"{'config':16s} {'instr':>6s} {'max+FMA':>8s} {'share':>6s} {'LDS':>5s} {'other':>6s} {'pairs/warp-instr':>17s} "
        f"{'regs':>5s} {'spill B':>8s}"
    )
    for text in a.configs.split(","):
        mix = loop_mix(parse(text), a.arch)
        work = mix.get("FMNMX", 0) + mix.get("FFMA", 0)
        total = sum(v for k, v in mix.items() if k not in ("REG", "STACK", "LOCAL"))
        lds = mix.get("LDS", 0)
        print(
            f"{text:16s} {total:6d} {work:8d} {work / max(total, 1):6.1%} {lds:5d} {total - work - lds:6d} "
            f"{16 * work / max(total, 1):17.1f} {mix['REG']:5d} {mix['STACK'] + mix['LOCAL']:8d}",
            flush=True,
        )


if __name__ == "__main__":
    main()
