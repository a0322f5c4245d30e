// StepLog: per micro-batch one f64 row on the device (the terms, then the input's sum of
// squares), per step the gradient norm; settle() concatenates them, reads them
// once, and applies the non-finite policy with one gather of each rank's first bad loss.
#include "apps/common/step_log.h"

#include <cmath>

#include "core/ops.h"
#include "zero/comm/work.h"

namespace zt::app {

bool StepLog::Row::finite() const {
  return !values.empty() && std::isfinite(values[0]);
}

StepLog::StepLog(std::vector<Term> terms, std::string app)
    : terms_(std::move(terms)), app_(std::move(app)) {
  ZT_CHECK(!terms_.empty(), "StepLog: needs at least the loss");
}

void StepLog::add(int64_t step, int64_t micro, const std::vector<Tensor>& values,
                  const Tensor& input) {
  const size_t n = terms_.size();
  ZT_CHECK(values.size() == n, app_, ": a micro-batch logs ", n, " values, got ", values.size());
  const Device device = values[0].device();
  Tensor row = Tensor::empty({static_cast<int64_t>(n) + 1}, DType::f64, device);
  std::vector<Tensor> dst, src;
  for (size_t i = 0; i < n; ++i) {
    ZT_CHECK(values[i].numel() == 1, app_, ": logged value '", terms_[i].name, "' has shape ",
             shape_str(values[i].sizes()), ", not one element");
    dst.push_back(row.narrow(0, static_cast<int64_t>(i), 1));
    src.push_back(values[i].detach().reshape({1}));
  }
  // The sum of squares (in double, one pass, no temporary of the input's size) is finite
  // exactly when every element is, for inputs within f32's range (the batches: f32 and
  // 16-bit); an f64 input past 1e154 would read as non-finite. Integer inputs are finite.
  const bool checked = input.defined() && is_floating(input.dtype());
  if (checked) {
    dst.push_back(row.narrow(0, static_cast<int64_t>(n), 1));
    src.push_back(sum_squares(input.detach()).to(device).reshape({1}));
  }
  multi_copy_(dst, src);
  rows_.push_back({step, micro, checked, std::move(row)});
}

void StepLog::add_norm(int64_t step, const Tensor& norm) {
  if (norm.defined()) norms_.emplace_back(step, norm.detach().to(DType::f64).reshape({1}).clone());
}

std::string StepLog::report(const Row& row, bool input_finite) const {
  std::string s = "loss " + std::to_string(row.values[0]) + " in micro-batch " +
                  std::to_string(row.micro) + "; ";
  if (!input_finite)
    return s + "the input batch holds non-finite values (check the data: data.path and its files)";
  std::string terms;
  for (size_t i = 1; i < terms_.size(); ++i)
    if (!terms_[i].about.empty() && !std::isfinite(row.values[i]))
      terms += (terms.empty() ? "" : ", ") + terms_[i].about;
  if (terms.empty())
    return s + "every loss term is finite but their weighted sum is not (check the loss weights)";
  return s + "non-finite loss terms: " + terms;
}

std::vector<StepLog::Row> StepLog::settle(zero::Engine& engine, int64_t now) {
  std::vector<Row> rows;
  std::string mine;  // this rank's first non-finite loss: "<step>\n<report>"
  int64_t norm_step = -1;
  double norm = 0.0;
  if (!rows_.empty() || !norms_.empty()) {
    std::vector<Tensor> parts;
    for (const Pending& p : rows_) parts.push_back(p.values);
    for (const auto& [step, t] : norms_) parts.push_back(t);
    // One buffer filled by one multi_copy_ (a launch per 96 rows on a GPU, not a copy per
    // row), then one read.
    int64_t total = 0;
    for (const Tensor& t : parts) total += t.numel();
    const Tensor all = Tensor::empty({total}, DType::f64, parts.front().device());
    std::vector<Tensor> slots;
    for (int64_t at = 0; const Tensor& t : parts) {
      slots.push_back(all.narrow(0, at, t.numel()));
      at += t.numel();
    }
    multi_copy_(slots, parts);
    const std::vector<double> v = all.to(Device::cpu()).to_vector();
    ++reads_;
    const size_t n = terms_.size();
    size_t at = 0;
    for (const Pending& p : rows_) {
      Row r{p.step, p.micro, std::vector<double>(v.begin() + at, v.begin() + at + n)};
      const bool input_finite = !p.has_input || std::isfinite(v[at + n]);
      at += n + 1;
      if (!r.finite() && mine.empty())
        mine = std::to_string(r.step) + "\n" + report(r, input_finite);
      rows.push_back(std::move(r));
    }
    for (const auto& [step, t] : norms_) {
      if (!std::isfinite(v[at]) && norm_step < 0) {
        norm_step = step;
        norm = v[at];
      }
      ++at;
    }
    rows_.clear();
    norms_.clear();
  }

  comm::Communicator& comm = engine.comm();
  const std::vector<std::string> all = comm.all_gather_bytes(mine);
  if (engine.loss_scaler().active()) return rows;  // fp16: the engine skipped those updates
  int64_t loss_step = -1;
  size_t loss_rank = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    const int64_t s = std::stoll(all[r].substr(0, all[r].find('\n')));
    if (loss_step < 0 || s < loss_step) {
      loss_step = s;
      loss_rank = r;
    }
  }
  auto stops = [&](int64_t step) {
    return ". Training stops here" +
           (now > step ? " (at step " + std::to_string(now) +
                             ", the first after it to read the losses back: the loop does so at "
                             "log, eval and checkpoint steps)"
                       : std::string()) +
           "; no checkpoint of step " + std::to_string(step) + " or later is written";
  };
  if (loss_step > 0 && (norm_step < 0 || loss_step <= norm_step)) {
    const std::string& text = all[loss_rank];
    throw comm::AgreedError(
        app_ + ": the loss is not finite at step " + std::to_string(loss_step) + " on rank " +
            std::to_string(loss_rank) + ": " + text.substr(text.find('\n') + 1) + stops(loss_step) +
            ". Resume from the last checkpoint with a lower train.lr, train.gradient_clipping, "
            "or bf16; fp16 with loss scaling would skip such steps instead",
        comm.rank());
  }
  if (norm_step > 0)  // the norm is all-reduced: every rank saw the same
    throw comm::AgreedError(
        app_ + ": the gradient norm is " + std::to_string(norm) + " at step " +
            std::to_string(norm_step) +
            " while every loss was finite: a gradient overflowed in backward" + stops(norm_step) +
            ". Resume from the last checkpoint with a lower train.lr or train.gradient_clipping",
        comm.rank());
  return rows;
}

}  // namespace zt::app
