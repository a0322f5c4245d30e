// Sharded checkpoints: save (every rank writes its shards into a temporary directory that
// rank 0 renames once all are done), load (validate on every rank, agree, then apply;
// re-slicing shards when the world size changed) and a consolidated export.
//
// Every step that can fail on one rank is followed by an exchange of error strings, so
// all ranks throw together instead of leaving the others waiting in a collective.
#include "zero/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/ops.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint_dir.h"
#include "zero/replicas.h"

namespace zt::zero {

using namespace ckpt;

namespace {

// Every rank learns every rank's error ("" = fine) and all throw if any failed. The error
// text already says where it was raised, so no second location is added.
void agree(comm::Communicator& comm, const std::string& what, const std::string& mine) {
  std::vector<std::string> all = comm.all_gather_bytes(mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty())
      throw Error(what + " failed" + (all.size() > 1 ? " on rank " + std::to_string(r) : "") +
                  ": " + all[r]);
}

// Order-independent digest of named tensors (dtype, shape, bytes): catches corrupted data
// that still parses, and a rank file swapped in from another checkpoint.
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

// A host tensor with the same values (no copy on CPU: it is written out at once).
Tensor host(const Tensor& t) {
  return t.device().is_cpu() ? t.detach() : t.detach().to(Device::cpu());
}

bool separate_master(const Engine::NamedParam& mp) {
  return zero_param(mp.param)->master.defined();
}

// "<param>.<slot>" -> "<param>" (slot names never contain a dot).
std::string state_owner(const std::string& key) {
  size_t dot = key.rfind('.');
  ZT_CHECK(dot != std::string::npos && dot > 0, "optimizer state key '", key,
           "' is not of the form <param>.<slot>");
  return key.substr(0, dot);
}

// ---- model description (meta.json "tensors"): what must match between save and load

// One entry per partitioned parameter (with its partition layout), replicated parameter
// and buffer, in that order.
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
  for (const auto& [n, b] : e.module().named_buffers())
    out.push_back(
        {{"name", n}, {"kind", "buffer"}, {"dtype", dtype_name(b.dtype())}, {"shape", b.sizes()}});
  return out;
}

std::string desc_str(const json& d) {
  return d.at("kind").get<std::string>() + " " + d.at("dtype").get<std::string>() + " " +
         shape_str(d.at("shape").get<Shape>());
}

// The first difference between the saved model and this one (by name, kind, dtype and
// shape), or "".
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

// ---- load: old rank files, opened once, verified against meta.json

class ShardFiles {
 public:
  ShardFiles(fs::path dir, const json& meta) : dir_(std::move(dir)), meta_(meta) {}

  // The file of old rank j: exists, parses, and matches the digest recorded at save.
  const nn::SafetensorsFile& file(int j) {
    auto it = open_.find(j);
    if (it != open_.end()) return *it->second;
    std::string name = rank_file(j);
    auto f = open_verified(dir_, name, meta_);
    return *open_.emplace(j, std::move(f)).first->second;
  }
  // Old rank j's tensor `key`, checked to be [n] (zero-copy view).
  Tensor shard(int j, const std::string& key, int64_t n) {
    const nn::SafetensorsFile& f = file(j);
    ZT_CHECK(f.contains(key), "'", f.path(), "' has no tensor '", key, "'");
    ZT_CHECK(f.info(key).shape == Shape{n}, "'", f.path(), "': tensor '", key, "' has shape ",
             shape_str(f.info(key).shape), ", the layout in ", kMetaFile, " says [", n, "]");
    return f.view(key);
  }

