// Window statistics: the per-rank sums and their reduction across ranks.
#include "apps/common/window_stats.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "apps/common/train_util.h"  // all_reduce_host
#include "core/ops.h"

namespace zt::app {

double psnr_from_mse(double mse) {
  // Capped for every error, not only an exact 0: an mse under 4e-9.9 would otherwise score
  // above an exact reconstruction's 99.
  return mse > 0 ? std::min(99.0, 10.0 * std::log10(4.0 / mse)) : 99.0;
}

void ScalarWindow::add(const std::string& name, double value, double count) {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  const auto i = static_cast<size_t>(it - names_.begin());
  if (it == names_.end() || *it != name) {
    names_.insert(it, name);
    sums_.insert(sums_.begin() + static_cast<std::ptrdiff_t>(i), 0.0);
    counts_.insert(counts_.begin() + static_cast<std::ptrdiff_t>(i), 0.0);
  }
  sums_[i] += value;
  counts_[i] += count;
}

std::vector<std::pair<std::string, double>> ScalarWindow::reduce(comm::Communicator& comm) {
  // The names any rank holds, sorted; one all-reduce of their sums and counts (0 and 0
  // where this rank has none).
  std::string mine;
  for (const auto& n : names_) mine += n + '\n';
  std::set<std::string> names;
  for (const std::string& list : comm.all_gather_bytes(mine)) {
    std::istringstream in(list);
    for (std::string n; std::getline(in, n);) names.insert(n);
  }
  const auto n = static_cast<int64_t>(names.size());
  std::vector<double> v(2 * static_cast<size_t>(n), 0.0);
  int64_t i = 0;
  for (const std::string& name : names) {
    const auto it = std::lower_bound(names_.begin(), names_.end(), name);
    if (it != names_.end() && *it == name) {
      const auto at = static_cast<size_t>(it - names_.begin());
      v[static_cast<size_t>(i)] = sums_[at];
      v[static_cast<size_t>(n + i)] = counts_[at];
    }
    ++i;
  }
  std::vector<std::pair<std::string, double>> out;
  if (n > 0) {
    Tensor t = from_vector(v, {2 * n}, DType::f64);
    all_reduce_host(comm, t, comm::ReduceOp::kSum);
    const double* d = t.data<double>();
    i = 0;
    for (const std::string& name : names) {
      out.emplace_back(name, d[i] / d[n + i]);  // every name was added somewhere: count > 0
      ++i;
    }
  }
  names_.clear();
  sums_.clear();
  counts_.clear();
  return out;
}

CodebookUsage::CodebookUsage(int64_t codebook_size) : size_(codebook_size) {
  ZT_CHECK(codebook_size > 0, "CodebookUsage: codebook_size must be > 0, got ", codebook_size);
}

void CodebookUsage::add(const Tensor& codes) {
  add_counts(bincount(codes, size_));
}

void CodebookUsage::add_counts(const Tensor& counts) {
  ZT_CHECK(counts.dtype() == DType::f64 && counts.sizes() == Shape{size_},
           "codebook usage: counts must be f64 (", size_, "), got ", dtype_name(counts.dtype()),
           " ", shape_str(counts.sizes()));
  if (!counts_.defined()) counts_ = zeros({size_}, DType::f64, counts.device());
  add_(counts_, counts.to(counts_.device()));
}

CodebookStats CodebookUsage::reduce(comm::Communicator& comm) {
  const int64_t k = size_;
  Tensor t = counts_.defined() ? counts_.to(Device::cpu()).to(DType::i64).contiguous()
                               : zeros({k}, DType::i64);
  if (counts_.defined()) counts_.zero_();
  all_reduce_host(comm, t, comm::ReduceOp::kSum);
  const int64_t* d = t.data<int64_t>();
  CodebookStats s;
  for (int64_t i = 0; i < k; ++i) s.tokens += d[i];
  double entropy = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    if (d[i] == 0) continue;
    ++s.used;
    const double p = static_cast<double>(d[i]) / static_cast<double>(s.tokens);
    entropy -= p * std::log(p);
  }
  s.usage = static_cast<double>(s.used) / static_cast<double>(k);
  s.perplexity = s.tokens ? std::exp(entropy) : 0.0;
  return s;
}

double StepTimer::stop() {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  window_ += s;
  total_ += s;
  ++window_steps_;
  ++steps_;
  return s;
}

double StepTimer::eta(int64_t left) const {
  if (steps_ == 0) return 0.0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - first_).count();
  return wall / static_cast<double>(steps_) * static_cast<double>(left);
}

double StepTimer::window_mean() {
  const double m = window_steps_ ? window_ / static_cast<double>(window_steps_) : 0.0;
  window_ = 0.0;
  window_steps_ = 0;
  return m;
}

}  // namespace zt::app
