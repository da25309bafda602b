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

// Unaligned load / store of any vector type V of T (memcpy compiles to one vector move).
template <typename V, typename T>
inline V load_as(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename V, typename T>
inline void store_as(T* p, V v) { std::memcpy(p, &v, sizeof(v)); }

template <typename T>
inline typename Vec<T>::type load(const T* p) { return load_as<typename Vec<T>::type>(p); }

template <typename T>
inline void store(T* p, typename Vec<T>::type v) { store_as(p, v); }

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
constexpr int kRows = OV_ROWS;  // R: rows of x per register tile
constexpr int kVecs = OV_VECS;  // C = kVecs * lanes columns of y per register tile

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

// ---- Gradients, one pass for both (Eq. 2 differentiated) ------------------------------------
// With r[i, j, d] = max(0, y[j, d] - x[i, d]) and upstream g (N, M):
//   dE/dx[i] = -2 sum_j g[i, j] r[i, j],     dE/dy[j] = +2 sum_i g[i, j] r[i, j].
// Both sums share r, so one pass spends a subtract, a max and two FMAs per element-pair; a pass
// per gradient would spend a subtract, a max and one FMA each, half as much again in all.
//
// Register tile: R rows of x and their running dE/dx, over one slice of C columns of D, stay in
// registers while j streams through a block of JB rows of y; at each j the R rows' terms are
// summed in registers and added once to dE/dy[j], whose block stays in L1. For that, x, y and
// both sums are packed slice-major, (slices, rows, C): a slice of a row is C contiguous scalars.
//
// Work items are (group of x rows, slice of D); one parallel region hands each thread a run of
// them, which packs its rows of x once and y a chunk of rows at a time (about kBackChunkBytes,
// so the workspace stays small and in cache) into buffers of its own. No two items write the
// same gradient element, and the items depend on the shape only, so the summation order, hence
// the result, does not depend on the number of threads.
#if defined(OV_BACK_BYTES)
constexpr int kBackBytes = OV_BACK_BYTES;
#elif defined(__AVX512F__)
constexpr int kBackBytes = 64;  // zmm: half the instructions for the same work, 32 registers
#else
constexpr int kBackBytes = 32;
#endif

template <typename T>
struct BVec {
  typedef T type __attribute__((vector_size(kBackBytes)));
  static constexpr int lanes = kBackBytes / sizeof(T);
};

// max(v, 0), mapping NaN to 0 as clamp's backward mask (v >= 0) does.
template <typename T>
inline typename BVec<T>::type brelu(typename BVec<T>::type v) {
  const typename BVec<T>::type zero = {};
  return v > zero ? v : zero;
}
#if defined(__AVX512F__) && !defined(OV_BLEND) && !defined(OV_BACK_BYTES)
template <>
inline BVec<float>::type brelu<float>(BVec<float>::type v) { return _mm512_max_ps(v, _mm512_setzero_ps()); }
template <>
inline BVec<double>::type brelu<double>(BVec<double>::type v) { return _mm512_max_pd(v, _mm512_setzero_pd()); }
#elif defined(__AVX__) && !defined(OV_BLEND) && (!defined(OV_BACK_BYTES) || OV_BACK_BYTES == 32)
template <>
inline BVec<float>::type brelu<float>(BVec<float>::type v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
template <>
inline BVec<double>::type brelu<double>(BVec<double>::type v) { return _mm256_max_pd(v, _mm256_setzero_pd()); }
#endif

// One scalar in every lane, meant to compile to one broadcast load: s - 0 is s for every s
// (0 + s is not, for s = -0, and costs an add), and GCC 12 turns a lane-by-lane loop into
// one masked broadcast per lane.
template <typename T>
inline typename BVec<T>::type bsplat(T s) { return s - typename BVec<T>::type{}; }

// acc + w * t as one FMA. Spelled out: left to contraction, GCC may share the product w * t
// between the two sums of a tile and then spend a multiply and two adds instead of two FMAs.
template <typename T>
inline typename BVec<T>::type bfma(typename BVec<T>::type acc, typename BVec<T>::type w,
                                   typename BVec<T>::type t) {
  return acc + w * t;
}
#if defined(__AVX512F__) && !defined(OV_BACK_BYTES)
template <>
inline BVec<float>::type bfma<float>(BVec<float>::type acc, BVec<float>::type w, BVec<float>::type t) {
  return _mm512_fmadd_ps(w, t, acc);
}
template <>
inline BVec<double>::type bfma<double>(BVec<double>::type acc, BVec<double>::type w, BVec<double>::type t) {
  return _mm512_fmadd_pd(w, t, acc);
}
#elif defined(__FMA__) && (!defined(OV_BACK_BYTES) || OV_BACK_BYTES == 32)
template <>
inline BVec<float>::type bfma<float>(BVec<float>::type acc, BVec<float>::type w, BVec<float>::type t) {
  return _mm256_fmadd_ps(w, t, acc);
}
template <>
inline BVec<double>::type bfma<double>(BVec<double>::type acc, BVec<double>::type w, BVec<double>::type t) {
  return _mm256_fmadd_pd(w, t, acc);
}
#endif

template <typename T>
inline typename BVec<T>::type bload(const T* p) { return load_as<typename BVec<T>::type>(p); }

template <typename T>
inline void bstore(T* p, typename BVec<T>::type v) { store_as(p, v); }

#ifndef OV_BACK_ROWS
#define OV_BACK_ROWS 4
#endif
#ifndef OV_BACK_VECS
#define OV_BACK_VECS 2
#endif
#ifndef OV_BACK_JB
#define OV_BACK_JB 128
#endif
#ifndef OV_BACK_IB
#define OV_BACK_IB 64
#endif
#ifndef OV_BACK_CHUNK
#define OV_BACK_CHUNK (2 << 20)
#endif
constexpr int kBackRows = OV_BACK_ROWS;  // R: rows of x per register tile
constexpr int kBackVecs = OV_BACK_VECS;  // C = kBackVecs * lanes columns of D per slice
constexpr int64_t kBackJB = OV_BACK_JB;  // rows of y per block: its slice and dE/dy's in L1
constexpr int64_t kBackIB = OV_BACK_IB;  // rows of x per panel: their slices and dE/dx's in L2
constexpr int64_t kBackChunkBytes = OV_BACK_CHUNK;  // packed y per chunk of rows
constexpr int64_t kBackItems = 32;  // work items wanted; with fewer slices, x rows in groups

template <typename T>
constexpr int back_cols() { return kBackVecs * BVec<T>::lanes; }

// dst (s1 - s0, rows, C) <- slices [s0, s1) of src (rows, d), zero past column d.
template <typename T>
void pack_slices(const T* src, int64_t rows, int64_t d, int64_t s0, int64_t s1, T* dst) {
  constexpr int C = back_cols<T>();
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t c0 = s * C, w = std::min<int64_t>(C, d - c0);
    for (int64_t r = 0; r < rows; ++r) {
      T* out = dst + ((s - s0) * rows + r) * C;
      std::memcpy(out, src + r * d + c0, w * sizeof(T));
      std::fill(out + w, out + C, T(0));
    }
  }
}

// Slices [s0, s1) of dst (rows, d) <- scale * src (s1 - s0, rows, C), dropping the padding.
template <typename T>
void unpack_slices(const T* src, int64_t rows, int64_t d, int64_t s0, int64_t s1, T scale, T* dst) {
  constexpr int C = back_cols<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = s0; s < s1; ++s) {
      const T* in = src + ((s - s0) * rows + r) * C;
      const int64_t c0 = s * C, w = std::min<int64_t>(C, d - c0);
      for (int64_t c = 0; c < w; ++c) dst[r * d + c0 + c] = scale * in[c];
    }
}