  static std::unique_ptr<nn::SafetensorsFile> open_verified(const fs::path& dir,
                                                            const std::string& name,
                                                            const json& meta) {
    fs::path p = dir / name;
    ZT_CHECK(fs::exists(p), "checkpoint '", dir.string(), "' is missing ", name,
             " (deleted, or copied incompletely); it cannot be loaded");
    auto f = std::make_unique<nn::SafetensorsFile>(p.string());
    const json& files = meta.at("files");
    ZT_CHECK(files.contains(name), "'", (dir / kMetaFile).string(), "' lists no digest for ", name);
    NamedTensors all;
    for (const std::string& k : f->keys()) all.emplace_back(k, f->view(k));
    std::string want = files.at(name).get<std::string>(), got = hex64(digest(std::move(all)));
    ZT_CHECK(got == want, "'", p.string(), "' is corrupt: its contents hash to ", got, " but ",
             kMetaFile, " recorded ", want, " at save time");
    return f;
  }

 private:
  fs::path dir_;
  const json& meta_;
  std::map<int, std::unique_ptr<nn::SafetensorsFile>> open_;
};

// This rank's shard under `now` of the flat tensor saved as `key` under `old`: element i of
// the full parameter lives in old rank i / s_old at offset i % s_old. Padding stays zero,
// as it is in training (padded gradients are zero, so moments and masters stay zero too).
Tensor reslice(ShardFiles& files, const std::string& key, const Partition& old,
               const Partition& now, int rank, DType dtype) {
  Tensor out = zeros({now.shard_numel}, dtype);
  int64_t begin = now.shard_offset(rank), end = begin + now.shard_valid(rank);
  for (int j = 0; j < old.world && begin < end; ++j) {
    int64_t ob = old.shard_offset(j), oe = ob + old.shard_valid(j);
    int64_t lo = std::max(begin, ob), hi = std::min(end, oe);
    if (lo >= hi) continue;
    Tensor src = files.shard(j, key, old.shard_numel);
    ZT_CHECK(src.dtype() == dtype, "'", files.file(j).path(), "': tensor '", key, "' is ",
             dtype_name(src.dtype()), ", expected ", dtype_name(dtype));
    out.narrow(0, lo - begin, hi - lo).copy_(src.narrow(0, lo - ob, hi - lo));
  }
  return out;
}

// Everything a load will write, read and checked before the engine is touched.
struct Staged {
  std::vector<Tensor> shards, masters;  // per engine.partitioned(); masters undefined if none
  std::vector<Tensor> replicas;         // per engine.replicated()
  std::vector<Tensor> buffers;          // per module().named_buffers()
  optim::NamedTensors optim;
  CheckpointExtra extra;
};

Staged stage(Engine& e, const fs::path& dir) {
  json meta = read_meta(dir);
  std::string meta_path = (dir / kMetaFile).string();
  Staged st;
  try {
    std::string diff = first_difference(meta.at("tensors"), describe(e));
    ZT_CHECK(diff.empty(), "checkpoint '", dir.string(),
             "' was saved from a different model (another model config?): ", diff);

    const int rank = e.comm().rank(), W = meta.at("world_size").get<int>();
    ZT_CHECK(W >= 1, "'", meta_path, "': world_size must be >= 1, got ", W);
    ShardFiles files(dir, meta);
    std::map<std::string, const json*> layout;
    for (const json& t : meta.at("tensors"))
      if (t.at("kind") == "partitioned") layout[t.at("name").get<std::string>()] = &t;

    std::map<std::string, std::pair<Partition, Partition>> parts;  // name -> (old, now)
    for (const auto& mp : e.partitioned()) {
      const ZeroParam* z = zero_param(mp.param);
      const json& t = *layout.at(mp.name);
      Partition old = make_partition(z->part.numel, W);
      ZT_CHECK(t.at("shard_numel").get<int64_t>() == old.shard_numel, "'", meta_path, "': '",
               mp.name, "' has shard_numel ", t.at("shard_numel").get<int64_t>(), ", expected ",
               old.shard_numel, " for ", z->part.numel, " elements over ", W, " ranks");
      parts[mp.name] = {old, z->part};
      st.shards.push_back(reslice(files, "param/" + mp.name, old, z->part, rank, z->dtype));
      Tensor master;
      if (separate_master(mp))
        master = t.value("master", false)
                     ? reslice(files, "master/" + mp.name, old, z->part, rank, DType::f32)
                     : st.shards.back().to(DType::f32);
      st.masters.push_back(master);
    }

    // Optimizer state of partitioned parameters: the keys of one old rank file (all hold
    // the same keys), each moment re-sliced like its parameter.
    const nn::SafetensorsFile& any = files.file(std::min(rank, W - 1));
    for (const std::string& k : any.keys()) {
      if (k.rfind("optim/", 0) != 0) continue;
      std::string key = k.substr(6), owner = state_owner(key);
      auto it = parts.find(owner);
      ZT_CHECK(it != parts.end(), "'", any.path(), "': optimizer state '", key,
               "' belongs to no partitioned parameter of this model");
      if (key == owner + ".step") {
        st.optim.emplace_back(key, any.get(k));
      } else {
        auto [old, now] = it->second;
        st.optim.emplace_back(key, reslice(files, k, old, now, rank, any.info(k).dtype));
      }
    }

    // Replicated parameters, buffers and their optimizer state: every rank reads the same
    // file (one filesystem); verify_replicas() proves they agree afterwards.
    auto rep = ShardFiles::open_verified(dir, kReplicatedFile, meta);
    auto get = [&](const std::string& key, const Tensor& like) {
      ZT_CHECK(rep->contains(key), "'", rep->path(), "' has no tensor '", key, "'");
      const nn::SafetensorsInfo& inf = rep->info(key);
      ZT_CHECK(inf.shape == like.sizes() && inf.dtype == like.dtype(), "'", rep->path(),
               "': tensor '", key, "' is ", dtype_name(inf.dtype), " ", shape_str(inf.shape),
               ", this model has ", dtype_name(like.dtype()), " ", shape_str(like.sizes()));
      return rep->get(key);
    };
    for (const auto& [n, p] : e.replicated()) st.replicas.push_back(get("param/" + n, p));
    for (const auto& [n, b] : e.module().named_buffers())
      st.buffers.push_back(get("buffer/" + n, b));
    for (const std::string& k : rep->keys()) {
      if (k.rfind("optim/", 0) == 0) st.optim.emplace_back(k.substr(6), rep->get(k));
      if (k.rfind("state/", 0) == 0) st.extra.state.emplace_back(k.substr(6), rep->get(k));
    }
    st.optim.emplace_back("step",
                          scalar_tensor(meta.at("optimizer_step").get<double>(), DType::i64));

    st.extra.step = meta.at("step").get<int64_t>();
    st.extra.config_yaml = meta.at("config_yaml").get<std::string>();
    st.extra.loader_epoch = meta.at("loader").at("epoch").get<int64_t>();
    st.extra.loader_position = meta.at("loader").at("position").get<int64_t>();
    st.extra.user = meta.at("user").get<std::map<std::string, std::string>>();
    st.extra.dir = dir.string();
    st.extra.saved_world_size = W;
  } catch (const json::exception& ex) {
    ZT_FAIL("'", meta_path, "' is malformed: ", ex.what());
  }
  return st;
}

}  // namespace

