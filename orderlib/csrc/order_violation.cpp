// Fused all-pairs order violation on CPU (Eq. 2 of Vendrov et al.):
//   E[i, j] = sum_d max(0, y[j, d] - x[i, d])^2          x (N, D), y (M, D) -> E (N, M)
// and its gradients, without ever materialising the N x M x D broadcast.
//
// Forward is laid out like a GEMM micro-kernel: x is packed into blocks of R rows stored
// d-major (R scalars per d), y into panels of C columns stored d-major (C scalars per d);
// an R x C tile of E lives in registers while d runs over D. Per element-pair the kernel
// spends one subtract, one max and one multiply-add, against one FMA for a GEMM.
// SIMD comes from GCC/Clang vector extensions, so the same source builds on any target.
#include <ATen/ATen.h>
#include <torch/python.h>
#include <ATen/Parallel.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

constexpr int kVecBytes = 32;  // one AVX2 register; two NEON registers elsewhere

template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(kVecBytes)));
  static constexpr int lanes = kVecBytes / sizeof(T);
};

template <typename T>
inline typename Vec<T>::type load(const T* p) {
  typename Vec<T>::type v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
inline void store(T* p, typename Vec<T>::type v) { std::memcpy(p, &v, sizeof(v)); }

template <typename T>
inline typename Vec<T>::type splat(T s) {
  typename Vec<T>::type v;
  for (int k = 0; k < Vec<T>::lanes; ++k) v[k] = s;
  return v;
}

template <typename T>
inline typename Vec<T>::type relu(typename Vec<T>::type v) {
  const typename Vec<T>::type zero = splat<T>(T(0));
  return v > zero ? v : zero;  // compare + blend where no max instruction is known
}
// The forward keeps NaN as torch.clamp(v, min=0) does (NaN in, NaN out), so a diverged embedding
// never scores a perfect 0; the gradients use relu above, which maps NaN to 0 as clamp's backward
// mask (v >= 0) does.
template <typename T>
inline typename Vec<T>::type relu_keep_nan(typename Vec<T>::type v) {
  const typename Vec<T>::type zero = splat<T>(T(0));
  return v < zero ? zero : v;  // NaN < 0 is false: NaN passes through
}
#if defined(__AVX__) && !defined(OV_BLEND)  // one vmaxps / vmaxpd instead of compare + blend
// vmaxps returns its second operand when either is NaN: (v, 0) drops NaN, (0, v) keeps it.
template <>
inline Vec<float>::type relu<float>(Vec<float>::type v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
template <>
inline Vec<double>::type relu<double>(Vec<double>::type v) { return _mm256_max_pd(v, _mm256_setzero_pd()); }
template <>
inline Vec<float>::type relu_keep_nan<float>(Vec<float>::type v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
template <>
inline Vec<double>::type relu_keep_nan<double>(Vec<double>::type v) { return _mm256_max_pd(_mm256_setzero_pd(), v); }
#endif

#ifndef OV_ROWS
#define OV_ROWS 4
#endif
#ifndef OV_VECS
#define OV_VECS 3
#endif
#ifndef OV_BACK_ROWS
#define OV_BACK_ROWS 2
#endif
#ifndef OV_BACK_VECS
#define OV_BACK_VECS 3
#endif
constexpr int kRows = OV_ROWS;  // R: rows of x per register tile
constexpr int kVecs = OV_VECS;  // C = kVecs * lanes columns of y per register tile
constexpr int kBackRows = OV_BACK_ROWS, kBackVecs = OV_BACK_VECS;  // the same for the gradients

// Pack rows [r0, r0 + R) of x (N, D) d-major into dst (D, R), zero-padding rows past N.
template <typename T>
void pack_rows(const T* x, int64_t n, int64_t d, int64_t r0, int rows, T* dst) {
  for (int r = 0; r < rows; ++r) {
    const int64_t i = r0 + r;
    for (int64_t k = 0; k < d; ++k) dst[k * rows + r] = i < n ? x[i * d + k] : T(0);
  }
}

// E tile (R x C) for one packed block of x and one packed panel of y.
template <typename T>
inline void tile(const T* xp, const T* yp, int64_t d, T* out, int64_t ld, int rows_valid,
                 int cols_valid) {
  using V = typename Vec<T>::type;
  constexpr int L = Vec<T>::lanes, C = kVecs * L;
  V acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = splat<T>(T(0));
  for (int64_t k = 0; k < d; ++k) {
    V y[kVecs];
    for (int v = 0; v < kVecs; ++v) y[v] = load(yp + k * C + v * L);
    for (int r = 0; r < kRows; ++r) {
      const V x = splat<T>(xp[k * kRows + r]);
      for (int v = 0; v < kVecs; ++v) {
        const V t = relu_keep_nan<T>(y[v] - x);
        acc[r][v] += t * t;
      }
    }
  }
  if (rows_valid == kRows && cols_valid == C) {
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kVecs; ++v) store(out + r * ld + v * L, acc[r][v]);
    return;
  }
  T buf[kRows][C];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) store(&buf[r][v * L], acc[r][v]);
  for (int r = 0; r < rows_valid; ++r)
    for (int c = 0; c < cols_valid; ++c) out[r * ld + c] = buf[r][c];
}

template <typename T>
void forward_impl(const T* x, const T* y, T* e, int64_t n, int64_t m, int64_t d) {
  constexpr int C = kVecs * Vec<T>::lanes;
  const int64_t blocks = (n + kRows - 1) / kRows, panels = (m + C - 1) / C;
  std::vector<T> xp(blocks * kRows * d);  // (blocks, D, R)
  at::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) pack_rows(x, n, d, b * kRows, kRows, xp.data() + b * kRows * d);
  });
  // Work items: (panel, group of x blocks), enough of them to keep every thread busy.
  const int64_t want = 8 * at::get_num_threads();
  const int64_t groups = std::min<int64_t>(blocks, std::max<int64_t>(1, (want + panels - 1) / panels));
  const int64_t per_group = (blocks + groups - 1) / groups;
  at::parallel_for(0, panels * groups, 1, [&](int64_t w0, int64_t w1) {
    std::vector<T> yp(C * d);  // (D, C)
    int64_t packed = -1;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t p = w / groups, g = w % groups;
      if (p != packed) {
        pack_rows(y, m, d, p * C, C, yp.data());
        packed = p;
      }
      const int cols = static_cast<int>(std::min<int64_t>(C, m - p * C));
      for (int64_t b = g * per_group; b < std::min(blocks, (g + 1) * per_group); ++b) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, n - b * kRows));
        tile(xp.data() + b * kRows * d, yp.data(), d, e + b * kRows * m + p * C, m, rows, cols);
      }
    }
  });
}

