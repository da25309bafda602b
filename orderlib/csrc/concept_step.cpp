// One training step of a Table 1 table model, fused: what orderlib/concepts/step.py's RowStep
// does with autograd and RowAdam (orderlib/concepts/row_adam.py), in one call and one pass over the touched rows.
//   1. the batch's distinct concepts (first-seen order, via a scratch marker over all concepts);
//   2. their rows and Adam moments gathered and, under the catch-up rule, advanced through the
//      zero-gradient steps dense Adam took since they were last touched (RowAdam._apply_skipped);
//   3. energies of the B true pairs and K * B negatives (K blocks of B aligned with the true pairs):
//        order_violation  E = ||max(0, x_v - x_u)||^2                  (Eq. 2 of Vendrov et al.)
//        cosine           E = 1 - cos(x_u, x_v)                         (Table 1's symmetric row)
//        density_order    E = max(0, KL(N_u || N_v) - gamma), means used at unit norm (optional),
//                         variances exp(log_var)               (Athiwaratkun & Wilson, ICLR 2018)
//        box              E = log vol(u) - log vol(u meet v), hard meet, softplus volumes of
//                         temperature t, sigmoid boxes lo = s(a), hi = lo + s(b)(1 - lo)
//                                                  (Vilnis et al., ACL 2018; Li et al., ICLR 2019)
//        gumbel_box       the same with the Gumbel meet (logsumexp corners of temperature beta)
//                         and volumes offset by 2 gamma_E beta     (Dasgupta et al., NeurIPS 2020)
//        bilinear         E = -(x_u^T W x_v + b), W (D, D) and b dense  (Socher et al., NIPS 2013)
//        poincare         E = d(u, v) = 2 artanh |(-x_u) (+) x_v| in the unit Poincare ball, geoopt's form
//                                                               (Nickel & Kiela, NeurIPS 2017, Eq. 1)
//        cones            E = max(0, Xi(x_v, x_u) - psi(x_v)), aperture K    (Ganea et al., ICML 2018)
//   4. the loss over them, max_margin (Eq. 4: mean E(pos) + mean max(0, m - E(neg))), ranking_hinge
//      (mean max(0, m + E(pos) - E(neg))), binary_cross_entropy (mean E(pos) - mean log(1 - e^-E(neg)),
//      E(neg) floored at 1e-6) or logistic_ranking (mean softplus(E(pos) - E(neg))), and its gradient,
//      written by hand;
//   5. Adam's step on the touched rows (Kingma & Ba), the model's constraint, and the write-back.
//      Dense parameters (bilinear's W and b) get their gradient only, written to the caller's
//      tensors: the caller steps them with torch.optim.Adam, as the PyTorch path does. Tables of
//      Poincare-ball points take geoopt's RiemannianAdam step instead (RowAdam._riemannian_step:
//      Riemannian gradient, metric second moment, retraction, transported first moment; no catch-up)
//      and a row-norm constraint.
// Same formulas and dtypes as the PyTorch path; sums run in another order, so results agree within
// float rounding, not bit for bit. Single-threaded (Table 1 runs one process per core), except that
// bilinear's three matrix products use torch's intra-op threads (one in Table 1's workers).
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

// glibc's vector maths (libmvec): declared SIMD-callable so that the box energies' exp / log / log1p
// loops vectorise (glibc declares these only under -ffast-math). x86-64 with glibc >= 2.35 only (the
// first with log1pf); elsewhere the loops call the scalar functions. The vector variants are within a
// few ulp of the scalar ones, so boxes train to float rounding of the scalar build, not bit for bit.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
float log1pf(float);
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
double log1p(double);
}
#endif

namespace {

constexpr double kTiny = 1e-30;  // the second moment's floor (optim._TINY)
enum Energy : int64_t {
  kOrderViolation = 0, kCosine = 1, kDensityOrder = 2, kBox = 3, kGumbelBox = 4, kBilinear = 5, kPoincare = 6, kCones = 7
};
enum Loss : int64_t { kMaxMargin = 0, kRankingHinge = 1, kBinaryCrossEntropy = 2, kLogisticRanking = 3 };
constexpr double kEulerGamma = 0.5772156649015329;

struct Adam {
  double lr, b1, b2, eps;
  int64_t window, exact_until;
  bool catch_up;
};

// f(s, k) of the catch-up rule in double (RowAdam._skipped_factor):
//   sum_{j=1..min(k, W)} r^j g(s + j),  r = b1 / sqrt(b2),  g(tau) = sqrt(1 - b2^tau) / (1 - b1^tau),
// exact while s < exact_until, else the closed form a(s) r (1 - r^min(k, W)) / (1 - r) with the bias
// corrections flat. g is tabulated once up to exact_until + W, and within one step f depends on k
// alone for k <= W (s = t - k), so each such k is computed once per step.
class SkippedFactor {
 public:
  SkippedFactor(const Adam& a, int64_t t)
      : a_(a), t_(t), r_(a.b1 / std::sqrt(a.b2)), by_k_(a.window + 1, -1.0), g_(tabulate(a)) {}

  double operator()(int64_t k) {
    if (k <= a_.window) {
      double& f = by_k_[k];
      if (f < 0) f = compute(t_ - k, k);
      return f;
    }
    return compute(t_ - k, k);
  }

 private:
  double compute(int64_t s, int64_t k) const {
    const int64_t kk = std::min(k, a_.window);
    if (s >= a_.exact_until) {
      const double c = std::sqrt(1.0 - std::exp((s + 1) * std::log(a_.b2))) /
                       (1.0 - std::exp((s + 1) * std::log(a_.b1)));
      return c * r_ * (1.0 - std::exp(kk * std::log(r_))) / (1.0 - r_);
    }
    double out = 0.0;
    for (int64_t j = 1; j <= kk; ++j) out += g_.rpow[j] * g_.g[s + j];
    return out;
  }

  struct Tabulated {
    double b1, b2;
    int64_t window, exact_until;
    std::vector<double> g, rpow;
  };

  // g(tau) for tau < exact_until + W and r^j for j <= W, kept for the last settings seen (one per thread).
  static const Tabulated& tabulate(const Adam& a) {
    thread_local Tabulated cache{0.0, 0.0, -1, -1, {}, {}};
    if (cache.b1 != a.b1 || cache.b2 != a.b2 || cache.window != a.window || cache.exact_until != a.exact_until) {
      const int64_t n = a.exact_until + a.window + 1;
      cache = Tabulated{a.b1, a.b2, a.window, a.exact_until, std::vector<double>(n, 0.0),
                        std::vector<double>(a.window + 1, 0.0)};
      for (int64_t tau = 1; tau < n; ++tau)
        cache.g[tau] = std::sqrt(1.0 - std::exp(tau * std::log(a.b2))) / (1.0 - std::exp(tau * std::log(a.b1)));
      for (int64_t j = 0; j <= a.window; ++j) cache.rpow[j] = std::pow(a.b1, double(j)) / std::pow(a.b2, j / 2.0);
    }
    return cache;
  }

  Adam a_;
  int64_t t_;
  double r_;
  std::vector<double> by_k_;
  const Tabulated& g_;
};

// A table's constraint on its rows: clamp each coordinate into [lo, hi] (infinite: no bound).
template <typename T>
struct Bounds {
  T lo, hi;
  bool active() const { return std::isfinite(double(lo)) || std::isfinite(double(hi)); }
  void apply(T* x, int64_t dim) const {
    if (!active()) return;
    for (int64_t d = 0; d < dim; ++d) x[d] = std::min(hi, std::max(lo, x[d]));
  }
};

template <typename T>
struct Table {
  T* values;   // (N, D)
  T* moments;  // (N, 2, D)
  Bounds<T> bounds;
  bool ball = false;             // rows are points of the unit Poincare ball: Riemannian Adam
  T norm_lo = 0, norm_hi = 0;    // row norms clamped into [lo, hi] where hi is finite (see clamp_norm)
  std::vector<T> cur, mv, grad;  // gathered (R, D), (R, 2, D), gradient (R, D)
  std::vector<T> ball_scratch;   // (2, D): the retracted point and the transported moment
};

template <typename T>
T dot(const T* x, const T* y, int64_t dim) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < dim; ++d) s += x[d] * y[d];
  return s;
}