std::string checkpoint_tag(int64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "step_%06lld", static_cast<long long>(step));
  return b;
}

std::string save_checkpoint(Engine& engine, const std::string& root_dir, const std::string& tag,
                            const CheckpointExtra& extra, int keep_last) {
  comm::Communicator& comm = engine.comm();
  const int rank = comm.rank();
  const fs::path root(root_dir);
  const std::string what = "save_checkpoint('" + (root / tag).string() + "')";
  ZT_CHECK(valid_tag(tag), what, ": tag must be a plain name (no '/', not starting with '.', ",
           "not 'latest')");
  TimelineSpan span(engine.timeline(), Track::kCheckpoint, "save " + tag);
  ZT_CHECK(keep_last >= 0, what, ": keep_last must be >= 0, got ", keep_last);
  ZT_CHECK(engine.stats().micro_steps % engine.config().gradient_accumulation_steps == 0, what,
           ": called between gradient-accumulation micro-steps; save after step() returned true");
  autograd::NoGradGuard ng;

  // 1. Rank 0 makes the temporary directory; every rank learns its name.
  std::string id, made;
  if (rank == 0) {
    id = unique_id();
    made = capture([&] {
      fs::create_directories(root);
      for (const std::string& gone : remove_stale_temporaries(root_dir))
        std::fprintf(stderr, "zt: save_checkpoint: removed '%s' (left by an interrupted save)\n",
                     gone.c_str());
      fs::path tmp = root / ("." + tag + ".tmp-" + id);
      ZT_CHECK(fs::create_directory(tmp), "'", tmp.string(), "' already exists");
    });
  }
  agree(comm, what, made);
  id = comm.all_gather_bytes(id)[0];
  const fs::path tmp = root / ("." + tag + ".tmp-" + id);

  // 2. Every rank writes its shards; rank 0 also the replicated tensors.
  std::map<std::string, bool> is_shard;  // parameter name -> partitioned (else replicated)
  for (const auto& mp : engine.partitioned()) is_shard[mp.name] = true;
  for (const auto& [n, p] : engine.replicated()) is_shard[n] = false;
  std::string mine_digest, rep_digest;
  std::string err = capture([&] {
    NamedTensors shards, reps;
    for (const auto& mp : engine.partitioned()) {
      shards.emplace_back("param/" + mp.name, host(zero_param(mp.param)->shard));
      if (separate_master(mp))
        shards.emplace_back("master/" + mp.name, host(zero_param(mp.param)->master));
    }
    for (const auto& [k, t] : engine.optimizer().state_dict()) {
      if (k == "step") continue;
      auto it = is_shard.find(state_owner(k));
      ZT_CHECK(it != is_shard.end(), "optimizer state '", k,
               "' belongs to no parameter of the engine's model");
      (it->second ? shards : reps).emplace_back("optim/" + k, host(t));
    }
    nn::save_safetensors((tmp / rank_file(rank)).string(), shards);
    mine_digest = hex64(digest(shards));
    if (rank != 0) return;
    for (const auto& [n, p] : engine.replicated()) reps.emplace_back("param/" + n, host(p));
    for (const auto& [n, b] : engine.module().named_buffers())
      reps.emplace_back("buffer/" + n, host(b));
    for (const auto& [n, t] : extra.state) reps.emplace_back("state/" + n, host(t).contiguous());
    nn::save_safetensors((tmp / kReplicatedFile).string(), reps);
    rep_digest = hex64(digest(reps));
  });
  std::vector<std::string> digests = comm.all_gather_bytes(err.empty() ? mine_digest : "");
  err = capture([&] { agree(comm, what, err); });
  if (!err.empty()) {
    std::error_code ec;
    if (rank == 0) fs::remove_all(tmp, ec);
    throw Error(err);
  }

  // 3. Rank 0 writes meta.json, renames the directory into place, updates latest, prunes.
  if (rank == 0) {
    err = capture([&] {
      json files = {{kReplicatedFile, rep_digest}};
      for (int r = 0; r < comm.size(); ++r) files[rank_file(r)] = digests[r];
      json meta = {{"format", kFormat},
                   {"version", kVersion},
                   {"tag", tag},
                   {"world_size", comm.size()},
                   {"step", extra.step >= 0 ? extra.step : engine.global_step()},
                   {"optimizer_step", engine.optimizer().step_count()},
                   {"config_yaml", extra.config_yaml},
                   {"loader", {{"epoch", extra.loader_epoch}, {"position", extra.loader_position}}},
                   {"user", extra.user},
                   {"tensors", describe(engine)},
                   {"files", files}};
      write_text_atomically(tmp / kMetaFile, meta.dump(1) + "\n", id);
      commit(tmp, root, tag, id);
    });
    if (!err.empty()) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    } else if (keep_last > 0) {
      prune(root, tag, extra.step >= 0 ? extra.step : engine.global_step(), keep_last);
    }
  }
  agree(comm, what, err);
  return (root / tag).string();
}

