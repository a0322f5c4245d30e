// Loading sharded checkpoints: every rank reads and validates what it needs (re-slicing
// shards when the world size changed) before anything changes, the ranks agree, then the
// engine is written. Also verify_checkpoint, the same file checks without an engine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/plural.h"
#include "nn/json_text.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_meta.h"
#include "zero/gathered.h"

namespace zt::zero {

using namespace ckpt;

namespace {

// ---- old rank files, opened once, verified against meta.json

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

  // With `check_digest` false: the file exists and is a whole safetensors file (its header
  // read, its size checked), which reads no tensor data.
  static std::unique_ptr<nn::SafetensorsFile> open_verified(const fs::path& dir,
                                                            const std::string& name,
                                                            const json& meta,
                                                            bool check_digest = true) {
    fs::path p = dir / name;
    ZT_CHECK(fs::exists(p), "checkpoint '", dir.string(), "' is missing ", name,
             " (deleted, or copied incompletely); it cannot be loaded");
    auto f = std::make_unique<nn::SafetensorsFile>(p.string());
    const json& files = meta.at("files");
    ZT_CHECK(files.contains(name), "'", (dir / kMetaFile).string(), "' lists no digest for ", name);
    if (!check_digest) return f;
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
  std::vector<Tensor> buffers;          // per nn::persistent_buffers(module())
  // Buffers under buffers.sync none saved per rank at another world size: rank 0's taken.
  std::vector<std::string> rank0_buffers;
  optim::NamedTensors optim;
  // With the optimizer state: parameters frozen at save and trainable now (their state
  // starts afresh), and the reverse (their saved state is not taken).
  std::vector<std::string> unfrozen, frozen_now;
  CheckpointExtra extra;
  std::optional<LossScaler::State> scaler;  // fp16 checkpoints saved with it
  std::optional<bool> scaler_dynamic;       // whether that scale was dynamic, where saved
  std::optional<double> lr;                 // with the optimizer state, where saved
  // The engine's applied and fp16-skipped step counts (checkpoints saved with them).
  std::optional<std::pair<int64_t, int64_t>> engine_steps;
  uint64_t meta_hash = 0;  // of the meta.json this rank read: which checkpoint it is
};

// meta.json's `key` of `parent` (at `path`) read as T; missing or of another type is an
// error naming the file, the key and what it holds ("a number", `kind`).
template <typename T>
T field(const json& parent, const char* key, const char* path, const char* kind,
        const std::string& meta_path) {
  const auto it = parent.find(key);
  ZT_CHECK(it != parent.end(), "'", meta_path, "' is malformed: ", path, " is missing");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    ZT_FAIL("'", meta_path, "' is malformed: ", path, " is ", nn::json_brief(*it, 80), ", not ",
            kind);
  }
}

// Above any count a run reaches (2^62 steps, epochs, samples), with room to count on: a
// value past it could only come from damage, and would overflow where it is counted on.
constexpr int64_t kMaxCount = int64_t{1} << 62;

// A count in meta.json: a whole number from 0 to `max` (a damaged or hand-edited meta.json
// may hold anything: a negative optimizer step would turn Adam's bias correction into
// garbage, and an epoch near INT64_MAX would overflow the loader's next one).
int64_t count(const json& parent, const char* key, const char* path, const std::string& meta_path,
              int64_t max = kMaxCount) {
  const json& v = parent.at(key);
  ZT_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(max), "'",
           meta_path, "' is malformed: ", path, " is ", nn::json_brief(v, 80),
           ", not a whole number from 0 to ", max);
  return v.get<int64_t>();
}

// This rank's shards (and fp32 masters) of the partitioned parameters, and with `optim`
// their optimizer state, each re-sliced from the saved world size to this one.
void stage_partitioned(Engine& e, ShardFiles& files, const json& meta, bool optim, Staged& st) {
  const int rank = e.comm().rank(), W = meta.at("world_size").get<int>();
  std::map<std::string, const json*> layout;
  for (const json& t : meta.at("tensors"))
    if (t.at("kind") == "partitioned") layout[t.at("name").get<std::string>()] = &t;

  std::map<std::string, std::pair<Partition, Partition>> parts;  // name -> (old, now)
  for (const auto& mp : e.partitioned()) {
    const ZeroParam* z = zero_param(mp.param);
    const json& t = *layout.at(mp.name);
    Partition old = make_partition(z->part.numel, W);  // the meta's (check_layout)
    parts[mp.name] = {old, z->part};
    st.shards.push_back(reslice(files, "param/" + mp.name, old, z->part, rank, z->dtype));
    Tensor master;
    if (separate_master(mp))
      master = t.value("master", false)
                   ? reslice(files, "master/" + mp.name, old, z->part, rank, DType::f32)
                   : st.shards.back().to(DType::f32);
    st.masters.push_back(master);
  }
  if (!optim) return;

  // Optimizer state: the keys of one old rank file (all hold the same keys), each moment
  // re-sliced like its parameter.
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
}

