// The model description and digests of meta.json, and the all-ranks error exchange.
#include "zero/checkpoint_meta.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "nn/state_dict.h"
#include "zero/param.h"
#include "zero/partition.h"

namespace zt::zero::ckpt {

void agree(comm::Communicator& comm, const std::string& what, const std::string& mine) {
  std::vector<std::string> all = comm.all_gather_bytes(mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty())
      throw comm::AgreedError(what + " failed" +
                                  (all.size() > 1 ? " on rank " + std::to_string(r) : "") + ": " +
                                  all[r],
                              comm.rank());
}

uint64_t digest(NamedTensors tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t h = kFnvOffset;
  for (const auto& [name, t] : tensors) {
    const uint64_t th = tensor_hash(t);
    h = fnv1a(name.data(), name.size() + 1, h);
    h = fnv1a(&th, sizeof th, h);
  }
  return h;
}

Tensor host(const Tensor& t) {
  return t.device().is_cpu() ? t.detach() : t.detach().to(Device::cpu());
}

bool separate_master(const Engine::NamedParam& mp) {
  return zero_param(mp.param)->master.defined();
}

std::string state_owner(const std::string& key) {
  size_t dot = key.rfind('.');
  ZT_CHECK(dot != std::string::npos && dot > 0, "optimizer state key '", key,
           "' is not of the form <param>.<slot>");
  return key.substr(0, dot);
}

json describe(Engine& e) {
  json out = json::array();
  for (const auto& mp : e.partitioned()) {
    const ZeroParam* z = zero_param(mp.param);
    out.push_back({{"name", mp.name},
                   {"kind", "partitioned"},
                   {"dtype", dtype_name(z->dtype)},
                   {"shape", z->shape},
                   {"numel", z->part.numel},
                   {"shard_numel", z->part.shard_numel},
                   {"world", z->part.world},
                   {"trainable", z->grad_shard.defined()},
                   {"master", separate_master(mp)}});
  }
  for (const auto& [n, p] : e.replicated())
    out.push_back({{"name", n},
                   {"kind", "replicated"},
                   {"dtype", dtype_name(p.dtype())},
                   {"shape", p.sizes()},
                   {"trainable", p.requires_grad()}});
  for (const auto& [n, b] : nn::persistent_buffers(e.module()))
    out.push_back(
        {{"name", n}, {"kind", "buffer"}, {"dtype", dtype_name(b.dtype())}, {"shape", b.sizes()}});
  return out;
}

void check_layout(const json& meta, const std::string& meta_path) {
  const json& ws = meta.at("world_size");
  ZT_CHECK(ws.is_number_integer() && ws.get<int64_t>() >= 1 &&
               ws.get<int64_t>() <= std::numeric_limits<int>::max(),
           "'", meta_path, "': world_size must be an integer >= 1, got ",
           ws.is_number() ? ws.dump() : std::string(ws.type_name()));
  const int world = ws.get<int>();
  const json& files = meta.at("files");
  ZT_CHECK(files.contains(kReplicatedFile), "'", meta_path, "' lists no ", kReplicatedFile);
  ZT_CHECK(files.size() == static_cast<size_t>(world) + 1, "'", meta_path, "' has world_size ",
           world, " but lists ", files.size() - 1, " rank files (one per rank)");
  for (int r = 0; r < world; ++r)
    ZT_CHECK(files.contains(rank_file(r)), "'", meta_path, "' has world_size ", world,
             " but lists no ", rank_file(r));
  for (const json& t : meta.at("tensors")) {
    const std::string name = t.at("name").get<std::string>();
    // Checked, not converted: a number out of range would be undefined behaviour (every
    // entry's shape is converted when the layout is compared with the model's).
    const json& shape = t.at("shape");
    int64_t numel = 1;
    bool valid = shape.is_array();
    for (size_t i = 0; valid && i < shape.size(); ++i)
      valid = shape[i].is_number_integer() && shape[i].get<int64_t>() >= 0 &&
              !__builtin_mul_overflow(numel, shape[i].get<int64_t>(), &numel);
    if (t.at("kind") != "partitioned") {
      ZT_CHECK(valid, "'", meta_path, "': '", name, "' needs a shape of sizes >= 0");
      continue;
    }
    const json& shard_numel = t.at("shard_numel");
    ZT_CHECK(valid && shard_numel.is_number_integer(), "'", meta_path, "': '", name,
             "' needs a shape of sizes >= 0 and an integer shard_numel");
    // Rounded up to whole shards, a count this near INT64_MAX would overflow.
    ZT_CHECK(numel <= std::numeric_limits<int64_t>::max() - (world - 1), "'", meta_path, "': '",
             name, "' has a shape of ", numel, " elements, more than a tensor holds");
    const int64_t saved = shard_numel.get<int64_t>();
    const int64_t want = make_partition(numel, world).shard_numel;
    ZT_CHECK(saved == want, "'", meta_path, "': '", name, "' has shard_numel ", saved,
             ", expected ", want, " for ", numel, " elements at world_size ", world);
  }
}

namespace {

std::string desc_str(const json& d) {
  return d.at("kind").get<std::string>() + " " + d.at("dtype").get<std::string>() + " " +
         shape_str(d.at("shape").get<Shape>());
}

}  // namespace

std::string first_difference(const json& saved, const json& mine) {
  std::map<std::string, const json*> by_name;
  for (const json& d : saved) by_name[d.at("name").get<std::string>()] = &d;
  std::set<std::string> seen;
  for (const json& d : mine) {
    std::string name = d.at("name").get<std::string>();
    seen.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end())
      return "'" + name + "' (" + desc_str(d) + ") is in this model but not in the checkpoint";
    if (desc_str(*it->second) != desc_str(d))
      return "'" + name + "' is " + desc_str(*it->second) + " in the checkpoint but " +
             desc_str(d) + " in this model";
  }
  for (const json& d : saved)
    if (!seen.count(d.at("name").get<std::string>()))
      return "'" + d.at("name").get<std::string>() + "' (" + desc_str(d) +
             ") is in the checkpoint but not in this model";
  return "";
}

}  // namespace zt::zero::ckpt