// One R x C register tile against rows [0, jn) of a block of y: gx (R, C) += sum_j g[r, j] r_rj
// and gy[j] (C) += sum_r g[r, j] r_rj. xs, gx: R rows of C; ys, gy: jn rows of C; g: R rows of
// stride ldg.
template <typename T, int R>
inline void back_tile(const T* xs, const T* ys, const T* g, int64_t ldg, T* gx, T* gy, int64_t jn) {
  using V = typename BVec<T>::type;
  constexpr int L = BVec<T>::lanes, NV = kBackVecs, C = NV * L;
  V xv[R][NV], ax[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      xv[r][v] = bload(xs + r * C + v * L);
      ax[r][v] = bload(gx + r * C + v * L);
    }
  for (int64_t j = 0; j < jn; ++j) {
    V yv[NV], ay[NV];
    for (int v = 0; v < NV; ++v) {
      yv[v] = bload(ys + j * C + v * L);
      ay[v] = bload(gy + j * C + v * L);
    }
    for (int r = 0; r < R; ++r) {
      const V w = bsplat<T>(g[r * ldg + j]);  // g[i, j] in every lane
      for (int v = 0; v < NV; ++v) {
        const V t = brelu<T>(yv[v] - xv[r][v]);
        ax[r][v] = bfma<T>(ax[r][v], w, t);
        ay[v] = bfma<T>(ay[v], w, t);
      }
    }
    for (int v = 0; v < NV; ++v) bstore(gy + j * C + v * L, ay[v]);
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) bstore(gx + r * C + v * L, ax[r][v]);
}

