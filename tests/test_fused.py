"""The fused C++ order-violation kernel against the chunked reference, and its fallback."""

import os

import pytest
import torch

from orderlib import kernels
from orderlib import penalties as P

# Shapes around the register tiles (forward 4 rows x 24 float / 12 double columns; gradients
# 4 rows x one slice of D, 32 float / 16 double columns with AVX-512, 16 / 8 without):
# multiples, one off, empty and single rows.
SHAPES = [
    (1, 1, 1),
    (4, 24, 8),
    (5, 25, 7),
    (3, 23, 25),
    (9, 50, 130),
    (17, 1, 33),
    (1, 31, 3),
    (0, 5, 4),
    (5, 0, 4),
    (6, 7, 0),
    (40, 13, 1),
]
# Shapes around the gradient kernel's blocking: slices of D (a multiple, one over, one under),
# blocks of 128 rows of y, panels of 64 rows of x, rows of x split into groups when D has few
# slices (the last group short), and M past one chunk of packed y (about 2 MiB per thread).
GRAD_SHAPES = [
    (4, 128, 32),
    (5, 129, 33),
    (3, 127, 31),
    (70, 40, 20),
    (37, 50, 7),
    (41, 20, 70),
    (6, 1100, 1000),
    (1, 300, 16),
    (9, 257, 64),
]


@pytest.fixture(scope="module")
def kernel():
    module = kernels.cpu_kernel()
    if module is None:
        if os.environ.get("ORDERLIB_REQUIRE_FUSED") == "1":
            pytest.fail(f"ORDERLIB_REQUIRE_FUSED=1 but {kernels.kernel_status()}")
        pytest.skip(kernels.kernel_status())
    return module


def _pair(n, m, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=dtype), torch.randn(m, d, generator=g, dtype=dtype)