// geoopt's PoincareBall.projx: rows beyond 1 - eps scaled back to it (eps 4e-3 in float32, 1e-5
// in float64, as geoopt's project).
template <typename T>
constexpr T ball_max_norm() {
  return sizeof(T) == 4 ? T(1 - 4e-3) : T(1 - 1e-5);
}

template <typename T>
void project_ball(T* x, int64_t dim) {
  const T n = std::max(std::sqrt(dot(x, x, dim)), T(1e-15));
  const T hi = ball_max_norm<T>();
  if (n > hi) {
    for (int64_t d = 0; d < dim; ++d) x[d] = x[d] / n * hi;
  }
}

// A table's row-norm constraint: norms clamped into [lo, hi] where hi is finite (the cones'
// annulus); otherwise a ball's rows get geoopt's projection onto the ball, other rows nothing.
template <typename T>
void clamp_norm(const Table<T>& tb, T* x, int64_t dim) {
  if (!std::isfinite(double(tb.norm_hi))) {
    if (tb.ball) project_ball(x, dim);
    return;
  }
  const T n = std::max(std::sqrt(dot(x, x, dim)), T(1e-12));
  const T f = std::min(std::max(n, tb.norm_lo), tb.norm_hi) / n;
  for (int64_t d = 0; d < dim; ++d) x[d] *= f;
}

void prefetch(const void* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(static_cast<const char*>(p) + off);
}

// The catch-up of a row idle for k steps (RowAdam._apply_skipped): the momentum's move and the
// moments' decay, shared by `gather` (touched rows) and `flush_rows` (every row).
template <typename T>
struct CatchUp {
  T step = 0, d1 = 1, d2 = 1;  // default: no skipped steps
  CatchUp() = default;
  CatchUp(SkippedFactor& factor, int64_t k, const Adam& a)
      : step(T(a.lr) * T(factor(k))),
        // as the reference: b^k from an int64 k times a Python float, i.e. in float32
        d1(T(std::exp(float(k) * float(std::log(a.b1))))),
        d2(T(std::exp(float(k) * float(std::log(a.b2))))) {}

  // x, m (and v = m + dim) advanced into xo, mo (vo = mo + dim); in place where xo = x and mo = m.
  void apply(const T* x, const T* m, T* xo, T* mo, int64_t dim) const {
    const T tiny = T(kTiny);
    const T* v = m + dim;
    T* vo = mo + dim;
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) {
      xo[d] = x[d] - step * m[d] / std::sqrt(std::max(v[d], tiny));
      mo[d] = m[d] * d1;
      vo[d] = std::max(v[d] * d2, tiny);
    }
  }
};

// Gather `rows` of every table into cur / mv, advanced by the catch-up rule to step t.
template <typename T>
void gather(std::vector<Table<T>>& tables, const int64_t* last, const std::vector<int64_t>& rows, int64_t dim,
            int64_t t, const Adam& a) {
  const int64_t n_rows = int64_t(rows.size());
  for (auto& tb : tables) {
    tb.cur.resize(n_rows * dim);
    tb.mv.resize(n_rows * 2 * dim);
    tb.grad.assign(n_rows * dim, T(0));
  }
  SkippedFactor factor(a, t);
  constexpr int64_t kAhead = 16;  // rows: the tables dwarf the caches, so the gather waits on memory
  for (int64_t i = 0; i < n_rows; ++i) {
    if (i + 2 * kAhead < n_rows) __builtin_prefetch(last + rows[i + 2 * kAhead]);
    if (i + kAhead < n_rows) {
      const int64_t ahead = rows[i + kAhead];
      for (const auto& tb : tables) {
        prefetch(tb.values + ahead * dim, dim * int64_t(sizeof(T)));
        prefetch(tb.moments + ahead * 2 * dim, 2 * dim * int64_t(sizeof(T)));
      }
    }
    const int64_t row = rows[i];
    const int64_t k = t - last[row];
    const bool idle = a.catch_up && t > 0 && k > 0;
    const CatchUp<T> cu = idle ? CatchUp<T>(factor, k, a) : CatchUp<T>();
    for (auto& tb : tables) {
      const T* x = tb.values + row * dim;
      const T* m = tb.moments + row * 2 * dim;
      T* xo = tb.cur.data() + i * dim;
      T* mo = tb.mv.data() + i * 2 * dim;
      if (!idle || tb.ball) {  // ball rows: SparseAdam's rule, no catch-up (as RowAdam)
        std::copy(x, x + dim, xo);
        std::copy(m, m + 2 * dim, mo);
        continue;
      }
      cu.apply(x, m, xo, mo, dim);
      tb.bounds.apply(xo, dim);
    }
  }
}

// The conformal factor lambda_x = 2 / (1 - |x|^2) of the unit ball (geoopt's _lambda_x, k = -1).
template <typename T>
T conformal(T x2) {
  return T(2) / std::max(T(1) - x2, T(1e-15));
}

// geoopt's RiemannianAdam on one ball point x with moments m, v (RowAdam._riemannian_step):
// rg = g / lambda_x^2; m <- b1 m + (1 - b1) rg; v <- b2 v + (1 - b2) lambda_x^2 |rg|^2 (every entry);
// y = proj(x - lr (m / c1) / (sqrt(v / c2) + eps)); m <- gyr[y, -x] m lambda_x / lambda_y; x <- y.
template <typename T>
void riemannian_adam(T* x, T* m, T* v, const T* g, int64_t dim, T b1, T b2, T a1, T a2, T c1, T c2, T eps, T lr,
                     std::vector<T>& scratch) {
  scratch.resize(2 * dim);
  T* y = scratch.data();
  T* mt = y + dim;
  const T x2 = dot(x, x, dim);
  const T lam = conformal(x2);
  const T inv_lam2 = T(1) / (lam * lam);
  T rg2 = 0;
#pragma omp simd reduction(+ : rg2)
  for (int64_t d = 0; d < dim; ++d) {
    const T rg = g[d] * inv_lam2;
    m[d] = m[d] * b1 + a1 * rg;
    rg2 += rg * rg;
  }
  const T inner = lam * lam * rg2;
#pragma omp simd
  for (int64_t d = 0; d < dim; ++d) {
    v[d] = std::max(v[d] * b2 + a2 * inner, T(kTiny));
    y[d] = x[d] - lr * ((m[d] / c1) / (std::sqrt(v[d] / c2) + eps));
  }
  project_ball(y, dim);
  // gyr[u, w] m with u = y, w = -x (geoopt's _gyration, k = -1), times lambda_x / lambda_y
  const T u2 = dot(y, y, dim), w2 = x2, uw = -dot(y, x, dim), um = dot(y, m, dim), wm = -dot(x, m, dim);
  const T ca = -um * w2 + wm + T(2) * uw * wm;
  const T cb = -wm * u2 - um;
  const T den = std::max(T(1) + T(2) * uw + u2 * w2, T(1e-15));
  const T scale = lam / conformal(u2);
#pragma omp simd
  for (int64_t d = 0; d < dim; ++d) mt[d] = (m[d] + T(2) * (ca * y[d] - cb * x[d]) / den) * scale;
  std::copy(y, y + dim, x);
  std::copy(mt, mt + dim, m);
}