// Replicated parameters, buffers, their optimizer state (with `optim`) and the app's state:
// every rank reads the same file (one filesystem); verify_replicas() proves they agree
// afterwards. Buffers under buffers.sync none come from this rank's own file where it holds
// them (saved at this world size), else from the replicated file (rank 0's).
void stage_replicated(Engine& e, const fs::path& dir, ShardFiles& files, const json& meta,
                      bool optim, Staged& st) {
  auto rep = ShardFiles::open_verified(dir, kReplicatedFile, meta);
  auto get = [&](const nn::SafetensorsFile& f, const std::string& key, const Tensor& like) {
    ZT_CHECK(f.contains(key), "'", f.path(), "' has no tensor '", key, "'");
    const nn::SafetensorsInfo& inf = f.info(key);
    ZT_CHECK(inf.shape == like.sizes() && inf.dtype == like.dtype(), "'", f.path(), "': tensor '",
             key, "' is ", dtype_name(inf.dtype), " ", shape_str(inf.shape), ", this model has ",
             dtype_name(like.dtype()), " ", shape_str(like.sizes()));
    return f.get(key);
  };
  for (const auto& [n, p] : e.replicated()) st.replicas.push_back(get(*rep, "param/" + n, p));
  const bool same_world = meta.at("world_size").get<int>() == e.comm().size();
  for (const auto& [n, b] : nn::persistent_buffers(e.module())) {
    const std::string key = "buffer/" + n;
    if (e.config().buffers.sync_for(n) != BufferSync::none) {
      st.buffers.push_back(get(*rep, key, b));
    } else if (same_world && files.file(e.comm().rank()).contains(key)) {
      st.buffers.push_back(get(files.file(e.comm().rank()), key, b));
    } else {
      if (!same_world && files.file(0).contains(key)) st.rank0_buffers.push_back(n);
      st.buffers.push_back(get(*rep, key, b));
    }
  }
  for (const std::string& k : rep->keys()) {
    if (optim && k.rfind("optim/", 0) == 0) st.optim.emplace_back(k.substr(6), rep->get(k));
    if (k.rfind("state/", 0) == 0) st.extra.state.emplace_back(k.substr(6), rep->get(k));
  }
}