@pytest.mark.parametrize("n,m,d", SHAPES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_fused_forward_matches_reference(kernel, n, m, d, dtype, tol):
    x, y = _pair(n, m, d, dtype)
    got = P.order_violation_matrix(x, y, backend="fused")
    ref = P.order_violation_matrix_reference(x, y)
    assert got.shape == (n, m) and got.dtype == dtype
    assert torch.allclose(got, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_fused_gradients_match_autograd_on_reference(kernel, n, m, d):
    x, y = _pair(n, m, d, torch.float64, seed=1)
    g = torch.randn(n, m, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    ref = torch.autograd.grad(P.order_violation_matrix_reference(xr, yr), (xr, yr), g, allow_unused=True)
    xf, yf = x.clone().requires_grad_(), y.clone().requires_grad_()
    got = torch.autograd.grad(P.order_violation_matrix(xf, yf, backend="fused"), (xf, yf), g, allow_unused=True)
    for a, b, t in zip(got, ref, (x, y)):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def _grads(fn, x, y, g):
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    return torch.autograd.grad(fn(xr, yr), (xr, yr), g)


@pytest.mark.parametrize("n,m,d", GRAD_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_gradients_around_the_blocking(kernel, n, m, d, dtype):
    x, y = _pair(n, m, d, dtype, seed=11)
    g = torch.randn(n, m, dtype=dtype, generator=torch.Generator().manual_seed(12))
    got = _grads(lambda a, b: P.order_violation_matrix(a, b, backend="fused"), x, y, g)
    ref = _grads(P.order_violation_matrix_reference, x.double(), y.double(), g.double())  # float64 truth
    tol = 1e-4 if dtype == torch.float32 else 1e-11
    for a, b in zip(got, ref):
        assert a.dtype == dtype and a.shape == b.shape
        assert torch.allclose(a.double(), b, rtol=tol, atol=tol * max(1.0, b.abs().max().item()))


@pytest.mark.parametrize("n,m,d", [(53, 301, 40), (41, 20, 70), (6, 1100, 1000)])
def test_fused_gradients_independent_of_threads(kernel, n, m, d):
    """Work items depend on the shape only, so every gradient element is summed in one order."""
    x, y = _pair(n, m, d, torch.float32, seed=13)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(14))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernel.backward(g, x, y)
        torch.set_num_threads(max(3, before))
        many = kernel.backward(g, x, y)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(one, many):
        assert torch.equal(a, b)


def test_fused_gradients_of_non_contiguous_inputs_and_grad(kernel):
    x, y = _pair(23, 70, 45, torch.float64, seed=15)
    w = torch.randn(70, 23, dtype=torch.float64, generator=torch.Generator().manual_seed(16))
    xt = x.T.contiguous().T  # column-major x
    ys = torch.stack([y, -y], -1)[..., 0]  # every other element of a buffer, the values of y
    assert not xt.is_contiguous() and not ys.is_contiguous() and torch.equal(ys, y)
    xf, yf = xt.clone().requires_grad_(), ys.detach().requires_grad_()  # clone keeps the strides
    assert not xf.is_contiguous()
    # E.T * w: the upstream gradient reaching the kernel is w.T, a transposed view.
    got = torch.autograd.grad((P.order_violation_matrix(xf, yf, backend="fused").T * w).sum(), (xf, yf))
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    ref = torch.autograd.grad((P.order_violation_matrix_reference(xr, yr).T * w).sum(), (xr, yr))
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_fused_backward_casts_a_grad_of_another_dtype(kernel):
    x, y = _pair(9, 33, 35, torch.float32, seed=17)
    g = torch.randn(9, 33, dtype=torch.float64, generator=torch.Generator().manual_seed(18))
    got = kernel.backward(g, x, y)
    ref = kernel.backward(g.float(), x, y)
    assert all(a.dtype == torch.float32 and torch.equal(a, b) for a, b in zip(got, ref))


def test_fused_gradcheck_and_shared_argument(kernel):
    x, y = _pair(6, 29, 5, torch.float64, seed=3)
    x.requires_grad_(), y.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: P.order_violation_matrix(a, b, backend="fused"), (x, y))
    # E(x, x) as in the Fig. 2 toy: both gradient paths reach the same leaf.
    z = x.detach().clone().requires_grad_()
    P.order_violation_matrix(z, z, backend="fused").sum().backward()
    zr = x.detach().clone().requires_grad_()
    P.order_violation_matrix_reference(zr, zr).sum().backward()
    assert torch.allclose(z.grad, zr.grad, atol=1e-12)


def test_fused_float32_gradients(kernel):
    x, y = _pair(37, 61, 70, torch.float32, seed=4)
    g = torch.randn(37, 61)
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    xf, yf = x.clone().requires_grad_(), y.clone().requires_grad_()
    (P.order_violation_matrix_reference(xr, yr) * g).sum().backward()
    (P.order_violation_matrix(xf, yf, backend="fused") * g).sum().backward()
    assert torch.allclose(xf.grad, xr.grad, rtol=1e-4, atol=1e-4)
    assert torch.allclose(yf.grad, yr.grad, rtol=1e-4, atol=1e-4)


def _with_nans(x, y):
    x, y = x.clone(), y.clone()
    x[1, 2] = y[3, 0] = float("nan")  # row 1 of E and column 3 of E are NaN (where the violation sees them)
    if y.shape[1] > 20:
        y[0, 21] = float("nan")  # a lane past the first vector
    return x, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,m,d", [(5, 25, 7), (9, 50, 130)])
def test_fused_forward_keeps_nan_as_the_reference(kernel, n, m, d, dtype):
    """NaN in, NaN out (torch.clamp's rule): a diverged embedding never scores a perfect 0 (issue 16)."""
    x, y = _with_nans(*_pair(n, m, d, dtype, seed=7))
    got = P.order_violation_matrix(x, y, backend="fused")
    ref = P.order_violation_matrix_reference(x, y)
    assert got.isnan().any() and torch.equal(got.isnan(), ref.isnan())
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_fused_gradients_with_nan_inputs_match_the_reference(kernel):
    x, y = _with_nans(*_pair(9, 50, 30, torch.float64, seed=8))
    g = torch.randn(9, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    xf, yf = x.clone().requires_grad_(), y.clone().requires_grad_()
    ref = torch.autograd.grad(P.order_violation_matrix_reference(xr, yr), (xr, yr), g)
    got = torch.autograd.grad(P.order_violation_matrix(xf, yf, backend="fused"), (xf, yf), g)
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_second_order_gradients_are_refused_not_silently_wrong(kernel):
    x, y = _pair(4, 6, 3, torch.float64, seed=10)
    x.requires_grad_()
    e = P.order_violation_matrix(x, y, backend="fused")
    with pytest.raises(RuntimeError, match="second-order gradients"):
        torch.autograd.grad(e.sum(), x, create_graph=True)
    xr = x.detach().clone().requires_grad_()  # the reference path supports them
    (gx,) = torch.autograd.grad(P.order_violation_matrix_reference(xr, y).sum(), xr, create_graph=True)
    assert gx.requires_grad


def test_fused_result_independent_of_threads_and_layout(kernel):
    x, y = _pair(53, 301, 40, torch.float32, seed=5)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = P.order_violation_matrix(x, y, backend="fused")
        torch.set_num_threads(max(2, before))
        many = P.order_violation_matrix(x, y, backend="fused")
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, many)  # each output tile is summed by one thread in a fixed order
    xt = x.T.contiguous().T  # same values, column-major storage
    assert not xt.is_contiguous()
    assert torch.equal(P.order_violation_matrix(xt, y, backend="fused"), one)


def test_auto_backend_uses_the_kernel_on_cpu(kernel):
    x, y = _pair(3, 4, 5, torch.float32)
    x.requires_grad_()
    e = P.order_violation_matrix(x, y)
    assert type(e.grad_fn).__name__.startswith("FusedOrderViolation")
    e16 = P.order_violation_matrix(x.detach().bfloat16(), y.bfloat16())  # no kernel: reference
    assert e16.dtype == torch.bfloat16


def test_fallback_when_kernel_cannot_be_built(monkeypatch):
    def broken(*source):
        raise OSError("no C++ compiler found (simulated)")

    monkeypatch.setattr(kernels, "_build", broken)
    monkeypatch.setattr(kernels, "_state", {})
    assert kernels.cpu_kernel() is None
    assert "no C++ compiler found" in kernels.kernel_status()
    x, y = _pair(5, 7, 3, torch.float64)
    x.requires_grad_()
    e = P.order_violation_matrix(x, y)  # auto: reference, still differentiable
    assert torch.allclose(e, P.order_violation_matrix_reference(x, y))
    e.sum().backward()
    assert x.grad is not None
    with pytest.raises(RuntimeError, match=r"no C\+\+ compiler found"):
        P.order_violation_matrix(x, y, backend="fused")


def test_fused_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("ORDERLIB_FUSED", "0")
    assert kernels.cpu_kernel() is None
    assert "ORDERLIB_FUSED=0" in kernels.kernel_status()
    x, y = _pair(4, 6, 3, torch.float32)
    assert torch.allclose(P.order_violation_matrix(x, y), P.order_violation_matrix_reference(x, y))
    with pytest.raises(ValueError, match="backend must be one of"):
        P.order_violation_matrix(x, y, backend="triton")


def test_chunk_budget_setting(monkeypatch):
    monkeypatch.setenv("ORDERLIB_CHUNK_BYTES", str(3 * 10 * 4))  # 3 rows of (M=10, D=1) float32
    assert P.chunk_bytes() == 120
    x, y = _pair(7, 10, 1, torch.float32)
    ref = P.order_violation_matrix_reference(x, y, chunk=7)
    rows, violation = [], P.order_violation
    monkeypatch.setattr(P, "order_violation", lambda a, b: rows.append(a.shape[0]) or violation(a, b))
    assert torch.equal(P.order_violation_matrix_reference(x, y), ref)
    assert rows == [3, 3, 1]  # the budget's chunk: 3 rows of x at a time
    monkeypatch.delenv("ORDERLIB_CHUNK_BYTES")
    assert 2**20 <= P.chunk_bytes() <= P.MAX_CHUNK_BYTES


TRITON_CHECK = r"""
import torch
from orderlib import penalties as P
for n, m, d in [(1, 1, 1), (70, 65, 130), (33, 129, 7), (5, 0, 3), (0, 4, 2), (3, 4, 0)]:
    g = torch.Generator().manual_seed(n + m + d)
    x = torch.randn(n, d, generator=g).requires_grad_()
    y = torch.randn(m, d, generator=g).requires_grad_()
    w = torch.randn(n, m, generator=g)
    e = P.order_violation_matrix(x, y, backend="fused")
    assert type(e.grad_fn).__name__.startswith("TritonOrderViolation"), e.grad_fn
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    r = P.order_violation_matrix_reference(xr, yr)
    assert torch.allclose(e, r, rtol=1e-5, atol=1e-4), (n, m, d)
    got = torch.autograd.grad(e, (x, y), w, allow_unused=True)
    ref = torch.autograd.grad(r, (xr, yr), w, allow_unused=True)
    for a, b, t in zip(got, ref, (x, y)):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-4), (n, m, d)
x = torch.randn(70, 40)
y = torch.randn(65, 40)
x[1, 2] = y[3, 30] = float("nan")
e, r = P.order_violation_matrix(x, y, backend="fused"), P.order_violation_matrix_reference(x, y)
assert torch.equal(e.isnan(), r.isnan()) and e.isnan().any(), "NaN must propagate"
xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
w = torch.randn(70, 65)
got = torch.autograd.grad(P.order_violation_matrix(xg, yg, backend="fused"), (xg, yg), w)
ref = torch.autograd.grad(P.order_violation_matrix_reference(xr, yr), (xr, yr), w)
for a, b in zip(got, ref):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-4, equal_nan=True)
# embeddings far from 0: the backward's max form cancels q * sum_b w, so it centres x and y first
# (without that, 1.4e-3 here; float32's reference: 3.5e-6)
x, y = (torch.rand(70, 40) + 100).requires_grad_(), (torch.rand(65, 40) + 100).requires_grad_()
xr, yr = x.detach().double().requires_grad_(), y.detach().double().requires_grad_()
got = torch.autograd.grad(P.order_violation_matrix(x, y, backend="fused"), (x, y), w)
ref = torch.autograd.grad(P.order_violation_matrix_reference(xr, yr), (xr, yr), w.double())
for a, b in zip(got, ref):
    assert (a.double() - b).abs().max() < 2e-5, (a.double() - b).abs().max()
print("triton ok")
"""


def _in_interpreter(*args: str):
    """Run `python *args` under Triton's CPU interpreter; return the finished process. An expected
    failure where this Triton's interpreter cannot run under this numpy at all: numpy >= 2.5 refuses
    int() of a one-element array, which some Triton interpreters (3.6) still do in range(0, d)."""
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "ORDERLIB_FUSED": "0"}
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600)
    if (
        out.returncode
        and "interpreter.py" in out.stderr
        and "only 0-dimensional arrays can be converted to Python scalars" in out.stderr
    ):
        pytest.xfail("this Triton's interpreter does not run under this numpy (int() of an array)")
    return out


