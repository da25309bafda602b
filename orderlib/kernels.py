"""Build and load the fused C++ order-violation kernel (orderlib/csrc) with torch's JIT extension
builder, on first use (about 30 s, once per machine). Where it cannot be built, `cpu_kernel()`
returns None, `kernel_status()` says why, and `order_violation_matrix` uses the chunked reference.
ORDERLIB_FUSED=0 never builds or uses it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import sys
import threading
from pathlib import Path

import torch

SOURCE = Path(__file__).parent / "csrc" / "order_violation.cpp"
DTYPES = (torch.float32, torch.float64)
_lock = threading.Lock()
_state: dict = {}  # "module" or "error", once tried


def _arch_flags() -> list[str]:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return ["-march=native"]
    if machine in ("aarch64", "arm64"):
        return ["-mcpu=native"]
    return []


def _cpu_signature() -> str:
    """Hash of what `-march=native` depends on, so a shared cache never mixes CPUs."""
    text = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features", "model name")):
                text += line
                break
    except OSError:
        pass
    return hashlib.sha1(text.encode()).hexdigest()[:8]


# Per-kernel additions: these loops call sqrt, which vectorises only without errno (word2gauss: 2.2x
# per epoch; its sums then run in SIMD order, so its trajectory moved at float rounding). The box
# energies' loops select between branches that divide: GCC if-converts them (and then calls
# libmvec's exp / log / log1p) only when FP operations may not trap, which no code here relies on.
EXTRA_FLAGS = {"concept_step.cpp": ["-fno-math-errno", "-fno-trapping-math"], "word2gauss.cpp": ["-fno-math-errno"]}


def build_flags(source: Path | None = None) -> list[str]:
    return ["-O3", "-fopenmp", *_arch_flags(), *EXTRA_FLAGS.get(source.name if source else "", [])]


def _build(source: Path):
    # Importing the builder logs "No CUDA runtime is found" on CPU-only machines: not our concern.
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        from torch.utils.cpp_extension import load
    finally:
        quiet.setLevel(level)

    # ninja may be installed in this environment's bin/ without that dir being on PATH.
    env_bin = str(Path(sys.executable).parent)
    old_path = os.environ.get("PATH", "")
    if env_bin not in old_path.split(os.pathsep):
        os.environ["PATH"] = env_bin + os.pathsep + old_path
    try:
        name, build_dir, copy = build_location(source)
        build_dir.mkdir(parents=True, exist_ok=True)
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            tmp = copy.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(source.read_bytes())
            os.replace(tmp, copy)
        return load(
            name=name,
            sources=[str(copy)],
            build_directory=str(build_dir),
            extra_cflags=build_flags(source),
            extra_ldflags=["-fopenmp", "-lm"],
            verbose=False,
        )
    finally:
        os.environ["PATH"] = old_path


def build_location(source: Path) -> tuple[str, Path, Path]:
    """Return (module name, build dir, source copy) for `source`, keyed by its content, the flags and
    the CPU: every checkout with the same kernel source shares one build (the source is compiled from
    a copy inside the build dir, so no checkout's path enters the build), and a changed source gets
    its own dir instead of rebuilding over another checkout's."""
    key = hashlib.sha1(source.read_bytes() + " ".join(build_flags(source)).encode() + torch.__version__.encode())
    name = f"orderlib_{source.stem}_{key.hexdigest()[:10]}_{_cpu_signature()}"
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    build_dir = root / name
    return name, build_dir, build_dir / source.name


def built(state: dict, source: Path):
    """Build `source` once per process into `state` ("module", or "error" with the reason); return
    the module or None. A missing compiler or ninja, or a failed build, is recorded, not raised."""
    with _lock:
        if not state:
            try:
                state["module"] = _build(source)
            except Exception as exc:  # no compiler, no ninja, a failed build
                lines = str(exc).strip().splitlines()
                state["error"] = f"{type(exc).__name__}: {lines[-1] if lines else ''}"
        return state.get("module")


def cpu_kernel():
    """Return the compiled kernel module, or None when it is disabled or cannot be built (then
    `order_violation_matrix` uses the chunked reference)."""
    if os.environ.get("ORDERLIB_FUSED", "1") == "0":
        return None
    return built(_state, SOURCE)


def kernel_status() -> str:
    """Say whether the fused CPU kernel is in use, and if not, why."""
    if os.environ.get("ORDERLIB_FUSED", "1") == "0":
        return "disabled by ORDERLIB_FUSED=0"
    module = cpu_kernel()
    return "fused C++ kernel (" + " ".join(build_flags()) + ")" if module else "unavailable: " + _state["error"]


def supports(x: torch.Tensor, y: torch.Tensor) -> bool:
    """True where the fused kernel applies: CPU, float32/float64, same dtype."""
    return x.device.type == "cpu" and y.device.type == "cpu" and x.dtype in DTYPES and y.dtype == x.dtype


def no_second_order() -> None:
    """Refuse create_graph=True: the fused backward is not itself differentiable."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            "second-order gradients (create_graph=True) are not available through the fused "
            "order-violation kernel; call order_violation_matrix(..., backend='reference')"
        )


class FusedOrderViolation(torch.autograd.Function):
    """E[i, j] = ||max(0, y_j - x_i)||^2 (Eq. 2 of Vendrov et al.) over all pairs, fused."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, y)
        return cpu_kernel().forward(x, y)  # (N, M)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        no_second_order()
        x, y = ctx.saved_tensors
        gx, gy = cpu_kernel().backward(grad, x, y)  # (N, D), (M, D)
        return (gx if ctx.needs_input_grad[0] else None), (gy if ctx.needs_input_grad[1] else None)
