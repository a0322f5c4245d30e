// Rank-src state-dict loading for partitioned and replicated models.
#include "zero/load.h"

#include <map>

#include "core/ops.h"
#include "nn/state_dict.h"
#include "zero/gathered.h"
#include "zero/param.h"
#include "zero/replicas.h"

namespace zt::zero {

void load_state_dict(nn::Module& m, const std::vector<std::pair<std::string, Tensor>>& state,
                     comm::Communicator& comm, bool strict, int src) {
  autograd::NoGradGuard ng;
  comm::CollectiveLabel label("zero::load_state_dict");
  // Every parameter and persistent buffer, in state_dict order, each tensor once.
  const std::vector<std::pair<std::string, Tensor>> targets = nn::unique_state_dict(m);

  // Rank src decides what is loaded and whether it is valid; everyone learns the verdict,
  // so a bad dict is the same error on every rank instead of a hang.
  std::string verdict;
  std::map<std::string, Tensor> values;
  if (comm.rank() == src) {
    // A tied tensor's entries under its first name, checked to agree.
    std::vector<std::string> missing, unexpected, undefined, shapes, kinds, tied, given_as;
    std::map<std::string, std::string> given;  // a first name -> the name the dict gave
    const nn::NamedTensors folded = nn::fold_tied_names(m, state, tied, &given_as);
    for (size_t i = 0; i < folded.size(); ++i) {
      values[folded[i].first] = folded[i].second;
      given[folded[i].first] = given_as[i];
    }
    auto named = [&](const std::string& n, const std::string& detail) {
      return nn::name_as_given(n, given.at(n), detail);
    };
    std::map<std::string, bool> known;
    for (const auto& [name, t] : targets) {
      known[name] = true;
      auto it = values.find(name);
      if (it == values.end()) {
        if (!nn::may_be_missing(m, name)) missing.push_back(name);
      } else if (!it->second.defined()) {
        undefined.push_back(named(name, ""));
      } else if (it->second.sizes() != t.sizes()) {
        shapes.push_back(named(name, "checkpoint " + shape_str(it->second.sizes()) + ", model " +
                                         shape_str(t.sizes())));
      } else if (const DType want = zero_param(t) ? zero_param(t)->dtype : t.dtype();
                 !nn::same_dtype_kind(it->second.dtype(), want)) {
        // Floats convert to the model's float type; integers read as floats (or floats
        // as integers, or either as a mask) are another tensor's bits.
        kinds.push_back(named(name, std::string("checkpoint ") + dtype_name(it->second.dtype()) +
                                        ", model " + dtype_name(want)));
      }
    }
    for (const auto& [k, v] : values)
      if (!known.count(k)) unexpected.push_back(k);
    std::string err;
    auto list = [&err](const char* what, const std::vector<std::string>& v) {
      if (!v.empty()) err += std::string(err.empty() ? " " : "; ") + what + ": " + list_names(v);
    };
    list("undefined tensors", undefined);
    list("wrong shapes", shapes);
    list("wrong kinds of dtype", kinds);
    list("tied names that disagree", tied);
    if (strict) {
      list("missing keys", missing);
      list("unexpected keys", unexpected);
    }
    std::string present;
    for (const auto& [name, t] : targets) present += values.count(name) ? '1' : '0';
    // Undefined entries and wrong kinds alone are the dict's own damage, not another model's.
    const bool other_model =
        !shapes.empty() || !tied.empty() || (strict && (!missing.empty() || !unexpected.empty()));
    // Keys alone missing or unexpected may be a part on purpose: strict = false loads it.
    const bool only_keys = shapes.empty() && tied.empty() && undefined.empty() && kinds.empty();
    if (other_model)
      err += std::string(
                 ". The state dict is of another model: build the model as it was when it was "
                 "saved (for the apps, the config the weights were trained with)") +
             (only_keys ? "; or pass strict = false to load the part it holds" : "");
    verdict = err.empty() ? present : "!" + err;
  }
  std::string decided = comm.all_gather_bytes(verdict)[src];
  if (!decided.empty() && decided[0] == '!')  // every rank learned the same verdict
    throw comm::AgreedError(
        detail::cat("load_state_dict (rank ", src, "'s state dict):", decided.substr(1)),
        comm.rank());
  // Not agreed: only the ranks whose model differs from rank src's raise this.
  ZT_CHECK(decided.size() == targets.size(), "load_state_dict: ranks disagree on the model (",
           decided.size(), " vs ", targets.size(), " tensors)");

  for (size_t i = 0; i < targets.size(); ++i) {
    if (decided[i] != '1') continue;
    const Tensor& t = targets[i].second;
    ZeroParam* z = zero_param(t);
    if (z && z->kind == ParamKind::kPartitioned) {
      // Full value from src, then each rank keeps its slice: in fp32 where an fp32 master
      // takes it (16-bit storage gets it rounded; the master must not).
      const DType staged = z->master.defined() ? DType::f32 : z->dtype;
      Tensor full = Tensor::empty(z->shape, staged, z->device);
      if (comm.rank() == src) full.copy_(values[targets[i].first]);
      broadcast_tensor(full, comm, src);
      // A prefetch in flight was posted with the old shard: finished first, it is then
      // overwritten below with the rest of the gathered copy.
      if (z->status == ParamStatus::kInflight) z->wait();
      z->write_shard(full);
      if (z->status == ParamStatus::kAvailable) t.copy_(full);
      continue;
    }
    if (comm.rank() == src) t.copy_(values[targets[i].first]);
    broadcast_tensor(t, comm, src);
  }

  std::vector<Tensor> loaded;
  for (size_t i = 0; i < targets.size(); ++i)
    if (decided[i] == '1') loaded.push_back(targets[i].second);
  GatheredParameters::note_loaded(loaded);

  NamedTensors replicas;
  for (auto& [name, t] : targets)
    if (!is_partitioned(t)) replicas.emplace_back(name, t);
  verify_replicas(replicas, comm);
}

}  // namespace zt::zero