// Adam's step t on the gathered rows, the constraint, and the write-back; last[rows] = t.
template <typename T>
void adam_write(std::vector<Table<T>>& tables, int64_t* last, const std::vector<int64_t>& rows, int64_t dim,
                int64_t t, const Adam& a) {
  const T b1 = T(a.b1), b2 = T(a.b2), a1 = T(1 - a.b1), a2 = T(1 - a.b2), tiny = T(kTiny);
  const T c1 = T(1 - std::pow(a.b1, double(t))), c2 = T(1 - std::pow(a.b2, double(t)));
  const T eps = T(a.eps), lr = T(a.lr);
  const int64_t n_rows = int64_t(rows.size());
  for (auto& tb : tables) {
    for (int64_t i = 0; i < n_rows; ++i) {
      T* x = tb.cur.data() + i * dim;
      T* m = tb.mv.data() + i * 2 * dim;
      T* v = m + dim;
      const T* g = tb.grad.data() + i * dim;
      if (tb.ball) {
        riemannian_adam(x, m, v, g, dim, b1, b2, a1, a2, c1, c2, eps, lr, tb.ball_scratch);
      } else {
#pragma omp simd
        for (int64_t d = 0; d < dim; ++d) {
          m[d] = m[d] * b1 + a1 * g[d];
          v[d] = std::max(v[d] * b2 + a2 * g[d] * g[d], tiny);
          x[d] -= lr * ((m[d] / c1) / (std::sqrt(v[d] / c2) + eps));
        }
      }
      tb.bounds.apply(x, dim);
      clamp_norm(tb, x, dim);
      std::copy(x, x + dim, tb.values + rows[i] * dim);
      std::copy(m, m + 2 * dim, tb.moments + rows[i] * 2 * dim);
    }
  }
  for (int64_t row : rows) last[row] = t;
}

// Gradients of a pair energy as combinations of its two rows: dE/dx = xx x + xy y, dE/dy = yx x + yy y.
template <typename T>
struct PairGrad {
  T xx = 0, xy = 0, yx = 0, yy = 0;
};

// Bilinear's dense parameters: W (D, D), b, and where their gradients go (written by bilinear_grads).
template <typename T>
struct Dense {
  const T* w = nullptr;
  T bias = 0;
  T* gw = nullptr;
  T* gbias = nullptr;
};

// Per-row quantities the energies share: unit vectors and norms (cosine; density order's means),
// variances (density order).
template <typename T>
struct RowCache {
  std::vector<T> unit, norm, var;
  std::vector<T> lo, hi, sb, g_lo, g_hi;  // boxes: corners, s(side logit), gradients w.r.t. the corners
  std::vector<T> vol, dvol, pair_f;       // boxes: log volumes, their slopes, per-pair meet factors
  std::vector<T> xu, xv, z, wv;           // bilinear, per pair (P, D): x_u, x_v, x_u^T W, x_v^T W^T
  Dense<T> dense;                         // bilinear: W (D, D) row-major, b, and their gradients
  std::vector<PairGrad<T>> pair_g;        // hyperbolic: each pair's gradient coefficients
};

// Unit rows x / max(||x||, floor) and the clamped norms.
template <typename T>
void normalise(const std::vector<T>& x, int64_t n_rows, int64_t dim, T floor, std::vector<T>& unit,
               std::vector<T>& norm) {
  unit.resize(n_rows * dim);
  norm.resize(n_rows);
  for (int64_t i = 0; i < n_rows; ++i) {
    const T* r = x.data() + i * dim;
    T s = 0;
    for (int64_t d = 0; d < dim; ++d) s += r[d] * r[d];
    const T n = std::max(std::sqrt(s), floor);
    norm[i] = n;
    for (int64_t d = 0; d < dim; ++d) unit[i * dim + d] = r[d] / n;
  }
}

// Map gradients with respect to unit rows (in g) to gradients with respect to the rows, in place:
// g <- (g - u (u . g)) / n, or g / n where the norm was clamped (the clamp passes no gradient).
template <typename T>
void unnormalise_grad(std::vector<T>& g, const std::vector<T>& x, const RowCache<T>& c, int64_t n_rows,
                      int64_t dim, T floor) {
  for (int64_t i = 0; i < n_rows; ++i) {
    T* gi = g.data() + i * dim;
    const T* u = c.unit.data() + i * dim;
    const T n = c.norm[i];
    T raw = 0;
    for (int64_t d = 0; d < dim; ++d) raw += x[i * dim + d] * x[i * dim + d];
    if (std::sqrt(raw) > floor) {
      T dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += u[d] * gi[d];
      for (int64_t d = 0; d < dim; ++d) gi[d] = (gi[d] - u[d] * dot) / n;
    } else {
      for (int64_t d = 0; d < dim; ++d) gi[d] /= n;
    }
  }
}

struct EnergyArgs {
  int64_t kind;
  double gamma = 0.0;        // density order: threshold
  bool normalize = false;    // density order: means at unit norm
  double eps = 1e-8;         // cosine: norm floor
  double temperature = 1.0;  // boxes: volume temperature
  double beta = 0.01;        // Gumbel boxes: meet temperature
  double offset = 0.0;       // Gumbel boxes: 2 gamma_E beta subtracted from each side
  double K = 0.1;            // cones: aperture constant
};

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
void prepare_cache(const std::vector<Table<T>>& tables, const EnergyArgs& e, int64_t n_rows, int64_t dim,
                   RowCache<T>& c) {
  if (e.kind == kCosine) normalise(tables[0].cur, n_rows, dim, T(e.eps), c.unit, c.norm);
  if (e.kind == kDensityOrder) {
    if (e.normalize) normalise(tables[0].cur, n_rows, dim, T(1e-12), c.unit, c.norm);
    c.var.resize(n_rows * dim);
    const T* lv = tables[1].cur.data();
#pragma omp simd
    for (int64_t j = 0; j < n_rows * dim; ++j) c.var[j] = std::exp(lv[j]);
  }
  if (e.kind == kBox || e.kind == kGumbelBox) {
    const int64_t n = n_rows * dim;
    c.lo.resize(n);
    c.hi.resize(n);
    c.sb.resize(n);
    c.g_lo.assign(n, T(0));
    c.g_hi.assign(n, T(0));
    const T* a = tables[0].cur.data();
    const T* b = tables[1].cur.data();
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      c.lo[j] = sigmoid(a[j]);
      c.sb[j] = sigmoid(b[j]);
      c.hi[j] = c.lo[j] + c.sb[j] * (T(1) - c.lo[j]);
    }
    box_row_volumes(c, e, n_rows, dim);
  }
}

// log(softplus(x)) and its derivative together (see log_softplus): every branch computed and one
// selected, so that loops over dimensions vectorise. Below -15: x (the reference's clamp, no gradient
// at -15 itself); above 20: softplus(x) = x (torch's threshold).
template <typename T>
inline void log_softplus_d(T x, T& value, T& slope) {
  const T ex = std::exp(std::min(std::max(x, T(-15)), T(20)));
  const T sp = std::log1p(ex);
  const T big = std::log(std::max(x, T(20)));
  const T mid = std::log(sp);
  value = x < T(-15) ? x : (x > T(20) ? big : mid);
  const T s_mid = x == T(-15) ? T(0) : ex / (T(1) + ex) / sp;
  slope = x < T(-15) ? T(1) : (x > T(20) ? T(1) / std::max(x, T(20)) : s_mid);
}

// One corner of the Gumbel meet, beta * logaddexp(x / beta, y / beta) with sign +1 (min corners) or
// sign * beta * logaddexp(sign * x / beta, sign * y / beta) with sign -1 (max corners), and its
// derivative w.r.t. x (y's is 1 minus it): one exp and one log1p, branch-free.
template <typename T>
inline void gumbel_corner(T x, T y, T beta, T sign, T& corner, T& dx) {
  const T a = sign * x / beta, b = sign * y / beta;
  const T q = std::exp(-std::abs(a - b));
  corner = sign * beta * (std::max(a, b) + std::log1p(q));
  const T r = T(1) / (T(1) + q);
  dx = a > b ? r : (a < b ? q * r : T(0.5));
}

