// Sharded checkpoints: save (every rank writes its shards into a temporary directory that
// rank 0 renames once all are done) and a consolidated export. Loading is in
// checkpoint_load.cpp, what both share in checkpoint_meta.h.
//
// Every step that can fail on one rank is followed by an exchange of error strings, so
// all ranks throw together instead of leaving the others waiting in a collective.
#include "zero/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "core/ops.h"
#include "core/text_file.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint_meta.h"
#include "zero/gathered.h"

namespace zt::zero {

using namespace ckpt;

std::string checkpoint_tag(int64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "step_%06lld", static_cast<long long>(step));
  return b;
}

// fp16's loss scale, so a resume continues a dynamic one (null without fp16).
static json loss_scaler_json(const LossScaler& scaler) {
  if (!scaler.active()) return nullptr;
  const LossScaler::State s = scaler.state();
  return {{"dynamic", scaler.dynamic()},
          {"scale", s.scale},
          {"hysteresis", s.hysteresis},
          {"iteration", s.iteration},
          {"last_overflow", s.last_overflow}};
}

// The optimizer's type and hyper-parameters: a load of its state refuses another type.
static json optimizer_json(const optim::Optimizer& opt) {
  json j = {{"type", opt.kind()}};
  for (const auto& [name, value] : opt.hyper_parameters()) j[name] = value;
  return j;
}

std::string save_checkpoint(Engine& engine, const std::string& root_dir, const std::string& tag,
                            const CheckpointExtra& extra, int64_t keep_last) {
  comm::Communicator& comm = engine.comm();
  comm::CollectiveLabel label("save_checkpoint");
  const int rank = comm.rank();
  const fs::path root(root_dir);
  const std::string what = "save_checkpoint('" + (root / tag).string() + "')";
  ZT_CHECK(valid_tag(tag), what, ": tag must be a plain name (no '/', not starting with '.', ",
           "not 'latest')");
  TimelineSpan span(engine.timeline(), Track::kCheckpoint, "save " + tag);
  ZT_CHECK(keep_last >= 0, what, ": keep_last must be >= 0, got ", keep_last);
  ZT_CHECK(engine.at_window_start(), what,
           ": called between gradient-accumulation micro-steps; save after step() returned true");
  const int64_t step = extra.step >= 0 ? extra.step : engine.global_step();
  // A folder named for another step than its meta.json records is incomplete to a resume
  // and to keep_last (checkpoint_dir.cpp): refused here rather than saved unusable.
  if (const std::optional<int64_t> named = tag_step(tag))
    ZT_CHECK(*named == step, what, ": the tag names step ", *named,
             " but the checkpoint records step ", step,
             " (CheckpointExtra::step, or engine.global_step() when it is -1); pass "
             "CheckpointExtra::step = ",
             *named, ", or tag it checkpoint_tag(", step, ")");
  // A step that failed part-way left some parameters updated and others not.
  agree(comm, what,
        engine.optimizer().consistent()
            ? ""
            : "the last optimizer step failed part-way, so the parameters and the optimizer "
              "state disagree and are not saved; load a checkpoint to go on");
  // A read-only scope's edit would be saved at one rank (the gathered parameter is the shard)
  // and not at more, and the scope's exit takes it from the model either way.
  agree(comm, what, capture([] {
          GatheredParameters::check_unedited("on the scope's exit, after this checkpoint");
        }));
  autograd::NoGradGuard ng;
  // The shards read below take the edits made so far in an open modifier scope, as a step's
  // do: the model goes on with them once the scope closes, and so must a resume.
  GatheredParameters::commit_edits();

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
    // Buffers under buffers.sync none differ between ranks: each rank keeps its own.
    for (const auto& [n, b] : nn::persistent_buffers(engine.module()))
      if (engine.config().buffers.sync_for(n) == BufferSync::none)
        shards.emplace_back("buffer/" + n, host(b));
    nn::save_safetensors((tmp / rank_file(rank)).string(), shards);
    mine_digest = hex64(digest(shards));
    if (rank != 0) return;
    for (const auto& [n, p] : engine.replicated()) reps.emplace_back("param/" + n, host(p));
    for (const auto& [n, b] : nn::persistent_buffers(engine.module()))
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
    throw comm::AgreedError(err, rank);  // agree() told every rank the same
  }

  // 3. Rank 0 writes meta.json, renames the directory into place, updates latest, prunes.
  if (rank == 0) {
    err = capture([&] {
      json files = {{kReplicatedFile, rep_digest}};
      for (int r = 0; r < comm.size(); ++r) files[rank_file(r)] = digests[r];
      json meta = {
          {"format", kFormat},
          {"version", kVersion},
          {"tag", tag},
          {"world_size", comm.size()},
          {"step", step},
          {"optimizer", optimizer_json(engine.optimizer())},
          {"optimizer_step", engine.optimizer().step_count()},
          {"lr", engine.lr()},
          {"engine_steps",
           {{"applied", engine.global_step()}, {"skipped", engine.stats().overflow_skips}}},
          {"config_yaml", extra.config_yaml},
          {"loader",
           {{"epoch", extra.loader_epoch},
            {"position", extra.loader_position},
            {"batch", extra.loader_batch},
            {"dataset_size", extra.loader_dataset_size}}},
          {"user", extra.user},
          {"loss_scaler", loss_scaler_json(engine.loss_scaler())},
          {"tensors", describe(engine)},
          {"files", files}};
      seal_meta(meta);
      write_text_atomically((tmp / kMetaFile).string(), meta.dump(1) + "\n", id);
      commit(tmp, root, tag, id);
    });
    if (!err.empty()) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    } else if (keep_last > 0) {
      prune(root, tag, step, keep_last, id);
    }
  }
  agree(comm, what, err);
  return (root / tag).string();
}