def test_triton_kernel_matches_reference_in_interpreter():
    """The CUDA path's Triton kernels, run by Triton's CPU interpreter (no GPU needed)."""
    out = _in_interpreter("-c", TRITON_CHECK)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "triton ok" in out.stdout


def test_triton_path_not_used_for_cpu_tensors_without_interpreter(monkeypatch):
    from orderlib import kernels_triton

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.zeros(2, 3)
    assert not kernels_triton.supports(x, x)
    assert not kernels_triton.supports(x.double(), x.double())


def test_backward_splits_fill_the_gpu_within_bounds():
    """The Triton backward cuts its walk over b into parts: more for fewer rows, never more than 8
    or than leaves each part 32 b's, one where the tiles alone fill the GPU."""
    K = pytest.importorskip("orderlib.kernels_triton")
    if K.triton is None:
        pytest.skip("Triton not installed")
    assert K.splits(1000, 5000, 1024, 132) == 5  # Table 2's eval shape, x's gradient: 256 tiles
    assert K.splits(5000, 1000, 1024, 132) == 1  # y's gradient: 1264 tiles fill 132 processors
    assert K.splits(128, 128, 1024, 132) == 4  # a training batch: capped by 128 // 32 b's
    assert K.splits(10, 20, 8, 132) == 1  # too few b's to share
    assert all(
        1 <= K.splits(n, m, d, p) <= 8
        for n in (1, 50, 4000)
        for m in (1, 40, 9000)
        for d in (1, 64, 1024)
        for p in (1, 132)
    )