// Per row: each box's log volume (the energy's first term) and d(log vol)/d(hi) per side.
template <typename T>
void box_row_volumes(RowCache<T>& c, const EnergyArgs& e, int64_t n_rows, int64_t dim) {
  const T t = T(e.temperature), off = T(e.offset), log_t = std::log(t);
  c.vol.resize(n_rows);
  c.dvol.resize(n_rows * dim);
  for (int64_t i = 0; i < n_rows; ++i) {
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t d = 0; d < dim; ++d) {
      const int64_t j = i * dim + d;
      T value, slope;
      log_softplus_d((c.hi[j] - c.lo[j] - off) / t, value, slope);
      sum += value + log_t;
      c.dvol[j] = slope / t;
    }
    c.vol[i] = sum;
  }
}

// E(u, v) = log vol(u) - log vol(u meet v) of pair p; keeps, per dimension, d(log vol(meet))/d(its hi)
// and the meet corners' derivatives w.r.t. u's corners, for the gradient pass.
template <typename T>
T box_energy(RowCache<T>& c, const EnergyArgs& e, int64_t p, int64_t u, int64_t v, int64_t dim) {
  const T t = T(e.temperature), off = T(e.offset), log_t = std::log(t), beta = T(e.beta);
  T* f = c.pair_f.data() + p * 3 * dim;  // (3, D): slope of the meet's volume, dlo_u, dhi_u
  const T* lo_u_ = c.lo.data() + u * dim;
  const T* hi_u_ = c.hi.data() + u * dim;
  const T* lo_v_ = c.lo.data() + v * dim;
  const T* hi_v_ = c.hi.data() + v * dim;
  const bool gumbel = e.kind == kGumbelBox;
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < dim; ++d) {
    const T lo_u = lo_u_[d], hi_u = hi_u_[d], lo_v = lo_v_[d], hi_v = hi_v_[d];
    T lo, hi, dlo, dhi;
    if (!gumbel) {  // torch.maximum / minimum: the larger (smaller) side's gradient, half each at a tie
      lo = std::max(lo_u, lo_v);
      hi = std::min(hi_u, hi_v);
      dlo = lo_u > lo_v ? T(1) : (lo_u < lo_v ? T(0) : T(0.5));
      dhi = hi_u < hi_v ? T(1) : (hi_u > hi_v ? T(0) : T(0.5));
    } else {
      gumbel_corner(lo_u, lo_v, beta, T(1), lo, dlo);
      gumbel_corner(hi_u, hi_v, beta, T(-1), hi, dhi);
    }
    T value, slope;
    log_softplus_d((hi - lo - off) / t, value, slope);
    s += value + log_t;
    f[d] = slope / t;
    f[dim + d] = dlo;
    f[2 * dim + d] = dhi;
  }
  return c.vol[u] - s;
}

template <typename T>
void box_energy_grad(RowCache<T>& c, int64_t p, int64_t u, int64_t v, int64_t dim, T w) {
  const T* f = c.pair_f.data() + p * 3 * dim;
  for (int64_t d = 0; d < dim; ++d) {  // scalar: u == v is allowed here
    const int64_t iu = u * dim + d, iv = v * dim + d;
    const T ga = w * c.dvol[iu];  // through log vol(u)
    const T gb = w * f[d];        // through log vol(u meet v)
    const T dlo = f[dim + d], dhi = f[2 * dim + d];
    c.g_hi[iu] += ga - gb * dhi;
    c.g_lo[iu] += -ga + gb * dlo;
    c.g_hi[iv] += -gb * (T(1) - dhi);
    c.g_lo[iv] += gb * (T(1) - dlo);
  }
}

// Gradients w.r.t. the corners -> gradients w.r.t. the logits: lo = s(a), hi = lo + s(b)(1 - lo).
template <typename T>
void box_logit_grads(std::vector<Table<T>>& tables, const RowCache<T>& c, int64_t n) {
  T* ga = tables[0].grad.data();
  T* gb = tables[1].grad.data();
  for (int64_t j = 0; j < n; ++j) {
    const T dlo = c.lo[j] * (T(1) - c.lo[j]);
    ga[j] = (c.g_lo[j] + c.g_hi[j] * (T(1) - c.sb[j])) * dlo;
    gb[j] = c.g_hi[j] * c.sb[j] * (T(1) - c.sb[j]) * (T(1) - c.lo[j]);
  }
}

// d(x, y) = 2 artanh |(-x) (+) y| as geoopt computes it (Mobius addition, k = -1; artanh's argument
// clamped to 1 - 1e-7, its gradient zero beyond), and its gradient. With a = 1 - 2<x,y> + |y|^2,
// c = 1 - |x|^2 and den = 1 - 2<x,y> + |x|^2 |y|^2: (-x) (+) y = (c y - a x) / den.
template <typename T>
T poincare_distance(const T* x, const T* y, int64_t dim, PairGrad<T>* g) {
  const T x2 = dot(x, x, dim), y2 = dot(y, y, dim), xy = dot(x, y, dim);
  const T a = T(1) - T(2) * xy + y2, c = T(1) - x2;
  const T den_raw = T(1) - T(2) * xy + x2 * y2;
  const T den = std::max(den_raw, T(1e-15));
  T num2 = 0, num_x = 0, num_y = 0;  // |num|^2, num . x, num . y, num = c y - a x taken explicitly
#pragma omp simd reduction(+ : num2, num_x, num_y)
  for (int64_t d = 0; d < dim; ++d) {  // (near x = y the expanded |num|^2 would cancel)
    const T nd = c * y[d] - a * x[d];
    num2 += nd * nd;
    num_x += nd * x[d];
    num_y += nd * y[d];
  }
  const T r = std::sqrt(num2) / den;
  const T lim = T(1) - T(1e-7);
  const T rc = std::min(std::max(r, -lim), lim);
  const T dist = T(2) * (T(0.5) * (std::log1p(rc) - std::log1p(-rc)));
  if (g) {
    *g = PairGrad<T>{};
    if (r > T(0) && r <= lim) {
      const T dr = T(2) / ((T(1) + rc) * (T(1) - rc));  // dd/dr
      const T gn = dr / (r * den * den);                 // dd/d(num) = gn * num
      const T gd = den_raw >= T(1e-15) ? -dr * r / den : T(0);  // dd/d(den)
      const T nx = gn * num_x, ny = gn * num_y;
      // through num = c y - a x (da/dx = -2y, dc/dx = -2x, da/dy = 2y - 2x) and den (d/dx = 2|y|^2 x - 2y)
      g->xx = a * a * gn - T(2) * ny + gd * T(2) * y2;
      g->xy = -a * c * gn + T(2) * nx - gd * T(2);
      g->yx = -a * c * gn + T(2) * nx - gd * T(2);
      g->yy = c * c * gn - T(2) * nx + gd * T(2) * x2;
    }
  }
  return dist;
}

