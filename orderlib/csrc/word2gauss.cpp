// word2gauss's training loop on CPU, one pair at a time (Vilnis & McCallum 2015; the
// seomoz/word2gauss code that Vendrov et al. used for Table 1's baseline):
//   E(u, v) = KL(N(mu_u, diag var_u) || N(mu_v, diag var_v))      (low = u is a hyponym of v)
//   loss    = max(0, margin + E(pos) - E(neg))                      per (positive, corrupted) pair
// and, for each violating pair, word2gauss's update of the four rows it touches, the positive
// pair first, then the corrupted pair with the positive's update already applied:
//   g clipped to [-max_grad, max_grad]; acc += g^2; x -= eta / (sqrt(acc) + 1) * g;
//   then ||mu|| <= mu_max and var clamped to [var_min, var_max].
// Sequential and single-threaded, so an epoch is deterministic given the pairs' order; float
// arithmetic in SIMD lanes, as word2gauss's own (float32) code.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

struct Tables {
  float* mu;
  float* var;
  float* acc_mu;
  float* acc_var;
  int64_t dim;
};

struct Settings {
  double eta_mu, eta_var, margin, mu_max, var_min, var_max, max_grad;
};

// KL(N_u || N_v) in float lanes (the loops vectorise); the log-determinant term as logs of
// products of 16 ratios, each product within float's range for variances in any [1e-2, 1e2] box.
double kl(const Tables& t, int64_t u, int64_t v) {
  const float* mu_u = t.mu + u * t.dim;
  const float* mu_v = t.mu + v * t.dim;
  const float* var_u = t.var + u * t.dim;
  const float* var_v = t.var + v * t.dim;
  float e = 0.0f;
#pragma omp simd reduction(+ : e)
  for (int64_t d = 0; d < t.dim; ++d) {
    const float diff = mu_v[d] - mu_u[d];
    e += (var_u[d] + diff * diff) / var_v[d] - 1.0f;
  }
  double logdet = 0.0;
  for (int64_t d0 = 0; d0 < t.dim; d0 += 16) {
    float ratio = 1.0f;
    const int64_t d1 = std::min<int64_t>(t.dim, d0 + 16);
#pragma omp simd reduction(* : ratio)
    for (int64_t d = d0; d < d1; ++d) ratio *= var_v[d] / var_u[d];
    logdet += std::log(double(ratio));
  }
  return 0.5 * (double(e) + logdet);
}

// Apply sign * dKL/d(row) to row `k` with word2gauss's Adagrad rule; grads in (dim,) buffers.
void update_row(Tables& t, const Settings& s, int64_t k, const float* g_mu, const float* g_var, float sign) {
  float* mu = t.mu + k * t.dim;
  float* var = t.var + k * t.dim;
  float* a_mu = t.acc_mu + k * t.dim;
  float* a_var = t.acc_var + k * t.dim;
  const float eta_mu = float(s.eta_mu), eta_var = float(s.eta_var), c = float(s.max_grad);
  const float lo = float(s.var_min), hi = float(s.var_max);
  float norm2 = 0.0f;
#pragma omp simd reduction(+ : norm2)
  for (int64_t d = 0; d < t.dim; ++d) {
    const float g = std::min(c, std::max(-c, sign * g_mu[d]));
    a_mu[d] += g * g;
    mu[d] -= eta_mu / (std::sqrt(a_mu[d]) + 1.0f) * g;
    norm2 += mu[d] * mu[d];
  }
  const float norm = std::sqrt(norm2);
  if (norm > s.mu_max) {
    const float scale = float(s.mu_max) / norm;
#pragma omp simd
    for (int64_t d = 0; d < t.dim; ++d) mu[d] *= scale;
  }
#pragma omp simd
  for (int64_t d = 0; d < t.dim; ++d) {
    const float g = std::min(c, std::max(-c, sign * g_var[d]));
    a_var[d] += g * g;
    var[d] = std::min(hi, std::max(lo, var[d] - eta_var / (std::sqrt(a_var[d]) + 1.0f) * g));
  }
}

