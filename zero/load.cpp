// Rank-src state-dict loading for partitioned and replicated models.
#include "zero/load.h"

#include <map>

#include "core/ops.h"
#include "nn/state_dict.h"
#include "zero/param.h"
#include "zero/replicas.h"

namespace zt::zero {

void load_state_dict(nn::Module& m, const std::vector<std::pair<std::string, Tensor>>& state,
                     comm::Communicator& comm, bool strict, int src) {
  autograd::NoGradGuard ng;
  // Every parameter and persistent buffer, in state_dict order.
  std::vector<std::pair<std::string, Tensor>> targets;
  for (auto& [name, p] : m.named_parameters()) targets.emplace_back(name, p);
  for (auto& [path, mod] : m.named_modules())
    for (auto& [local, b] : mod->local_buffers())
      if (b.defined() && mod->buffer_is_persistent(local))
        targets.emplace_back(path.empty() ? local : path + "." + local, b);
  // The other names of tied parameters (nn::state_dict lists each): known keys, checked
  // as their first name is, and a stand-in where the first name is missing (a file that
  // kept only one of them). A dict holding two different values for one tensor is refused.
  std::map<std::string, std::string> alias_of;
  {
    std::map<const TensorImpl*, std::string> first;
    for (auto& [name, t] : targets) first.emplace(t.impl(), name);
    for (auto& [name, t] : nn::state_dict(m))
      if (first.at(t.impl()) != name) alias_of.emplace(name, first.at(t.impl()));
  }

  // Rank src decides what is loaded and whether it is valid; everyone learns the verdict,
  // so a bad dict is the same error on every rank instead of a hang.
  std::string verdict;
  std::map<std::string, Tensor> values;
  if (comm.rank() == src) {
    for (const auto& [k, v] : state) values[k] = v;
    std::vector<std::string> missing, unexpected, shapes, differ;
    for (const auto& [alias, name] : alias_of) {
      auto it = values.find(alias);
      if (it == values.end()) continue;
      auto first = values.find(name);
      if (first == values.end()) {
        values.emplace(name, it->second);
      } else if (first->second.sizes() != it->second.sizes()) {
        shapes.push_back(alias + " (" + shape_str(it->second.sizes()) + ", but " + name + " " +
                         shape_str(first->second.sizes()) + ")");
      } else if (max(abs(sub(first->second.to(DType::f64), it->second.to(DType::f64)))).item() !=
                 0.0) {
        differ.push_back(name + " and " + alias);
      }
      values.erase(alias);
    }
    std::map<std::string, bool> known;
    for (const auto& [name, t] : targets) {
      known[name] = true;
      auto it = values.find(name);
      if (it == values.end()) {
        missing.push_back(name);
      } else if (it->second.sizes() != t.sizes()) {
        shapes.push_back(name + " (checkpoint " + shape_str(it->second.sizes()) + ", model " +
                         shape_str(t.sizes()) + ")");
      }
    }
    for (const auto& [k, v] : values)
      if (!known.count(k)) unexpected.push_back(k);
    std::string err;
    auto list = [&err](const char* what, const std::vector<std::string>& v) {
      if (!v.empty()) err += std::string(err.empty() ? " " : "; ") + what + ": " + list_names(v);
    };
    list("wrong shapes", shapes);
    list("different values for one tied tensor", differ);
    if (strict) {
      list("missing keys", missing);
      list("unexpected keys", unexpected);
    }
    std::string present;
    for (const auto& [name, t] : targets) present += values.count(name) ? '1' : '0';
    if (!err.empty())
      err +=
          ". The state dict is of another model: build the model as it was when it was "
          "saved (for the apps, the config the weights were trained with)";
    verdict = err.empty() ? present : "!" + err;
  }
  std::string decided = comm.all_gather_bytes(verdict)[src];
  ZT_CHECK(decided.empty() || decided[0] != '!', "load_state_dict (rank ", src,
           "'s state dict):", decided.substr(1));
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
      z->write_shard(full);
      if (z->status == ParamStatus::kAvailable) t.copy_(full);
      continue;
    }
    if (comm.rank() == src) t.copy_(values[targets[i].first]);
    broadcast_tensor(t, comm, src);
  }

  NamedTensors replicas;
  for (auto& [name, t] : targets)
    if (!is_partitioned(t)) replicas.emplace_back(name, t);
  verify_replicas(replicas, comm);
}

}  // namespace zt::zero