// Xi(x, y) - psi(x) for the general x and specific y (Ganea et al., ICML 2018; orderlib.penalties
// cone_angle and cone_aperture, their clamps included) and its gradient where `g` is given.
template <typename T>
T cone_excess(const T* x, const T* y, int64_t dim, T K, PairGrad<T>* g) {
  const T xy = dot(x, y, dim), nx2 = dot(x, x, dim), ny2 = dot(y, y, dim);
  T b2 = 0;  // |x - y|^2
#pragma omp simd reduction(+ : b2)
  for (int64_t d = 0; d < dim; ++d) b2 += (x[d] - y[d]) * (x[d] - y[d]);
  const T num = xy * (T(1) + nx2) - nx2 * (T(1) + ny2);
  const T A = std::sqrt(nx2), B = std::sqrt(b2);
  const T q = T(1) + nx2 * ny2 - T(2) * xy;
  const T C = std::sqrt(std::max(q, T(0)));
  const T den = A * B * C;
  const bool defined = den > T(1e-12);
  const T cos_raw = defined ? num / std::max(den, T(1e-12)) : T(1);
  const T ceps = T(1e-6);
  const T cos = std::min(std::max(cos_raw, T(-1) + ceps), T(1) - ceps);
  const T angle = std::acos(cos);
  const T n = A;  // |x|
  const T s_raw = K * (T(1) - n * n) / n;
  const T s = std::min(s_raw, T(1) - ceps);
  const T psi = std::asin(s);
  if (g) {
    *g = PairGrad<T>{};
    if (defined && cos_raw >= T(-1) + ceps && cos_raw <= T(1) - ceps && B > T(0) && q > T(0)) {
      const T da = -T(1) / std::sqrt(T(1) - cos * cos);  // d angle / d cos
      const T w = da / den;                              // d angle / d(num) ...
      const T wd = -da * cos_raw / den;                  // ... and / d(den)
      // num: d/dx = (1 + |x|^2) y + (2<x,y> - 2(1 + |y|^2)) x, d/dy = (1 + |x|^2) x - 2|x|^2 y
      // den = A B C: d/dx = (B C / A + A C / B + A B |y|^2 / C) x - (A C / B + A B / C) y,
      //              d/dy = -(A C / B + A B / C) x + (A C / B + A B |x|^2 / C) y
      g->xx = w * (T(2) * xy - T(2) * (T(1) + ny2)) + wd * (B * C / A + A * C / B + A * B * ny2 / C);
      g->xy = w * (T(1) + nx2) - wd * (A * C / B + A * B / C);
      g->yx = w * (T(1) + nx2) - wd * (A * C / B + A * B / C);
      g->yy = w * (-T(2) * nx2) + wd * (A * C / B + A * B * nx2 / C);
    }
    if (s_raw <= T(1) - ceps) {  // psi: d/dx = dpsi/ds ds/dn x / n, ds/dn = -K (1 + n^2) / n^2
      const T dpsi = T(1) / std::sqrt(T(1) - s * s) * (-K * (T(1) + n * n) / (n * n)) / n;
      g->xx -= dpsi;
    }
  }
  return angle - psi;
}

// E(u, v) for local row indices u (specific) and v (general); density order: also KL - gamma in *pre.
template <typename T>
T energy(const std::vector<Table<T>>& tables, RowCache<T>& c, const EnergyArgs& e, int64_t p, int64_t u, int64_t v,
         int64_t dim, T* pre) {
  if (e.kind == kOrderViolation) {
    const T* x = tables[0].cur.data() + u * dim;
    const T* y = tables[0].cur.data() + v * dim;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < dim; ++d) {
      const T r = std::max(y[d] - x[d], T(0));
      s += r * r;
    }
    return s;
  }
  if (e.kind == kCosine) {
    const T* x = c.unit.data() + u * dim;
    const T* y = c.unit.data() + v * dim;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < dim; ++d) s += x[d] * y[d];
    return T(1) - s;
  }
  if (e.kind == kBox || e.kind == kGumbelBox) return box_energy(c, e, p, u, v, dim);
  // hyperbolic: the gradient's coefficients come with the energy (same dot products), kept per pair
  if (e.kind == kPoincare)  // x = x_u, y = x_v
    return poincare_distance(tables[0].cur.data() + u * dim, tables[0].cur.data() + v * dim, dim, &c.pair_g[p]);
  if (e.kind == kCones) {  // max(0, Xi(x_v, x_u) - psi(x_v)); *pre keeps the excess for the clamp's gradient
    PairGrad<T>& g = c.pair_g[p];
    *pre = cone_excess(tables[0].cur.data() + v * dim, tables[0].cur.data() + u * dim, dim, T(e.K), &g);
    std::swap(g.xx, g.yy), std::swap(g.xy, g.yx);  // x = x_v (general), y = x_u -> x = x_u, y = x_v
    return std::max(*pre, T(0));
  }
  if (e.kind == kBilinear) {  // E = -(z . x_v + b), z = x_u^T W from bilinear_products
    const T* z = c.z.data() + p * dim;
    const T* y = tables[0].cur.data() + v * dim;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < dim; ++d) s += z[d] * y[d];
    return -(s + c.dense.bias);
  }
  const T* mu_u = (e.normalize ? c.unit.data() : tables[0].cur.data()) + u * dim;
  const T* mu_v = (e.normalize ? c.unit.data() : tables[0].cur.data()) + v * dim;
  const T* var_u = c.var.data() + u * dim;
  const T* var_v = c.var.data() + v * dim;
  const T* lv_u = tables[1].cur.data() + u * dim;  // log(exp(lv)) in the reference: lv to rounding
  const T* lv_v = tables[1].cur.data() + v * dim;
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < dim; ++d) {
    const T diff = mu_v[d] - mu_u[d];
    s += var_u[d] / var_v[d] + diff * diff / var_v[d] - T(1) + lv_v[d] - lv_u[d];
  }
  *pre = T(0.5) * s - T(e.gamma);
  return std::max(*pre, T(0));
}

// Add w * dE(u, v) to the gradient blocks (density order: d/d(unit means) and d/d(log_var);
// cosine: d/d(unit rows); both mapped through the normalisation afterwards).
template <typename T>
void energy_grad(std::vector<Table<T>>& tables, RowCache<T>& c, const EnergyArgs& e, int64_t p, int64_t u, int64_t v,
                 int64_t dim, T w, T pre) {
  if (e.kind == kBox || e.kind == kGumbelBox) {
    box_energy_grad(c, p, u, v, dim, w);
    return;
  }
  if (e.kind == kPoincare || e.kind == kCones) {
    const T* xu = tables[0].cur.data() + u * dim;
    const T* xv = tables[0].cur.data() + v * dim;
    if (e.kind == kCones && !(pre >= T(0))) return;  // the clamp at zero passes gradient where excess >= 0
    const PairGrad<T>& pg = c.pair_g[p];  // from energy(): x = x_u, y = x_v
    T* gu = tables[0].grad.data() + u * dim;
    T* gv = tables[0].grad.data() + v * dim;
    // separate loops: u == v is allowed (the cones' E(u, u) moves with psi), so gu may be gv
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) gu[d] += w * (pg.xx * xu[d] + pg.xy * xv[d]);
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) gv[d] += w * (pg.yx * xu[d] + pg.yy * xv[d]);
    return;
  }
  if (e.kind == kOrderViolation) {
    const T* x = tables[0].cur.data() + u * dim;
    const T* y = tables[0].cur.data() + v * dim;
    T* gx = tables[0].grad.data() + u * dim;
    T* gy = tables[0].grad.data() + v * dim;
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) {
      const T r = T(2) * w * std::max(y[d] - x[d], T(0));
      gx[d] -= r;
      gy[d] += r;
    }
    return;
  }
  if (e.kind == kCosine) {
    const T* x = c.unit.data() + u * dim;
    const T* y = c.unit.data() + v * dim;
    T* gx = tables[0].grad.data() + u * dim;
    T* gy = tables[0].grad.data() + v * dim;
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) {
      gx[d] -= w * y[d];
      gy[d] -= w * x[d];
    }
    return;
  }
  if (!(pre > T(0))) return;  // the threshold's clamp passes no gradient at or below zero
  const T* mu_u = (e.normalize ? c.unit.data() : tables[0].cur.data()) + u * dim;
  const T* mu_v = (e.normalize ? c.unit.data() : tables[0].cur.data()) + v * dim;
  const T* var_u = c.var.data() + u * dim;
  const T* var_v = c.var.data() + v * dim;
  T* gmu_u = tables[0].grad.data() + u * dim;
  T* gmu_v = tables[0].grad.data() + v * dim;
  T* glv_u = tables[1].grad.data() + u * dim;
  T* glv_v = tables[1].grad.data() + v * dim;
  const T h = T(0.5) * w;