// Step the pair (u, v) along sign * grad KL(u || v): sign +1 lowers its energy, -1 raises it.
void step_pair(Tables& t, const Settings& s, int64_t u, int64_t v, float sign, float* work) {
  float* g_mu_u = work;
  float* g_var_u = work + t.dim;
  float* g_mu_v = work + 2 * t.dim;
  float* g_var_v = work + 3 * t.dim;
  const float* mu_u = t.mu + u * t.dim;
  const float* mu_v = t.mu + v * t.dim;
  const float* var_u = t.var + u * t.dim;
  const float* var_v = t.var + v * t.dim;
#pragma omp simd
  for (int64_t d = 0; d < t.dim; ++d) {  // gradients at the current parameters, both rows
    const float diff = mu_v[d] - mu_u[d];
    const float iv = 1.0f / var_v[d];
    g_mu_u[d] = -diff * iv;
    g_mu_v[d] = diff * iv;
    g_var_u[d] = 0.5f * (iv - 1.0f / var_u[d]);
    g_var_v[d] = 0.5f * (iv - (var_u[d] + diff * diff) * iv * iv);
  }
  update_row(t, s, u, g_mu_u, g_var_u, sign);
  if (v != u) update_row(t, s, v, g_mu_v, g_var_v, sign);
}

// Ask for the rows of pair (u, v) ahead of use: the tables are far larger than the caches and
// each pair touches 8 random rows, so the loop is bound by memory latency without this.
void prefetch_pair(const Tables& t, int64_t u, int64_t v) {
  const int64_t bytes = t.dim * int64_t(sizeof(float));
  for (const float* base : {t.mu, t.var, t.acc_mu, t.acc_var})
    for (int64_t k : {u, v})
      for (int64_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(base + k * t.dim) + off);
}

}  // namespace

// Train one epoch over aligned (positive, corrupted) pairs, in order; return the mean hinge loss.
double train_epoch(torch::Tensor mu, torch::Tensor var, torch::Tensor acc_mu, torch::Tensor acc_var,
                   torch::Tensor pos, torch::Tensor neg, double eta_mu, double eta_var, double margin,
                   double mu_max, double var_min, double var_max, double max_grad) {
  for (const auto& x : {mu, var, acc_mu, acc_var}) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() == 2,
                "word2gauss tables must be contiguous float32 CPU matrices");
    TORCH_CHECK(x.sizes() == mu.sizes(), "word2gauss tables must share one (N, D) shape");
  }
  TORCH_CHECK(pos.scalar_type() == torch::kInt64 && neg.scalar_type() == torch::kInt64 && pos.dim() == 2 &&
                  pos.size(1) == 2 && pos.sizes() == neg.sizes() && pos.is_contiguous() && neg.is_contiguous(),
              "pairs must be contiguous int64 (P, 2) tensors of equal shape");
  const int64_t n = mu.size(0);
  const int64_t p = pos.size(0);
  const int64_t* pp = pos.data_ptr<int64_t>();
  const int64_t* np_ = neg.data_ptr<int64_t>();
  for (int64_t i = 0; i < 2 * p; ++i)
    TORCH_CHECK(pp[i] >= 0 && pp[i] < n && np_[i] >= 0 && np_[i] < n, "pair index out of range");
  Tables t{mu.data_ptr<float>(), var.data_ptr<float>(), acc_mu.data_ptr<float>(), acc_var.data_ptr<float>(),
           mu.size(1)};
  Settings s{eta_mu, eta_var, margin, mu_max, var_min, var_max, max_grad};
  std::vector<float> work(4 * t.dim);
  double total = 0.0;
  constexpr int64_t kAhead = 4;  // pairs
  for (int64_t i = 0; i < p; ++i) {
    if (i + kAhead < p) {
      prefetch_pair(t, pp[2 * (i + kAhead)], pp[2 * (i + kAhead) + 1]);
      prefetch_pair(t, np_[2 * (i + kAhead)], np_[2 * (i + kAhead) + 1]);
    }
    const int64_t pu = pp[2 * i], pv = pp[2 * i + 1], nu = np_[2 * i], nv = np_[2 * i + 1];
    const double loss = margin + kl(t, pu, pv) - kl(t, nu, nv);
    if (loss <= 1e-14) continue;
    total += loss;
    step_pair(t, s, pu, pv, +1.0f, work.data());
    step_pair(t, s, nu, nv, -1.0f, work.data());
  }
  return p ? total / p : 0.0;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("train_epoch", &train_epoch, "word2gauss epoch: sequential max-margin Adagrad over KL energies");
}