// meta.json's counters and settings: the optimizer's step, the step, the config, the
// loader's position, the user's fields, the engine's step counts, the learning rate (with
// `optim`) and the fp16 loss scaler.
void stage_meta(const json& meta, const std::string& meta_path, bool optim, Staged& st) {
  auto count_of = [&](const json& parent, const char* key, const char* path,
                      int64_t max = kMaxCount) { return count(parent, key, path, meta_path, max); };
  st.optim.emplace_back(
      "step", scalar_tensor(static_cast<double>(count_of(meta, "optimizer_step", "optimizer_step")),
                            DType::i64));

  st.extra.step = field<int64_t>(meta, "step", "step", "an integer", meta_path);
  st.extra.config_yaml =
      field<std::string>(meta, "config_yaml", "config_yaml", "a string", meta_path);
  const json& loader = meta.at("loader");
  st.extra.loader_epoch = count_of(loader, "epoch", "loader.epoch");
  st.extra.loader_position = count_of(loader, "position", "loader.position");
  // A per-rank batch size past an int is no batch a run reads.
  st.extra.loader_batch = loader.contains("batch") ? count_of(loader, "batch", "loader.batch",
                                                              std::numeric_limits<int32_t>::max())
                                                   : 0;
  st.extra.loader_dataset_size =
      loader.contains("dataset_size") ? count_of(loader, "dataset_size", "loader.dataset_size") : 0;
  ZT_CHECK(
      st.extra.loader_dataset_size == 0 || st.extra.loader_position <= st.extra.loader_dataset_size,
      "'", meta_path, "' is malformed: loader.position ", st.extra.loader_position,
      " is past the end of its data set (loader.dataset_size ", st.extra.loader_dataset_size, ")");
  st.extra.user = field<std::map<std::string, std::string>>(meta, "user", "user",
                                                            "an object of strings", meta_path);
  st.extra.saved_world_size = meta.at("world_size").get<int>();
  if (const auto it = meta.find("engine_steps"); it != meta.end() && it->is_object()) {
    st.engine_steps = {count_of(*it, "applied", "engine_steps.applied"),
                       count_of(*it, "skipped", "engine_steps.skipped")};
  } else {  // saved before the counts were: the optimizer counted the applied steps
    const int64_t applied = count_of(meta, "optimizer_step", "optimizer_step");
    if (applied <= st.extra.step) st.engine_steps = {applied, st.extra.step - applied};
  }
  if (optim && meta.contains("lr")) {
    // Checked here: set_lr would refuse it only after the engine was half written.
    st.lr = field<double>(meta, "lr", "lr", "a number", meta_path);
    ZT_CHECK(std::isfinite(*st.lr) && *st.lr >= 0, "'", meta_path, "' is malformed: lr is ", *st.lr,
             ", not a learning rate (finite, >= 0)");
  }
  if (const auto it = meta.find("loss_scaler"); it != meta.end() && it->is_object()) {
    const double scale = field<double>(*it, "scale", "loss_scaler.scale", "a number", meta_path);
    const int64_t hysteresis = count_of(*it, "hysteresis", "loss_scaler.hysteresis");
    // A hysteresis of 0 would count down past 1 and never halve the scale again.
    ZT_CHECK(std::isfinite(scale) && scale > 0 && hysteresis >= 1 &&
                 hysteresis <= std::numeric_limits<int>::max(),
             "'", meta_path, "' is malformed: loss_scaler holds scale ", scale, " and hysteresis ",
             hysteresis, " (a finite scale > 0 and a hysteresis >= 1 are needed)");
    if (it->contains("dynamic"))
      st.scaler_dynamic =
          field<bool>(*it, "dynamic", "loss_scaler.dynamic", "true or false", meta_path);
    const int64_t iteration = count_of(*it, "iteration", "loss_scaler.iteration");
    // -1 (none yet) or an iteration so far: the scaler counts the iterations since it.
    const json last =
        field<json>(*it, "last_overflow", "loss_scaler.last_overflow", "an integer", meta_path);
    ZT_CHECK(last.is_number_integer() &&
                 (last.is_number_unsigned()
                      ? last.get<uint64_t>() <= static_cast<uint64_t>(iteration)
                      : last.get<int64_t>() >= -1 && last.get<int64_t>() <= iteration),
             "'", meta_path, "' is malformed: loss_scaler.last_overflow is ",
             nn::json_brief(last, 80), ", not an integer from -1 to loss_scaler.iteration (",
             iteration, ")");
    st.scaler =
        LossScaler::State{scale, static_cast<int>(hysteresis), iteration, last.get<int64_t>()};
  }
}

// The optimizer that wrote the state is the engine's kind: Adam's moments under AdamW
// would change the weight decay from L2 to decoupled, and a state without moments (SGD)
// would make Adam's first step about three times too large. Checkpoints saved before the
// type was recorded are taken as they are.
void check_optimizer_kind(Engine& e, const fs::path& dir, const json& meta,
                          const std::string& meta_path) {
  const auto it = meta.find("optimizer");
  if (it == meta.end()) return;
  ZT_CHECK(it->is_object(), "'", meta_path, "' is malformed: optimizer is ",
           nn::json_brief(*it, 80), ", not an object");
  const std::string saved =
      field<std::string>(*it, "type", "optimizer.type", "a string", meta_path);
  const std::string mine = e.optimizer().kind();
  ZT_CHECK(saved == mine, "checkpoint '", dir.string(), "' holds the state of optimizer ", saved,
           ", but this engine's optimizer is ", mine, ": resume with ", saved,
           " (and its hyper-parameters in ", kMetaFile,
           "), or load with optimizer_state = false to take the model only");
}