// The same for `rows` (1 .. R) rows, each row count its own tile size: no padding row ever
// reaches dE/dy.
template <typename T, int R>
void back_tile_rows(int rows, const T* xs, const T* ys, const T* g, int64_t ldg, T* gx, T* gy,
                    int64_t jn) {
  if constexpr (R > 1) {
    if (rows < R) return back_tile_rows<T, R - 1>(rows, xs, ys, g, ldg, gx, gy, jn);
  }
  back_tile<T, R>(xs, ys, g, ldg, gx, gy, jn);
}

// Sums for a chunk of y: gxp (W, nr, C) += sum_j g r over the chunk's rows j, gyp (W, mn, C)
// += sum_i g r over the nr rows of x; xp, yp: the packed rows (W, nr, C), (W, mn, C); g: the
// first row and column of this block of g, row stride ldg. Loops: panels of IB rows of x (their
// slices in L2), blocks of JB rows of y, slices, R-row tiles: an (IB, JB) tile of g serves every
// slice.
template <typename T>
void back_chunk(const T* xp, const T* yp, const T* g, int64_t ldg, T* gxp, T* gyp, int64_t nr,
                int64_t mn, int64_t slices) {
  constexpr int R = kBackRows, C = back_cols<T>();
  for (int64_t ib = 0; ib < nr; ib += kBackIB) {
    const int64_t ie = std::min(nr, ib + kBackIB);
    for (int64_t jb = 0; jb < mn; jb += kBackJB) {
      const int64_t jn = std::min(kBackJB, mn - jb);
      for (int64_t s = 0; s < slices; ++s) {
        const T* ys = yp + (s * mn + jb) * C;
        T* gys = gyp + (s * mn + jb) * C;
        for (int64_t i = ib; i < ie; i += R)
          back_tile_rows<T, R>(static_cast<int>(std::min<int64_t>(R, ie - i)), xp + (s * nr + i) * C,
                               ys, g + i * ldg + jb, ldg, gxp + (s * nr + i) * C, gys, jn);
      }
    }
  }
}