void verify_checkpoint(const std::string& dir) {
  const json meta = read_meta(dir);
  try {
    for (const auto& [name, want] : meta.at("files").items())
      (void)ShardFiles::open_verified(dir, name, meta);
    ZT_CHECK(meta.at("files").contains(kReplicatedFile), "'", (fs::path(dir) / kMetaFile).string(),
             "' lists no ", kReplicatedFile);
  } catch (const json::exception& ex) {
    ZT_FAIL("'", (fs::path(dir) / kMetaFile).string(), "' is malformed: ", ex.what());
  }
}

CheckpointExtra load_checkpoint(Engine& engine, const std::string& dir_or_root) {
  comm::Communicator& comm = engine.comm();
  const std::string what = "load_checkpoint('" + dir_or_root + "')";
  TimelineSpan span(engine.timeline(), Track::kCheckpoint, "load " + dir_or_root);
  autograd::NoGradGuard ng;

  // 1. Read and validate everything; nothing in the engine changes yet.
  Staged st;
  agree(comm, what, capture([&] { st = stage(engine, find_checkpoint(dir_or_root)); }));

  // 2. The optimizer checks keys and shapes before it changes anything; ranks that
  // succeeded roll back if another rank failed.
  optim::NamedTensors before;
  for (const auto& [k, t] : engine.optimizer().state_dict()) before.emplace_back(k, t.clone());
  std::string err = capture([&] { engine.optimizer().load_state_dict(st.optim); });
  std::string all = capture([&] { agree(comm, what, err); });
  if (!all.empty()) {
    if (err.empty()) engine.optimizer().load_state_dict(before);
    throw Error(all + "\n  (was the checkpoint saved with the same optimizer?)");
  }

  // 3. Apply. Master shards first; refresh_from_master() rewrites low-precision shards.
  const auto& ps = engine.partitioned();
  for (size_t i = 0; i < ps.size(); ++i) {
    zero_param(ps[i].param)->shard.copy_(st.shards[i]);
    if (st.masters[i].defined()) zero_param(ps[i].param)->master.copy_(st.masters[i]);
  }
  const auto& reps = engine.replicated();
  for (size_t i = 0; i < reps.size(); ++i) reps[i].second.copy_(st.replicas[i]);
  auto buffers = engine.module().named_buffers();
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(st.buffers[i]);
  engine.set_global_step(st.extra.step);
  engine.refresh_from_master();
  engine.verify_replicas();
  return st.extra;
}