def test_backward_machine_code_spends_a_max_and_an_fma_per_element_pair(benchmark_module):
    """The Triton backward compiled offline for an H100 (sm_90, Triton's own ptxas; no GPU): its
    unrolled walk over b holds one FMNMX and one FFMA per element-pair of each thread's tile and no
    subtract (the max form), with the loads of w and p a small share."""
    K = pytest.importorskip("orderlib.kernels_triton")
    if K.triton is None:
        pytest.skip("Triton not installed")
    sass = benchmark_module("triton_sass")
    for rows, cols, warps, stages, unroll in ((32, 64, 1, 3, 8), (8, 256, 1, 3, 4)):
        try:
            mix = sass.loop_mix((rows, cols, warps, stages, unroll))
        except (FileNotFoundError, ImportError, RuntimeError) as exc:  # a Triton without NVIDIA's tools
            pytest.skip(f"cannot compile for sm_90 here: {exc}")
        pairs = rows * cols // (32 * warps) * unroll  # element-pairs per thread per loop body
        assert mix["FMNMX"] == pairs and mix["FFMA"] == pairs, (rows, cols, mix)
        assert mix.get("FADD", 0) == 0 and mix.get("FSEL", 0) == 0, mix
        assert mix["LDS"] < pairs / 2, mix
        assert mix["LOCAL"] == 0, mix


def test_backward_sweep_variants_match_reference_in_interpreter():
    """benchmarks/investigations/triton_backward_sweep.py under Triton's CPU interpreter: both
    formulations of a pass and `closed_backward` (the closure in the kernel, the variant a GPU run
    times) against float64."""
    import re
    from pathlib import Path

    sweep = Path(__file__).resolve().parents[1] / "benchmarks" / "investigations" / "triton_backward_sweep.py"
    out = _in_interpreter(str(sweep))
    assert out.returncode == 0, out.stderr[-3000:]
    errors = [float(v) for v in re.findall(r"(?:error / largest gradient|with NaN inputs): ([0-9.e+-]+)", out.stdout)]
    assert len(errors) == 4, out.stdout
    assert max(errors) < 1e-5, out.stdout