NamedTensors consolidated_state(Engine& engine) {
  comm::Communicator& comm = engine.comm();
  // As save_checkpoint does: a read-only scope's edit is refused (at one rank the shard holds
  // it), and a modifier scope's edits are put on every rank's shards first.
  agree(comm, "consolidated_state", capture([] {
          GatheredParameters::check_unedited("on the scope's exit, after this export");
        }));
  autograd::NoGradGuard ng;
  GatheredParameters::commit_edits();
  // Full fp32 values from the master shards, one parameter at a time; only rank 0 keeps
  // them. By tensor, not name: a tied parameter is written under each of its names.
  std::map<const TensorImpl*, Tensor> full;
  for (const auto& mp : engine.partitioned()) {
    const ZeroParam* z = zero_param(mp.param);
    // Gathered where the shards live: an offloaded master is in host memory, and NCCL
    // gathers device memory only. A parameter that is not floating (an integer table) keeps
    // its dtype: f32 would round it, and a load of the export would refuse it.
    Tensor src = z->master.defined()     ? z->master.to(z->shard.device())
                 : is_floating(z->dtype) ? z->shard.to(DType::f32)
                                         : z->shard;
    Tensor gathered = Tensor::empty({z->part.padded_numel()}, src.dtype(), src.device());
    if (comm.size() == 1)
      gathered.copy_(src);
    else
      comm.all_gather(gathered, src.contiguous());
    if (comm.rank() == 0)
      full[mp.param.impl()] = host(gathered.narrow(0, 0, z->part.numel).reshape(z->shape)).clone();
  }
  NamedTensors out;
  if (comm.rank() != 0) return out;
  for (const auto& [name, t] : nn::state_dict(engine.module())) {
    auto it = full.find(t.impl());
    Tensor v = it != full.end() ? it->second : host(t);
    out.emplace_back(name,
                     is_floating(v.dtype()) && v.dtype() != DType::f32 ? v.to(DType::f32) : v);
  }
  return out;
}

std::map<std::string, std::string> export_metadata(const Engine& engine) {
  // "pt": what transformers' from_pretrained requires of a safetensors file's format.
  return {{"format", "pt"}, {"step", std::to_string(engine.global_step())}};
}

void export_consolidated(Engine& engine, const std::string& path) {
  comm::Communicator& comm = engine.comm();
  const NamedTensors out = consolidated_state(engine);
  std::string err;
  if (comm.rank() == 0) {
    err = capture([&] {
      fs::path parent = fs::path(path).parent_path();
      if (!parent.empty()) fs::create_directories(parent);
      nn::save_safetensors(path, out, export_metadata(engine));
    });
  }
  agree(comm, "export_consolidated('" + path + "')", err);
}

}  // namespace zt::zero