// A run of work items: x rows [i0, i1) against all of y, in slices [s0, s1) of D. Writes those
// slices of gx's rows [i0, i1) and of gy (m, d), this row group's dE/dy: its own elements.
template <typename T>
void back_item(const T* x, const T* y, const T* g, T* gx, T* gy, int64_t m, int64_t d, int64_t i0,
               int64_t i1, int64_t s0, int64_t s1) {
  constexpr int C = back_cols<T>();
  const int64_t nr = i1 - i0, w = s1 - s0;
  const int64_t chunk = std::min(m, std::max(kBackJB, kBackChunkBytes / (w * C * int64_t(sizeof(T)))));
  std::vector<T> xp(w * nr * C), gxp(w * nr * C, T(0)), yp(w * chunk * C), gyp(w * chunk * C);
  pack_slices(x + i0 * d, nr, d, s0, s1, xp.data());
  for (int64_t j0 = 0; j0 < m; j0 += chunk) {
    const int64_t mn = std::min(chunk, m - j0);
    pack_slices(y + j0 * d, mn, d, s0, s1, yp.data());
    std::fill(gyp.begin(), gyp.begin() + w * mn * C, T(0));
    back_chunk(xp.data(), yp.data(), g + i0 * m + j0, m, gxp.data(), gyp.data(), nr, mn, w);
    unpack_slices(gyp.data(), mn, d, s0, s1, T(2), gy + j0 * d);
  }
  unpack_slices(gxp.data(), nr, d, s0, s1, T(-2), gx + i0 * d);
}

// Row groups of x for the gradients: 1 unless D has fewer slices than kBackItems; a function of
// the shape only, and no group is empty.
int64_t back_groups(int64_t n, int64_t slices) {
  const int64_t blocks = (n + kBackRows - 1) / kBackRows;
  const int64_t want = std::max<int64_t>(1, std::min(blocks, (kBackItems + slices - 1) / slices));
  const int64_t per = (blocks + want - 1) / want;  // R-row blocks per group
  return (blocks + per - 1) / per;
}

// gx (n, d) = dE/dx and gy (m, d) = dE/dy, contracted with g (n, m); all contiguous.
template <typename T>
void backward_impl(const T* x, const T* y, const T* g, T* gx, T* gy, int64_t n, int64_t m, int64_t d) {
  constexpr int C = back_cols<T>();
  const int64_t slices = (d + C - 1) / C, groups = back_groups(n, slices);
  const int64_t rows_per = ((n + kBackRows - 1) / kBackRows + groups - 1) / groups * kBackRows;
  std::vector<T> parts(groups > 1 ? groups * m * d : 0);  // each row group's dE/dy
  T* gyp = groups > 1 ? parts.data() : gy;
  // Items in (group, slice) order: a thread's share is a run or two of one group's slices.
  at::parallel_for(0, groups * slices, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1;) {
      const int64_t q = w / slices, s0 = w % slices, s1 = std::min(slices, s0 + (w1 - w));
      const int64_t i0 = q * rows_per, i1 = std::min(n, i0 + rows_per);
      back_item(x, y, g, gx, gyp + q * m * d, m, d, i0, i1, s0, s1);
      w += s1 - s0;
    }
  });
  if (groups == 1) return;
  at::parallel_for(0, m * d, 4096, [&](int64_t k0, int64_t k1) {  // the groups in a fixed order
    for (int64_t k = k0; k < k1; ++k) {
      T sum = parts[k];
      for (int64_t q = 1; q < groups; ++q) sum += parts[q * m * d + k];
      gy[k] = sum;
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
  auto gx = at::empty_like(x), gy = at::empty_like(y);
  const int64_t n = x.size(0), m = y.size(0), d = x.size(1);
  if (n == 0 || m == 0 || d == 0) return {gx.zero_(), gy.zero_()};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "order_violation_matrix_backward", [&] {
    backward_impl<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                            gx.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), n, m, d);
  });
  return {gx, gy};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "E[i, j] = sum_d max(0, y[j, d] - x[i, d])^2");
  m.def("backward", &backward, "(dE/dx, dE/dy) contracted with grad g");
}