void export_consolidated(Engine& engine, const std::string& path) {
  comm::Communicator& comm = engine.comm();
  autograd::NoGradGuard ng;
  // Full fp32 values from the master shards, one parameter at a time; only rank 0 keeps them.
  std::map<std::string, Tensor> full;
  for (const auto& mp : engine.partitioned()) {
    const ZeroParam* z = zero_param(mp.param);
    Tensor src = z->master.defined() ? z->master : z->shard.to(DType::f32);
    Tensor gathered = Tensor::empty({z->part.padded_numel()}, DType::f32, src.device());
    if (comm.size() == 1)
      gathered.copy_(src);
    else
      comm.all_gather(gathered, src.contiguous());
    if (comm.rank() == 0)
      full[mp.name] = host(gathered.narrow(0, 0, z->part.numel).reshape(z->shape)).clone();
  }
  std::string err;
  if (comm.rank() == 0) {
    err = capture([&] {
      NamedTensors out;
      for (const auto& [name, t] : nn::state_dict(engine.module())) {
        auto it = full.find(name);
        Tensor v = it != full.end() ? it->second : host(t);
        out.emplace_back(name,
                         is_floating(v.dtype()) && v.dtype() != DType::f32 ? v.to(DType::f32) : v);
      }
      fs::path parent = fs::path(path).parent_path();
      if (!parent.empty()) fs::create_directories(parent);
      nn::save_safetensors(
          path, out, {{"format", "zt.export"}, {"step", std::to_string(engine.global_step())}});
    });
  }
  agree(comm, "export_consolidated('" + path + "')", err);
}

}  // namespace zt::zero