#pragma omp simd
  for (int64_t d = 0; d < dim; ++d) {
    const T diff = mu_v[d] - mu_u[d];
    const T iv = T(1) / var_v[d];
    const T r = var_u[d] * iv;
    gmu_u[d] -= w * diff * iv;
    gmu_v[d] += w * diff * iv;
    glv_u[d] += h * (r - T(1));
    glv_v[d] += h * (T(1) - r - diff * diff * iv);
  }
}

template <typename T>
at::Tensor matrix(const T* data, int64_t rows, int64_t cols) {  // a (rows, cols) view, no copy
  return at::from_blob(const_cast<T*>(data), {rows, cols}, at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value));
}

// Bilinear, before the energies: gather x_u and x_v per pair and z = x_u^T W for all pairs in one
// matrix product (P, D) @ (D, D).
template <typename T>
void bilinear_products(const std::vector<Table<T>>& tables, RowCache<T>& c, const std::vector<int64_t>& local,
                       int64_t n_pairs, int64_t dim) {
  c.xu.resize(n_pairs * dim);
  c.xv.resize(n_pairs * dim);
  c.z.resize(n_pairs * dim);
  c.wv.resize(n_pairs * dim);
  const T* cur = tables[0].cur.data();
  for (int64_t p = 0; p < n_pairs; ++p) {
    std::copy(cur + local[2 * p] * dim, cur + (local[2 * p] + 1) * dim, c.xu.data() + p * dim);
    std::copy(cur + local[2 * p + 1] * dim, cur + (local[2 * p + 1] + 1) * dim, c.xv.data() + p * dim);
  }
  auto z = matrix(c.z.data(), n_pairs, dim);
  at::mm_out(z, matrix(c.xu.data(), n_pairs, dim), matrix(c.dense.w, dim, dim));
}

// Bilinear, after dL/dE (w): dE/dx_u = -W x_v, dE/dx_v = -W^T x_u, dE/dW = -x_u x_v^T, dE/db = -1, as
// two matrix products over all pairs and a scatter into the rows' gradients.
template <typename T>
void bilinear_grads(std::vector<Table<T>>& tables, RowCache<T>& c, const std::vector<int64_t>& local,
                    const std::vector<T>& w, int64_t n_pairs, int64_t dim) {
  auto wv = matrix(c.wv.data(), n_pairs, dim);
  at::mm_out(wv, matrix(c.xv.data(), n_pairs, dim), matrix(c.dense.w, dim, dim).t());  // rows (W x_v)^T
  T* g = tables[0].grad.data();
  T sum_w = 0;
  for (int64_t p = 0; p < n_pairs; ++p) {
    const T wp = w[p];
    sum_w += wp;
    T* gx = g + local[2 * p] * dim;
    T* gy = g + local[2 * p + 1] * dim;
    const T* a = c.wv.data() + p * dim;
    const T* z = c.z.data() + p * dim;
    T* xv = c.xv.data() + p * dim;
    // separate loops: u == v is allowed (x^T W x is not constant), so gx may be gy
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) gx[d] -= wp * a[d];
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) gy[d] -= wp * z[d];
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) xv[d] *= -wp;  // x_v scaled by -w, for dW
  }
  auto gw = matrix(c.dense.gw, dim, dim);
  at::mm_out(gw, matrix(c.xu.data(), n_pairs, dim).t(), matrix(c.xv.data(), n_pairs, dim));
  *c.dense.gbias = -sum_w;
}

template <typename T>
double step(std::vector<Table<T>>& tables, int64_t* last, int64_t* mark, const int64_t* pairs, int64_t n_pairs,
            int64_t b, int64_t dim, int64_t t, const Adam& a, const EnergyArgs& e, int64_t loss, double margin,
            const Dense<T>& dense) {
  std::vector<int64_t> rows;
  rows.reserve(2 * n_pairs);
  std::vector<int64_t> local(2 * n_pairs);
  for (int64_t i = 0; i < 2 * n_pairs; ++i) {
    const int64_t c = pairs[i];
    if (mark[c] < 0) {
      mark[c] = int64_t(rows.size());
      rows.push_back(c);
    }
    local[i] = mark[c];
  }
  const int64_t n_rows = int64_t(rows.size());
  gather(tables, last, rows, dim, t, a);
  // scratch kept across calls (per thread): a step's buffers are ~1 MB, and fresh ones per call
  // cost page faults and zero-filling comparable to the boxes' arithmetic
  static thread_local RowCache<T> cache;
  prepare_cache(tables, e, n_rows, dim, cache);

  std::vector<T> en(n_pairs), pre(n_pairs, T(0));
  if (e.kind == kBox || e.kind == kGumbelBox) cache.pair_f.resize(n_pairs * 3 * dim);
  if (e.kind == kPoincare || e.kind == kCones) cache.pair_g.resize(n_pairs);
  if (e.kind == kBilinear) {
    cache.dense = dense;
    bilinear_products(tables, cache, local, n_pairs, dim);
  }
  for (int64_t p = 0; p < n_pairs; ++p)
    en[p] = energy(tables, cache, e, p, local[2 * p], local[2 * p + 1], dim, &pre[p]);

  // dL/dE: K blocks of B negatives, each aligned with the B true pairs; means over K * B terms
  const int64_t kb = n_pairs - b;
  const T inv = T(1) / T(kb);
  std::vector<T> w(n_pairs, T(0));
  double total = 0.0;
  for (int64_t i = 0; i < kb; ++i) {
    const int64_t pi = i % b, ni = b + i;
    if (loss == kMaxMargin) {
      total += double(en[pi]);
      w[pi] += inv;
      const T h = T(margin) - en[ni];
      if (h > T(0)) {
        total += double(h);
        w[ni] -= inv;
      }
    } else if (loss == kBinaryCrossEntropy) {  // -log(1 - e^-E) = -log(-expm1(-E)), E floored at 1e-6
      total += double(en[pi]);
      w[pi] += inv;
      const T floored = std::max(en[ni], T(1e-6));
      total -= double(std::log(-std::expm1(-floored)));
      if (en[ni] > T(1e-6)) w[ni] -= inv / std::expm1(floored);
    } else if (loss == kLogisticRanking) {  // softplus(E(pos) - E(neg)), torch's threshold 20
      const T h = en[pi] - en[ni];
      total += double(h > T(20) ? h : std::log1p(std::exp(h)));
      const T z = std::exp(h);
      const T sig = h > T(20) ? T(1) : z / (z + T(1));
      w[pi] += inv * sig;
      w[ni] -= inv * sig;
    } else {
      const T h = T(margin) + en[pi] - en[ni];
      if (h > T(0)) {
        total += double(h);
        w[pi] += inv;
        w[ni] -= inv;
      }
    }
  }
  // E(u, u) is constant (zero) for the order, cosine and density energies, so there a pair (u, u)
  // has no gradient; skipping it keeps a pair's two rows distinct, which their vectorised gradient
  // loops assume. Gumbel boxes' E(u, u) is not constant (their meet of u with itself is smaller than
  // u); the box gradients run in a scalar loop that allows u == v, and so do the cones' (E(u, u)
  // moves with psi(u)). Bilinear (x^T W x varies too) takes all pairs in matrix products.
  const bool boxes = e.kind == kBox || e.kind == kGumbelBox || e.kind == kCones;
  if (e.kind == kBilinear) bilinear_grads(tables, cache, local, w, n_pairs, dim);
  for (int64_t p = 0; p < n_pairs && e.kind != kBilinear; ++p)
    if (w[p] != T(0) && (boxes || local[2 * p] != local[2 * p + 1]))
      energy_grad(tables, cache, e, p, local[2 * p], local[2 * p + 1], dim, w[p], pre[p]);
  if (e.kind == kCosine) unnormalise_grad(tables[0].grad, tables[0].cur, cache, n_rows, dim, T(e.eps));
  if (e.kind == kDensityOrder && e.normalize)
    unnormalise_grad(tables[0].grad, tables[0].cur, cache, n_rows, dim, T(1e-12));
  if (e.kind == kBox || e.kind == kGumbelBox) box_logit_grads(tables, cache, n_rows * dim);

  adam_write(tables, last, rows, dim, t + 1, a);
  for (int64_t row : rows) mark[row] = -1;
  return kb ? total / double(kb) : 0.0;
}