// The optimizer state is the trainable parameters'. A parameter frozen at save has none: the
// optimizer starts it afresh. One frozen now takes none: its saved state is left unread (the
// optimizer would refuse the keys). Either is a resume under a freezing schedule; apply()
// names them in a note. Checkpoints saved before `trainable` was recorded are left to the
// optimizer's check.
void stage_freeze_changes(const json& saved, const json& mine, Staged& st) {
  std::map<std::string, bool> was;
  for (const json& d : saved)
    if (const auto it = d.find("trainable"); it != d.end() && it->is_boolean())
      was[d.at("name").get<std::string>()] = it->get<bool>();
  for (const json& d : mine) {
    const auto it = was.find(d.at("name").get<std::string>());
    if (!d.contains("trainable") || it == was.end() || it->second == d.at("trainable").get<bool>())
      continue;
    (it->second ? st.frozen_now : st.unfrozen).push_back(it->first);
  }
  const std::set<std::string> frozen(st.frozen_now.begin(), st.frozen_now.end());
  std::erase_if(st.optim, [&](const auto& kv) {
    return kv.first.find('.') != std::string::npos && frozen.count(state_owner(kv.first)) > 0;
  });
}

// Validates everything a load of `dir` will write and reads it, before the engine is
// touched. With optim false the optimizer state is neither read nor checked.
Staged stage(Engine& e, const fs::path& dir, bool optim) {
  json meta = read_meta(dir);
  std::string meta_path = (dir / kMetaFile).string();
  Staged st;
  st.meta_hash = meta_hash(meta);
  try {
    check_layout(meta, meta_path);
    const json mine = describe(e);
    std::string diff = first_difference(meta.at("tensors"), mine);
    ZT_CHECK(diff.empty(), "checkpoint '", dir.string(),
             "' was saved from a different model or precision (another model config, "
             "another train.dtype / bf16 / fp16 section, or another `replicated:` list?): ",
             diff);
    if (optim) check_optimizer_kind(e, dir, meta, meta_path);
    ShardFiles files(dir, meta);
    stage_partitioned(e, files, meta, optim, st);
    stage_replicated(e, dir, files, meta, optim, st);
    stage_meta(meta, meta_path, optim, st);
    if (optim) stage_freeze_changes(meta.at("tensors"), mine, st);
    st.extra.dir = dir.string();
  } catch (const json::exception& ex) {
    ZT_FAIL("'", meta_path, "' is malformed: ", ex.what());
  }
  return st;
}

// A dynamic loss scale goes on from where it was saved. A fixed loss_scale in the config
// wins: it is what the user asked for, and a restored scale would stay fixed at the saved
// value. A checkpoint saved before the mode was recorded counts as dynamic.
void restore_loss_scaler(Engine& engine, const Staged& st, bool tell) {
  LossScaler& scaler = engine.loss_scaler();
  if (!st.scaler || !scaler.active()) return;
  const bool saved_dynamic = st.scaler_dynamic.value_or(true);
  if (saved_dynamic && scaler.dynamic()) scaler.restore(*st.scaler);
  if (tell && st.scaler_dynamic && saved_dynamic != scaler.dynamic())
    std::fprintf(stderr,
                 "zt: load_checkpoint('%s'): note: the checkpoint's fp16 loss scale %s %g, "
                 "the config's %s %g; going on with the config's\n",
                 st.extra.dir.c_str(), saved_dynamic ? "was dynamic, at" : "was fixed at",
                 st.scaler->scale, scaler.dynamic() ? "is dynamic, from" : "is fixed at",
                 scaler.scale());
}

}  // namespace

json ckpt::check_complete(const fs::path& dir, bool digests) {
  json meta = read_meta(dir);
  const std::string meta_path = (dir / kMetaFile).string();
  try {
    check_layout(meta, meta_path);
    for (const auto& [name, want] : meta.at("files").items())
      (void)ShardFiles::open_verified(dir, name, meta, digests);
  } catch (const json::exception& ex) {
    ZT_FAIL("'", meta_path, "' is malformed: ", ex.what());
  }
  return meta;
}

void verify_checkpoint(const std::string& dir) {
  (void)check_complete(dir, /*digests=*/true);
}