// out[a, k] = sum_b w[a, b] * max(0, s * (p[b, k] - q[a, k])), s = +1 or -1 (kFlip).
// With q = x, p = y, w = G, s = +1 this is -dE/dx / 2; with q = y, p = x, w = G^T, s = -1 it is
// dE/dy / 2. Register tile: kBackRows rows of a times C = kBackVecs * lanes columns k, with
// q held in registers while b streams through a packed (nb, C) slice of p.
template <typename T, bool kFlip>
void weighted_relu_impl(const T* q, const T* p, const T* w, T* out, int64_t na, int64_t nb,
                        int64_t d) {
  using V = typename Vec<T>::type;
  constexpr int L = Vec<T>::lanes, R = kBackRows, NV = kBackVecs, C = NV * L;
  const int64_t blocks = (na + R - 1) / R, ranges = (d + C - 1) / C;
  const int64_t want = 8 * at::get_num_threads();
  const int64_t groups = std::min<int64_t>(blocks, std::max<int64_t>(1, (want + ranges - 1) / ranges));
  const int64_t per_group = (blocks + groups - 1) / groups;
  at::parallel_for(0, ranges * groups, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> pp(nb * C);  // (nb, C) slice of p, zero-padded past column d
    int64_t packed = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t kr = t / groups, g = t % groups, k0 = kr * C;
      const int width = static_cast<int>(std::min<int64_t>(C, d - k0));
      if (kr != packed) {
        for (int64_t b = 0; b < nb; ++b)
          for (int c = 0; c < C; ++c) pp[b * C + c] = c < width ? p[b * d + k0 + c] : T(0);
        packed = kr;
      }
      for (int64_t blk = g * per_group; blk < std::min(blocks, (g + 1) * per_group); ++blk) {
        const int64_t a0 = blk * R;
        const int rows = static_cast<int>(std::min<int64_t>(R, na - a0));
        T buf[R][C] = {};
        const T* wr[R];
        for (int r = 0; r < R; ++r) {
          wr[r] = w + (a0 + std::min(r, rows - 1)) * nb;  // padded rows reuse a valid row
          for (int c = 0; c < width && r < rows; ++c) buf[r][c] = q[(a0 + r) * d + k0 + c];
        }
        V qv[R][NV], acc[R][NV];
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < NV; ++v) {
            qv[r][v] = load(&buf[r][v * L]);
            acc[r][v] = splat<T>(T(0));
          }
        for (int64_t b = 0; b < nb; ++b) {
          V pv[NV];
          for (int v = 0; v < NV; ++v) pv[v] = load(pp.data() + b * C + v * L);
          for (int r = 0; r < R; ++r) {
            const V ws = splat<T>(wr[r][b]);
            for (int v = 0; v < NV; ++v) acc[r][v] += ws * relu<T>(kFlip ? qv[r][v] - pv[v] : pv[v] - qv[r][v]);
          }
        }
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < NV; ++v) store(&buf[r][v * L], acc[r][v]);
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < width; ++c) out[(a0 + r) * d + k0 + c] = buf[r][c];
      }
    }
  });
}