// Bring every row up to step t (RowAdam.flush): each idle row of a table off the ball advanced
// through its skipped zero-gradient steps by the catch-up rule, as `gather` does, then the table's
// constraint; last[:] = t. Ball rows do not catch up (as RowAdam) and were projected when written.
// One pass over the tables in row order: about 10 ms for Table 1's 82k rows, where the same rule in
// ATen over blocks of rows took 0.2-0.5 s per epoch (density order embeddings' two tables).
template <typename T>
void flush_rows(std::vector<Table<T>>& tables, int64_t* last, int64_t n, int64_t dim, int64_t t, const Adam& a) {
  SkippedFactor factor(a, t);
  for (int64_t row = 0; row < n; ++row) {
    const int64_t k = t - last[row];
    if (k <= 0) continue;
    const CatchUp<T> cu(factor, k, a);
    for (auto& tb : tables) {
      if (tb.ball) continue;
      T* x = tb.values + row * dim;
      T* m = tb.moments + row * 2 * dim;
      cu.apply(x, m, x, m, dim);
      tb.bounds.apply(x, dim);
      clamp_norm(tb, x, dim);
    }
    last[row] = t;
  }
}

// Check a step's tables (N, D), moments (N, 2, D), per-table settings and last (N,); return (N, D).
std::pair<int64_t, int64_t> check_tables(const std::vector<torch::Tensor>& values,
                                         const std::vector<torch::Tensor>& moments, size_t n_tables,
                                         const std::vector<double>& lower, const std::vector<double>& upper,
                                         const std::vector<bool>& ball, const std::vector<double>& norm_lo,
                                         const std::vector<double>& norm_hi, const torch::Tensor& last) {
  TORCH_CHECK(values.size() == n_tables && moments.size() == n_tables && lower.size() == n_tables &&
                  upper.size() == n_tables, "concept_step: wrong number of tables for this energy");
  TORCH_CHECK(ball.size() == n_tables && norm_lo.size() == n_tables && norm_hi.size() == n_tables,
              "concept_step: one ball flag and row-norm bound pair per table");
  const auto dtype = values[0].scalar_type();
  const int64_t n = values[0].size(0), dim = values[0].size(1);
  for (size_t i = 0; i < n_tables; ++i) {
    TORCH_CHECK(values[i].device().is_cpu() && values[i].is_contiguous() && values[i].dim() == 2 &&
                    values[i].scalar_type() == dtype && values[i].size(0) == n && values[i].size(1) == dim,
                "concept_step: tables must be contiguous (N, D) CPU tensors of one dtype");
    TORCH_CHECK(moments[i].is_contiguous() && moments[i].scalar_type() == dtype && moments[i].dim() == 3 &&
                    moments[i].size(0) == n && moments[i].size(1) == 2 && moments[i].size(2) == dim,
                "concept_step: moments must be contiguous (N, 2, D) like the tables");
  }
  TORCH_CHECK(last.scalar_type() == torch::kLong && last.is_contiguous() && last.numel() == n,
              "concept_step: last must be contiguous (N,) int64");
  return {n, dim};
}

// The checked tables as the kernel's Table structs (scratch kept across calls, per thread).
template <typename T>
std::vector<Table<T>>& bind_tables(const std::vector<torch::Tensor>& values, const std::vector<torch::Tensor>& moments,
                                   const std::vector<double>& lower, const std::vector<double>& upper,
                                   const std::vector<bool>& ball, const std::vector<double>& norm_lo,
                                   const std::vector<double>& norm_hi) {
  static thread_local std::vector<Table<T>> tables;
  tables.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    tables[i].values = values[i].data_ptr<T>();
    tables[i].moments = moments[i].data_ptr<T>();
    tables[i].bounds = {T(lower[i]), T(upper[i])};
    tables[i].ball = ball[i];
    tables[i].norm_lo = T(norm_lo[i]);
    tables[i].norm_hi = T(norm_hi[i]);
  }
  return tables;
}

}  // namespace

// One step on `pairs` ((1 + K) B, 2) int64: B true pairs, then K blocks of B negatives. Updates the
// tables, moments (N, 2, D) and last (N,) in place at Adam step t + 1; `mark` is (N,) int64 scratch
// filled with -1 (left so). `dense` ([W, b] for bilinear, else empty) are read; `dense_grad`
// (alike) receive the loss's gradient w.r.t. them, for the caller's optimizer. Per table: `ball`
// (rows on the Poincare ball: Riemannian Adam) and row-norm bounds [norm_lo, norm_hi] (infinite
// norm_hi: none, or geoopt's projection for a ball). Returns the loss.
double concept_step(std::vector<torch::Tensor> values, std::vector<torch::Tensor> moments,
                    std::vector<double> lower, std::vector<double> upper, torch::Tensor last, torch::Tensor mark,
                    torch::Tensor pairs, int64_t b, int64_t t, double lr, double b1, double b2, double eps,
                    int64_t window, int64_t exact_until, bool catch_up, int64_t energy_kind,
                    std::vector<double> energy_params, int64_t loss, double margin, std::vector<torch::Tensor> dense,
                    std::vector<torch::Tensor> dense_grad, std::vector<bool> ball, std::vector<double> norm_lo,
                    std::vector<double> norm_hi) {
  TORCH_CHECK(energy_kind >= 0 && energy_kind <= 7 && loss >= 0 && loss <= 3, "concept_step: unknown energy or loss");
  const size_t n_tables = energy_kind >= kDensityOrder && energy_kind <= kGumbelBox ? 2 : 1;
  const std::vector<size_t> n_params = {0, 1, 2, 1, 2, 0, 0, 1};  // eps; gamma, normalize; t; beta, t; -; -; K
  TORCH_CHECK(energy_params.size() == n_params[energy_kind], "concept_step: wrong number of energy parameters");
  const auto nd = check_tables(values, moments, n_tables, lower, upper, ball, norm_lo, norm_hi, last);
  const int64_t n = nd.first, dim = nd.second;
  const auto dtype = values[0].scalar_type();
  TORCH_CHECK(mark.scalar_type() == torch::kLong && mark.is_contiguous() && mark.numel() == n,
              "concept_step: mark must be contiguous (N,) int64");
  TORCH_CHECK(pairs.scalar_type() == torch::kLong && pairs.is_contiguous() && pairs.dim() == 2 && pairs.size(1) == 2,
              "concept_step: pairs must be contiguous (P, 2) int64");
  const int64_t n_pairs = pairs.size(0);
  TORCH_CHECK(b > 0 && n_pairs > b && (n_pairs - b) % b == 0, "concept_step: pairs must be B true + K * B negatives");
  const size_t n_dense = energy_kind == kBilinear ? 2 : 0;  // W (D, D), b ()
  TORCH_CHECK(dense.size() == n_dense && dense_grad.size() == n_dense,
              "concept_step: wrong number of dense parameters for this energy");
  for (size_t i = 0; i < n_dense; ++i) {
    const std::vector<int64_t> shape = i == 0 ? std::vector<int64_t>{dim, dim} : std::vector<int64_t>{};
    TORCH_CHECK(dense[i].device().is_cpu() && dense[i].is_contiguous() && dense[i].scalar_type() == dtype &&
                    dense[i].sizes().vec() == shape && dense_grad[i].is_contiguous() &&
                    dense_grad[i].scalar_type() == dtype && dense_grad[i].sizes().vec() == shape,
                "concept_step: bilinear's W must be (D, D) and b a scalar, with gradients alike, of the tables' dtype");
  }
  const int64_t* pp = pairs.data_ptr<int64_t>();
  for (int64_t i = 0; i < 2 * n_pairs; ++i) TORCH_CHECK(pp[i] >= 0 && pp[i] < n, "concept_step: pair index out of range");
  Adam a{lr, b1, b2, eps, window, exact_until, catch_up};
  EnergyArgs e{energy_kind};
  const auto& q = energy_params;
  if (energy_kind == kCosine) e.eps = q[0];
  if (energy_kind == kDensityOrder) e.gamma = q[0], e.normalize = q[1] != 0.0;
  if (energy_kind == kBox) e.temperature = q[0];
  if (energy_kind == kGumbelBox) e.beta = q[0], e.temperature = q[1], e.offset = 2 * kEulerGamma * q[0];
  if (energy_kind == kCones) e.K = q[0];
  double out = 0.0;
  AT_DISPATCH_FLOATING_TYPES(dtype, "concept_step", [&] {
    auto& tables = bind_tables<scalar_t>(values, moments, lower, upper, ball, norm_lo, norm_hi);
    Dense<scalar_t> d;
    if (n_dense) {
      d.w = dense[0].data_ptr<scalar_t>();
      d.bias = *dense[1].data_ptr<scalar_t>();
      d.gw = dense_grad[0].data_ptr<scalar_t>();
      d.gbias = dense_grad[1].data_ptr<scalar_t>();
    }
    out = step<scalar_t>(tables, last.data_ptr<int64_t>(), mark.data_ptr<int64_t>(), pp, n_pairs, b, dim, t, a, e,
                         loss, margin, d);
  });
  return out;
}