CheckpointExtra load_checkpoint(Engine& engine, const std::string& dir_or_root,
                                bool optimizer_state) {
  comm::Communicator& comm = engine.comm();
  comm::CollectiveLabel label("load_checkpoint");
  const std::string what = "load_checkpoint('" + dir_or_root + "')";
  TimelineSpan span(engine.timeline(), Track::kCheckpoint, "load " + dir_or_root);
  autograd::NoGradGuard ng;

  // 1. Rank 0 names the folder; every rank reads and validates it. Nothing in the engine
  // changes yet.
  std::string dir;
  const std::string not_found =
      comm.rank() == 0 ? capture([&] { dir = find_checkpoint(dir_or_root); }) : "";
  dir = comm.all_gather_bytes(dir)[0];
  agree(comm, what, not_found);
  Staged st;
  agree(comm, what, capture([&] { st = stage(engine, dir, optimizer_state); }));
  // Rank 0 named the folder, but each rank opened it from its own working directory and
  // filesystem: a relative path, or a copy of the checkpoints on each machine, can show the
  // ranks different checkpoints there, each rank's shards of its own. meta.json (the step,
  // the config, every file's digest) tells them apart.
  const std::vector<uint64_t> metas = comm.all_gather_object<uint64_t>(st.meta_hash);
  for (size_t r = 1; r < metas.size(); ++r)
    if (metas[r] != metas[0])
      throw comm::AgreedError(
          what + " failed: rank " + std::to_string(r) + " read another checkpoint at '" + dir +
              "' than rank 0 (their meta.json differ: another save, step or run); every rank "
              "must read the same one: start the ranks in one working directory, or give a "
              "path on a filesystem they all share",
          comm.rank());

  // 2. The optimizer checks keys and shapes before it changes anything; ranks that
  // succeeded roll back if another rank failed.
  if (optimizer_state) {
    optim::NamedTensors before;
    for (const auto& [k, t] : engine.optimizer().state_dict()) before.emplace_back(k, t.clone());
    std::string err = capture([&] { engine.optimizer().load_state_dict(st.optim); });
    std::string all = capture([&] { agree(comm, what, err); });
    if (!all.empty()) {
      if (err.empty()) engine.optimizer().load_state_dict(before);
      throw comm::AgreedError(all + "\n  (was the checkpoint saved with the same optimizer?)",
                              comm.rank());  // agree() told every rank the same
    }
  }

  // 3. Apply. Gradients of a window under way were computed from the old weights: they
  // go. Master shards first; refresh_from_master() rewrites low-precision shards.
  if (!engine.at_window_start()) engine.discard_gradients();
  const auto& ps = engine.partitioned();
  for (size_t i = 0; i < ps.size(); ++i) {
    zero_param(ps[i].param)->shard.copy_(st.shards[i]);
    if (st.masters[i].defined()) zero_param(ps[i].param)->master.copy_(st.masters[i]);
  }
  const auto& reps = engine.replicated();
  for (size_t i = 0; i < reps.size(); ++i) reps[i].second.copy_(st.replicas[i]);
  auto buffers = nn::persistent_buffers(engine.module());
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(st.buffers[i]);
  if (st.engine_steps)
    engine.set_step_counts(st.engine_steps->first, st.engine_steps->second);
  else
    engine.set_global_step(st.extra.step);
  restore_loss_scaler(engine, st, comm.rank() == 0);
  if (comm.rank() == 0 && !st.rank0_buffers.empty()) {
    const std::string names = list_names(st.rank0_buffers, 1);
    std::fprintf(stderr,
                 "zt: load_checkpoint('%s'): note: the buffers under buffers.sync none (%s) were "
                 "saved per rank on %s; on %s every rank starts from rank 0's\n",
                 st.extra.dir.c_str(), names.c_str(),
                 counted(st.extra.saved_world_size, "rank").c_str(),
                 counted(comm.size(), "rank").c_str());
  }
  if (comm.rank() == 0 && !st.unfrozen.empty())
    std::fprintf(stderr,
                 "zt: load_checkpoint('%s'): note: %s, frozen when it was saved, now trainable: "
                 "their optimizer state starts afresh\n",
                 st.extra.dir.c_str(), list_names(st.unfrozen, 3).c_str());
  if (comm.rank() == 0 && !st.frozen_now.empty())
    std::fprintf(stderr,
                 "zt: load_checkpoint('%s'): note: %s, trainable when it was saved, now frozen: "
                 "their saved optimizer state is not taken\n",
                 st.extra.dir.c_str(), list_names(st.frozen_now, 3).c_str());
  if (st.lr) engine.set_lr(*st.lr);
  engine.refresh_from_master();
  std::vector<Tensor> loaded;
  for (const auto& mp : ps) loaded.push_back(mp.param);
  for (const auto& [n, p] : reps) loaded.push_back(p);
  for (const auto& [n, b] : buffers) loaded.push_back(b);
  GatheredParameters::note_loaded(loaded);
  engine.verify_replicas();
  return st.extra;
}

}  // namespace zt::zero