void check_pair(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.device().is_cpu() && y.device().is_cpu(), "fused order violation: CPU tensors only");
  TORCH_CHECK(x.dim() == 2 && y.dim() == 2 && x.size(1) == y.size(1),
              "fused order violation: expected x (N, D) and y (M, D), got ", x.sizes(), " and ", y.sizes());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "fused order violation: dtypes differ");
}

at::Tensor forward(at::Tensor x, at::Tensor y) {
  check_pair(x, y);
  x = x.contiguous();
  y = y.contiguous();
  auto e = at::empty({x.size(0), y.size(0)}, x.options());
  if (x.size(0) == 0 || y.size(0) == 0) return e;
  if (x.size(1) == 0) return e.zero_();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "order_violation_matrix", [&] {
    forward_impl<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), e.data_ptr<scalar_t>(),
                           x.size(0), y.size(0), x.size(1));
  });
  return e;
}

// Return (dE/dx, dE/dy) contracted with the upstream gradient g (N, M).
std::vector<at::Tensor> backward(at::Tensor g, at::Tensor x, at::Tensor y) {
  check_pair(x, y);
  TORCH_CHECK(g.dim() == 2 && g.size(0) == x.size(0) && g.size(1) == y.size(0),
              "fused order violation: grad shape ", g.sizes(), " does not match E");
  x = x.contiguous();
  y = y.contiguous();
  g = g.to(x.scalar_type()).contiguous();
  auto gt = g.t().contiguous();
  auto gx = at::zeros_like(x), gy = at::zeros_like(y);
  const int64_t n = x.size(0), m = y.size(0), d = x.size(1);
  if (n == 0 || m == 0 || d == 0) return {gx, gy};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "order_violation_matrix_backward", [&] {
    weighted_relu_impl<scalar_t, false>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                        g.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), n, m, d);
    weighted_relu_impl<scalar_t, true>(y.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                       gt.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), m, n, d);
  });
  gx.mul_(-2);
  gy.mul_(2);
  return {gx, gy};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "E[i, j] = sum_d max(0, y[j, d] - x[i, d])^2");
  m.def("backward", &backward, "(dE/dx, dE/dy) contracted with grad g");
}