// Bring every row of the tables up to Adam step t by the catch-up rule (RowAdam.flush, before
// evaluating or saving); arguments as concept_step's. last[:] = t.
void concept_flush(std::vector<torch::Tensor> values, std::vector<torch::Tensor> moments, std::vector<double> lower,
                   std::vector<double> upper, torch::Tensor last, int64_t t, double lr, double b1, double b2,
                   int64_t window, int64_t exact_until, std::vector<bool> ball, std::vector<double> norm_lo,
                   std::vector<double> norm_hi) {
  TORCH_CHECK(!values.empty(), "concept_flush: no tables");
  const auto nd = check_tables(values, moments, values.size(), lower, upper, ball, norm_lo, norm_hi, last);
  const int64_t n = nd.first, dim = nd.second;
  Adam a{lr, b1, b2, 0.0, window, exact_until, true};
  AT_DISPATCH_FLOATING_TYPES(values[0].scalar_type(), "concept_flush", [&] {
    flush_rows<scalar_t>(bind_tables<scalar_t>(values, moments, lower, upper, ball, norm_lo, norm_hi),
                         last.data_ptr<int64_t>(), n, dim, t, a);
  });
}

// The compiled step of one model, bound once: its tables, moments, constraint, Adam settings, energy
// and loss (orderlib/concepts/compiled.py builds one from the model's table specs). `step` and
// `flush` then take only what changes between calls.
class ConceptStep {
 public:
  ConceptStep(std::vector<torch::Tensor> values, std::vector<torch::Tensor> moments, torch::Tensor last,
              std::vector<double> lower, std::vector<double> upper, std::vector<bool> ball,
              std::vector<double> norm_lo, std::vector<double> norm_hi, double lr, double b1, double b2, double eps,
              int64_t window, int64_t exact_until, bool catch_up, int64_t energy_kind,
              std::vector<double> energy_params, int64_t loss, double margin, std::vector<torch::Tensor> dense,
              std::vector<torch::Tensor> dense_grad)
      : values_(std::move(values)), moments_(std::move(moments)), last_(std::move(last)), lower_(std::move(lower)),
        upper_(std::move(upper)), ball_(std::move(ball)), norm_lo_(std::move(norm_lo)), norm_hi_(std::move(norm_hi)),
        lr_(lr), b1_(b1), b2_(b2), eps_(eps), window_(window), exact_until_(exact_until), catch_up_(catch_up),
        energy_kind_(energy_kind), energy_params_(std::move(energy_params)), loss_(loss), margin_(margin),
        dense_(std::move(dense)), dense_grad_(std::move(dense_grad)) {
    TORCH_CHECK(!values_.empty(), "ConceptStep: no tables");
    check_tables(values_, moments_, values_.size(), lower_, upper_, ball_, norm_lo_, norm_hi_, last_);
    mark_ = torch::full({values_[0].size(0)}, -1, torch::kLong);
  }

  // One step on `pairs` ((1 + K) B, 2) at Adam step t + 1 (concept_step); returns the loss.
  double step(torch::Tensor pairs, int64_t b, int64_t t) {
    return concept_step(values_, moments_, lower_, upper_, last_, mark_, pairs, b, t, lr_, b1_, b2_, eps_, window_,
                        exact_until_, catch_up_, energy_kind_, energy_params_, loss_, margin_, dense_, dense_grad_,
                        ball_, norm_lo_, norm_hi_);
  }

  // Every row brought up to Adam step t by the catch-up rule (concept_flush); nothing without catch-up.
  void flush(int64_t t) {
    if (catch_up_)
      concept_flush(values_, moments_, lower_, upper_, last_, t, lr_, b1_, b2_, window_, exact_until_, ball_,
                    norm_lo_, norm_hi_);
  }

 private:
  std::vector<torch::Tensor> values_, moments_;
  torch::Tensor last_, mark_;
  std::vector<double> lower_, upper_;
  std::vector<bool> ball_;
  std::vector<double> norm_lo_, norm_hi_;
  double lr_, b1_, b2_, eps_;
  int64_t window_, exact_until_;
  bool catch_up_;
  int64_t energy_kind_;
  std::vector<double> energy_params_;
  int64_t loss_;
  double margin_;
  std::vector<torch::Tensor> dense_, dense_grad_;
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  py::class_<ConceptStep>(m, "ConceptStep", "one Table 1 model's fused training step (energy, loss, lazy Adam)")
      .def(py::init<std::vector<torch::Tensor>, std::vector<torch::Tensor>, torch::Tensor, std::vector<double>,
                    std::vector<double>, std::vector<bool>, std::vector<double>, std::vector<double>, double, double,
                    double, double, int64_t, int64_t, bool, int64_t, std::vector<double>, int64_t, double,
                    std::vector<torch::Tensor>, std::vector<torch::Tensor>>(),
           py::arg("values"), py::arg("moments"), py::arg("last"), py::arg("lower"), py::arg("upper"),
           py::arg("ball"), py::arg("norm_lo"), py::arg("norm_hi"), py::arg("lr"), py::arg("b1"), py::arg("b2"),
           py::arg("eps"), py::arg("window"), py::arg("exact_until"), py::arg("catch_up"), py::arg("energy"),
           py::arg("energy_params"), py::arg("loss"), py::arg("margin"), py::arg("dense"), py::arg("dense_grad"))
      .def("step", &ConceptStep::step, py::arg("pairs"), py::arg("b"), py::arg("t"))
      .def("flush", &ConceptStep::flush, py::arg("t"));
}
