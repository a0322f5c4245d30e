// vqtok encode / decode / export, and loading the frozen tokenizer (eval: eval.cpp). For
// inference the model is a full replica on every rank (zero::Replicated, requires_grad off,
// eval mode): no gathers, no hooks. Work is split by batch: batch i runs on rank i % world, a
// round of `world` batches at a time; each round is assembled on every rank by all-reduces
// (each rank fills its batch of zeroed tensors) and rank 0 writes it out.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <set>

#include "apps/common/output_paths.h"
#include "apps/common/run_checks.h"
#include "apps/common/saved_run.h"
#include "apps/vqtok/decode_folder.h"
#include "apps/vqtok/export_files.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/ops.h"
#include "core/plural.h"
#include "core/text_file.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/load.h"

namespace zt::vqtok {

namespace {

namespace fs = std::filesystem;

// Items to encode: a dataset whose clips are (T, 3, H, W); `images` keeps frame 0 only.
struct Source {
  std::shared_ptr<const data::Dataset> dataset;
  bool images = false;
  std::string what;
};

// A single image file as a one-item dataset, brought to o's size as ImageFolder would.
class OneImage : public data::Dataset {
 public:
  OneImage(std::string path, const data::ImageFolderOptions& o) : path_(std::move(path)) {
    const data::Image img = data::load_image(path_);
    clip_ = data::image_to_tensor(data::fit_image(img, o.height, o.width, o.filter, o.fit))
                .unsqueeze(0);
  }
  int64_t size() const override { return 1; }
  data::Sample get(int64_t) const override { return {clip_, 0, 0}; }
  std::string describe() const override { return "image " + path_; }

 private:
  std::string path_;
  Tensor clip_;
};

// Whether `path` names a .npy file, whatever the case of its extension (X.NPY), as image
// files are told by theirs (data::is_image_file).
bool is_npy_path(const std::string& path) {
  return data::extension_of(path) == ".npy";
}

// Whether the folder `dir` holds a .npy file (in it or below).
bool holds_npy(const std::string& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec))
    if (is_npy_path(it->path().string())) return true;
  return false;
}

Source open_source(const config::AppConfig& cfg, const EncodeOptions& o) {
  Source s;
  if (o.input.empty()) {
    s.dataset = data::make_dataset(cfg.data, o.eval_split);
    s.what = o.eval_split ? "eval split: " + data::describe_eval(cfg.data, *s.dataset)
                          : "train split: " + s.dataset->describe();
    return s;
  }
  ZT_CHECK(fs::exists(o.input), "encode: input '", o.input,
           "' does not exist; pass a .npy of clips or images, an image file or a folder of images");
  data::ImageFolderOptions io = data::image_options(cfg.data);  // data.resize and data.fit too
  io.frames = 1;
  if (fs::is_directory(o.input)) {
    try {
      s.dataset = std::make_shared<data::ImageFolder>(o.input, io);
    } catch (const Error&) {
      // A folder of arrays: encode reads arrays one file at a time.
      ZT_CHECK(!holds_npy(o.input), "encode: --input '", o.input,
               "' is a folder, which encode reads as images, and it holds .npy arrays but no "
               "image; pass each .npy file as --input itself (clips (N, T, 3, H, W) or images "
               "(N, 3, H, W)), one encode per file");
      throw;
    }
    s.images = true;
  } else if (is_npy_path(o.input)) {
    auto arr = std::make_shared<data::NpyArray>(o.input, cfg.data.frames);
    s.images = arr->header().shape.size() == 4;
    s.dataset = arr;
  } else {
    ZT_CHECK(data::is_image_file(o.input), "encode: input '", o.input,
             "' is neither .npy, an image file (.png .jpg .jpeg .bmp .tga) nor a folder");
    s.dataset = std::make_shared<OneImage>(o.input, io);
    s.images = true;
  }
  s.what = s.dataset->describe();
  return s;
}

// The image file each row was read from, by the index its Sample reported (an image
// folder with data.on_bad_image: skip reads the next decodable file in a bad one's place),
// for an image folder or a subset of one (such as its eval split: a Sample's index is the
// folder's); empty for other datasets. read_from: (N) i64.
std::vector<std::string> item_files(const data::Dataset& ds, const Tensor& read_from) {
  const auto* subset = dynamic_cast<const data::Subset*>(&ds);
  const auto* folder = dynamic_cast<const data::ImageFolder*>(subset ? &subset->base() : &ds);
  std::vector<std::string> out;
  for (int64_t i = 0; folder && i < read_from.numel(); ++i)
    out.push_back(folder->files()[static_cast<size_t>(read_from.data<int64_t>()[i])]);
  return out;
}

// `file` as a line of the .files.txt list: as it is, or, where it holds a line break or
// starts with a double quote, in double quotes with \\, \", \n and \r escaped.
std::string list_line(const std::string& file) {
  if (file.find_first_of("\n\r") == std::string::npos && file.rfind('"', 0) != 0) return file;
  std::string q = "\"";
  for (const char c : file)
    q += c == '\n'   ? "\\n"
         : c == '\r' ? "\\r"
         : c == '"'  ? "\\\""
         : c == '\\' ? "\\\\"
                     : std::string(1, c);
  return q + "\"";
}

// Items [b * batch, min(n, (b + 1) * batch)) stacked: clips (B, T, 3, H, W) or images
// (B, 3, H, W). `read_from` (optional, (N) i64) receives the dataset index each was read
// from (Sample::index) at its row.
Tensor load_batch(const Source& s, int64_t b, int64_t batch, int64_t n,
                  Tensor* read_from = nullptr) {
  std::vector<Tensor> xs;
  for (int64_t i = b * batch; i < std::min(n, (b + 1) * batch); ++i) {
    const data::Sample sample = s.dataset->get(i);
    xs.push_back(s.images ? sample.clip.select(0, 0) : sample.clip);
    if (read_from) read_from->data<int64_t>()[i] = sample.index;
  }
  return stack(xs, 0);
}

// Sums `full` over ranks: each rank wrote only its own batches, the rest is zero.
void assemble(const Tensor& full, comm::Communicator& comm) {
  if (comm.size() == 1) return;
  Tensor flat = full.view({full.numel()});
  app::all_reduce_host(comm, flat, comm::ReduceOp::kSum);  // through the GPU under NCCL
}

// Items [0, n) a round of `batch` x world at a time. In each round rank r computes its
// batch, items [first + r x batch, ...) (none past n): `mine(i, count)` returns items
// [i, i + count) stacked. The round, assembled on every rank (each rank fills its batch
// of zeros `rows(len)` of `dtype`), then goes to `take(first, round)` on every rank;
// false from take ends the rounds (rank 0's error then stops the other ranks). No rank
// holds more than a round.
template <typename Rows, typename Mine, typename Take>
bool in_rounds(int64_t n, int64_t batch, DType dtype, comm::Communicator& comm, const Rows& rows,
               const Mine& mine, const Take& take) {
  const int64_t round = batch * comm.size();
  for (int64_t first = 0; first < n; first += round) {
    const int64_t len = std::min(round, n - first), at = comm.rank() * batch;
    Tensor chunk = zeros(rows(len), dtype);
    if (at < len) {
      const int64_t count = std::min(batch, len - at);
      chunk.narrow(0, at, count).copy_(mine(first + at, count));
    }
    assemble(chunk, comm);
    if (!take(first, chunk)) return false;
  }
  return true;
}

// Builds cfg's model partitioned on `device` with an engine, loads checkpoint `dir`'s
// model (not its optimizer state: train.optimizer need not match the run's); returns both.
// `dtype_advice`: what the command offers beside setting train.dtype (check_checkpoint_app).
std::pair<std::shared_ptr<vq::VqModel>, std::unique_ptr<zero::Engine>> load_engine(
    const config::AppConfig& cfg, const std::string& dir, comm::Communicator& comm,
    const std::string& dtype_advice, Device device = Device::cpu()) {
  app::check_checkpoint_app(dir, "vqtok", comm, &cfg, dtype_advice);
  std::shared_ptr<vq::VqModel> model = build_model(cfg, device, comm);
  auto engine = app::make_engine(model, cfg, comm, app::EngineUse::reading_weights);
  zero::load_checkpoint(*engine, dir, /*optimizer_state=*/false);
  return {model, std::move(engine)};
}

}  // namespace

// A vqgpt export (tokenizer.* beside gpt.*): its tokenizer, under the tokenizer's own
// names; any other state as it is.
static nn::NamedTensors tokenizer_of_vqgpt_export(nn::NamedTensors state) {
  auto under = [](const std::string& k, const char* prefix) { return k.rfind(prefix, 0) == 0; };
  const bool gpt = std::any_of(state.begin(), state.end(),
                               [&](const auto& kv) { return under(kv.first, "gpt."); });
  if (!gpt) return state;
  nn::NamedTensors tok;
  for (auto& [k, t] : state)
    if (under(k, "tokenizer.")) tok.emplace_back(k.substr(10), std::move(t));
  return tok.empty() ? state : tok;
}

std::shared_ptr<vq::VqModel> frozen_replica(const config::ModelConfig& model_cfg, Device device,
                                            comm::Communicator& comm) {
  manual_seed(0);
  std::shared_ptr<vq::VqModel> model;
  {
    // Rank 0's values broadcast at registration, each tensor moved to the device first.
    zero::Replicated replicas(comm, device);
    model = std::make_shared<vq::VqModel>(model_cfg);
  }
  model->requires_grad_(false);
  model->eval();
  return model;
}

std::shared_ptr<vq::VqModel> load_frozen_model(const config::AppConfig& cfg,
                                               const std::string& source, comm::Communicator& comm,
                                               Device device) {
  const std::string path = source.empty() ? checkpoint_root(cfg) : source;
  ZT_CHECK(fs::exists(path), "no weights at '", path, "'",
           source.empty() ? " (no --weights given: the run's output_dir/checkpoints); train "
                            "first (vqtok train --config ...), or"
                          : ";",
           " pass --weights with an exported .safetensors file (vqtok export) or a "
           "checkpoint directory (a run's output_dir/checkpoints)");
  nn::NamedTensors state;
  if (fs::is_directory(path)) {
    ZT_CHECK(zero::has_checkpoint(path), "'", path,
             "' holds no checkpoint (no meta.json and no 'latest')", app::run_folder_hint(path),
             "; train first, or pass an exported .safetensors file");
    // Load the sharded checkpoint into a partitioned model, then gather it whole once:
    // the fp32 masters, as an export writes them (not a 16-bit run's rounded storage).
    auto [sharded, engine] = load_engine(
        cfg, path, comm, ", or pass --weights an exported .safetensors file of it (fp32)", device);
    state = zero::consolidated_state(*engine);
  } else if (comm.rank() == 0) {
    state = nn::load_safetensors(path);  // zero::load_state_dict reads rank 0's only
    state = tokenizer_of_vqgpt_export(std::move(state));
    std::vector<std::string> keys;
    for (const auto& kv : state) keys.push_back(kv.first);
    if (vq::detect_naming(keys) == vq::KeyNaming::transformers) state = vq::to_baai(state);
  }

  std::shared_ptr<vq::VqModel> model = frozen_replica(cfg.model, device, comm);
  try {
    zero::load_state_dict(*model, state, comm, /*strict=*/true, /*src=*/0);
  } catch (const comm::AbortedError&) {
    throw;                    // another rank's failure, already named
  } catch (const Error& e) {  // the same verdict on every rank: which file it is about
    ZT_FAIL("the weights in '", path, "' do not fit this model: ", e.what());
  }
  // Every rank holds the same replica, so every rank reaches the same verdict.
  const std::string bad = app::first_nonfinite(*model);
  ZT_CHECK(bad.empty(), "the weights in '", path,
           "' hold non-finite values (NaN or inf), first in ", bad,
           "; they cannot give meaningful results: use an earlier checkpoint");
  return model;
}

EncodeResult encode(const config::AppConfig& cfg, const EncodeOptions& o,
                    comm::Communicator& comm) {
  app::check_same_options({{"--weights", o.weights},
                           {"--input", o.input},
                           {"--split", o.input.empty() ? (o.eval_split ? "eval" : "train") : ""},
                           {"--limit", std::to_string(o.limit)},
                           {"--batch", std::to_string(batch_of(cfg, o.batch))},
                           {"--verify", o.verify ? "true" : "false"}},
                          comm, "vqtok encode");
  // Output and input errors before the weights are read and anything is encoded.
  std::vector<std::string> inputs = app::config_inputs(cfg);
  inputs.insert(inputs.end(), {o.weights, o.input});
  app::check_on_rank0(comm, [&] {
    app::check_output_writable("encode -o", o.out, inputs);
    // Its file list beside it, which every encode replaces (or removes: codes of an array).
    app::check_output_file("encode -o (its file list)", o.out + ".files.txt", inputs);
  });
  Source src = open_source(cfg, o);
  // The same option text can name other data on another rank (a relative --input or
  // data.path under another working directory): each rank would encode its own rows.
  app::check_same_data(*src.dataset, comm, "vqtok encode");
  auto model = load_frozen_model(cfg, o.weights, comm);
  const int64_t n = o.limit > 0 ? std::min(o.limit, src.dataset->size()) : src.dataset->size();
  ZT_CHECK(n > 0, "encode: ", src.what, " holds no items");
  const int64_t batch = batch_of(cfg, o.batch);
  const int world = comm.size(), rank = comm.rank();
  if (rank == 0 && !o.quiet)
    std::printf("encode: %s from %s, %lld per batch on %s\n",
                counted(n, src.images ? "image" : "clip").c_str(), src.what.c_str(),
                static_cast<long long>(batch), counted(world, "rank").c_str());

  autograd::NoGradGuard no_grad;
  EncodeResult res;
  res.images = src.images;
  if (o.verify) {
    // Every rank encodes batch 0; frozen replicas must give the same ids everywhere.
    Tensor codes = model->encode(load_batch(src, 0, batch, n)).codes;
    res.verify_hashes = comm.all_gather_object<uint64_t>(zero::tensor_hash(codes));
    for (int r = 1; r < world; ++r)
      ZT_CHECK(res.verify_hashes[static_cast<size_t>(r)] == res.verify_hashes[0],
               "encode --verify: rank ", r,
               " produced different token ids than rank 0 for the "
               "first batch; the replicas differ (weights or buffers not broadcast)");
    if (rank == 0 && !o.quiet)
      std::printf("verify: %s produced identical tokens for batch 0\n",
                  counted(world, "rank").c_str());
  }
  // The ids' shape from the first item: clips (T, 3, H, W) -> (T', H/s, W/s), T' as
  // training encodes them (ModelConfig::code_frames: 1 for a one-frame clip).
  const Shape item = src.dataset->get(0).clip.sizes();
  const int64_t sf = cfg.model.spatial_factor(), tf = cfg.model.temporal_downsample_factor;
  const int64_t code_frames = cfg.model.code_frames(item[0]);
  ZT_CHECK(
      item[2] % sf == 0 && item[3] % sf == 0 && (src.images || code_frames > 0),
      "encode: items of ", src.what, " are ", shape_str(item),
      " (T, 3, H, W); H and W must be "
      "multiples of ",
      sf, (src.images ? "" : " and T 1 or a multiple of "), (src.images ? "" : std::to_string(tf)),
      is_npy_path(o.input) ? " (an array is encoded at its own size: re-save it at such a size)"
                           : " (set data.height/width/frames)");
  const Shape row = src.images ? Shape{item[2] / sf, item[3] / sf}
                               : Shape{code_frames, item[2] / sf, item[3] / sf};
  auto rows = [&](int64_t count) {
    Shape s = row;
    s.insert(s.begin(), count);
    return s;
  };
  // A round at a time (in_rounds); rank 0 appends each to the file. With an output file no
  // rank holds more than a round's codes; without one, the codes of every item are kept and
  // returned.
  if (o.out.empty()) res.codes = zeros(rows(n), DType::i64);
  Tensor read_from = zeros({n}, DType::i64);
  auto last_note = std::chrono::steady_clock::now();
  // Rank 0 writes each round to `f` (when given); false at a write that failed.
  auto encode_rounds = [&](std::FILE* f) {
    auto encoded = [&](int64_t i, int64_t) {
      return model->encode(load_batch(src, i / batch, batch, n, &read_from)).codes;
    };
    return in_rounds(n, batch, DType::i64, comm, rows, encoded, [&](int64_t first, Tensor chunk) {
      const int64_t len = chunk.size(0);
      assemble(read_from.narrow(0, first, len), comm);
      if (res.codes.defined()) res.codes.narrow(0, first, len).copy_(chunk);
      if (f && !write_all(f, chunk.data_ptr(), chunk.numel() * sizeof(int64_t))) return false;
      if (rank == 0 && !o.quiet && first + len < n &&
          std::chrono::steady_clock::now() - last_note > std::chrono::seconds(10)) {
        last_note = std::chrono::steady_clock::now();
        std::printf("encode: %lld of %lld encoded\n", static_cast<long long>(first + len),
                    static_cast<long long>(n));
        std::fflush(stdout);
      }
      return true;
    });
  };
  if (rank != 0 || o.out.empty()) {
    encode_rounds(nullptr);
    return res;
  }
  app::make_parent_folders(o.out);
  remove_exited_temporaries(o.out);  // those of an encode killed before its rename
  // Images from a folder: which file each row holds, one path per line. An earlier encode's
  // list goes just before its codes are replaced, so that no crash leaves it beside codes it
  // does not describe, and only once the new codes are on disk (a write that fails, as the
  // last flush does on a full disk, leaves both). The temporary file is this process's own:
  // another encode into the same file writes its own.
  const std::string list = o.out + ".files.txt";
  write_file_atomically(
      o.out,
      [&](std::FILE* f) {
        const std::string header = data::npy_header(DType::i64, rows(n));
        if (!write_all(f, header.data(), header.size()) || !encode_rounds(f) ||
            std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
          return false;
        fs::remove(list);
        return true;
      },
      std::to_string(::getpid()));
  if (!o.quiet) std::printf("wrote %s: int64 %s\n", o.out.c_str(), shape_str(rows(n)).c_str());
  const std::vector<std::string> files = item_files(*src.dataset, read_from);
  if (!files.empty()) {
    std::string text;
    for (const std::string& file : files) text += list_line(file) + "\n";
    write_text_atomically(list, text);
    if (!o.quiet) std::printf("wrote %s: the image file of each row\n", list.c_str());
  }
  return res;
}

Tensor decode(const config::AppConfig& cfg, const DecodeOptions& o, comm::Communicator& comm) {
  ZT_CHECK(!o.codes.empty(), "decode: pass --codes with a .npy of token ids (from vqtok encode)");
  app::check_same_options({{"--weights", o.weights},
                           {"--codes", o.codes},
                           {"--batch", std::to_string(batch_of(cfg, o.batch))}},
                          comm, "vqtok decode");
  std::vector<std::string> inputs = app::config_inputs(cfg);
  inputs.insert(inputs.end(), {o.weights, o.codes});
  app::check_on_rank0(comm, [&] { app::check_output_folder("decode -o", o.out_dir, inputs); });
  Tensor codes = data::load_npy(o.codes);  // uint8 ids load as i32
  // Every rank decodes its share of the rows it read: one --codes path that holds other
  // ids on another rank (another working directory) would mix both files' frames.
  app::check_same_input("--codes",
                        detail::cat("'", o.codes, "' holding ", dtype_name(codes.dtype()), " ",
                                    shape_str(codes.sizes()), ", hash ", std::hex,
                                    zero::tensor_hash(codes.contiguous())),
                        comm, "vqtok decode");
  ZT_CHECK(codes.dtype() == DType::i64 || codes.dtype() == DType::i32, "decode: '", o.codes,
           "' holds ", dtype_name(codes.dtype()), "; token ids must be int64, int32 or uint8");
  ZT_CHECK(codes.dim() == 3 || codes.dim() == 4, "decode: '", o.codes, "' has shape ",
           shape_str(codes.sizes()), "; expected (N, T', h, w) clips or (N, h, w) images");
  ZT_CHECK(codes.numel() > 0, "decode: '", o.codes, "' holds no token ids (shape ",
           shape_str(codes.sizes()), ")");
  codes = codes.to(DType::i64).contiguous();
  const int64_t k = cfg.model.codebook_size;
  const double lo = min(codes).item(), hi = max(codes).item();
  ZT_CHECK(lo >= 0 && hi < static_cast<double>(k), "decode: token ids in '", o.codes, "' span [",
           std::fixed, std::setprecision(0), lo, ", ", hi, "] but the codebook has ", k,
           " entries (model.codebook_size)");
  // The output folder before the weights: a refused folder costs no decoding.
  std::optional<DecodeFolder> folder;
  if (!o.out_dir.empty())
    app::decided_by_rank0(comm, [&] {  // on rank 0, which writes the files
      folder.emplace(o.out_dir);
      return std::string();
    });
  auto model = load_frozen_model(cfg, o.weights, comm);
  const int64_t n = codes.size(0), batch = batch_of(cfg, o.batch);
  autograd::NoGradGuard no_grad;
  const int64_t s = cfg.model.spatial_factor(), f = cfg.model.temporal_downsample_factor;
  const bool images = codes.dim() == 3;
  // Codes of one-frame clips (data.frames: 1, encoded as images) decode to that one frame,
  // as training reconstructs them.
  const int64_t clip_frames =
      images ? 0 : (cfg.data.frames == 1 && codes.size(1) == 1 ? 1 : codes.size(1) * f);
  auto shape_of = [&](int64_t clips) {
    return images ? Shape{clips, 3, codes.size(1) * s, codes.size(2) * s}
                  : Shape{clips, clip_frames, 3, codes.size(2) * s, codes.size(3) * s};
  };
  // Clip i's files: (name, frame index; -1 for an image).
  auto files_of = [&](int64_t i) {
    std::vector<std::pair<std::string, int64_t>> out;
    char name[64];
    if (images) {
      std::snprintf(name, sizeof name, "image_%06lld.png", static_cast<long long>(i));
      out.emplace_back(name, -1);
    }
    for (int64_t t = 0; t < clip_frames; ++t) {
      std::snprintf(name, sizeof name, "clip_%06lld_frame_%02lld.png", static_cast<long long>(i),
                    static_cast<long long>(t));
      out.emplace_back(name, t);
    }
    return out;
  };
  if (folder) {  // rank 0
    std::set<std::string> planned = {"grid.png"};
    for (int64_t i = 0; i < n; ++i)
      for (const auto& file : files_of(i)) planned.insert(file.first);
    folder->begin(planned);
  }
  // A round at a time (in_rounds); rank 0 writes its files before the next. With an output
  // folder no rank holds more than a round's frames beside the grid's first 8 clips;
  // without one, the frames of every clip are kept and returned.
  const int64_t grid = std::min<int64_t>(n, 8);
  Tensor frames = zeros(shape_of(o.out_dir.empty() ? n : grid));
  auto decoded = [&](int64_t i, int64_t count) {
    Tensor out = model->decode_codes(codes.narrow(0, i, count));
    return images ? out : out.narrow(1, 0, clip_frames);
  };
  in_rounds(n, batch, DType::f32, comm, shape_of, decoded, [&](int64_t first, Tensor chunk) {
    const int64_t len = chunk.size(0);
    if (folder)
      for (int64_t i = first; i < first + len; ++i)
        for (const auto& [file, t] : files_of(i)) {
          const Tensor clip = chunk.select(0, i - first);
          data::save_png(folder->staged(file),
                         data::tensor_to_image(t < 0 ? clip : clip.select(0, t)));
        }
    const int64_t keep = std::min(len, frames.size(0) - first);
    if (keep > 0) frames.narrow(0, first, keep).copy_(chunk.narrow(0, 0, keep));
    return true;
  });
  if (folder) {  // rank 0
    data::save_png(folder->staged("grid.png"), data::make_grid({frames.narrow(0, 0, grid)}));
    const int64_t removed = folder->finish();
    if (removed > 0 && !o.quiet)
      std::printf("decode: removed %s of the earlier decode into %s\n",
                  counted(removed, "file").c_str(), o.out_dir.c_str());
    if (!o.quiet)
      std::printf("decode: wrote %s to %s (and grid.png; %s lists them)\n",
                  counted(n, images ? "image" : "clip").c_str(), o.out_dir.c_str(),
                  kDecodeManifest);
  }
  return frames;
}

void export_model(const config::AppConfig& cfg, const std::string& checkpoint,
                  const std::string& out, comm::Communicator& comm, bool quiet,
                  vq::KeyNaming naming) {
  ZT_CHECK(!out.empty(), "export: pass --out with the .safetensors file to write");
  const bool hf = naming == vq::KeyNaming::transformers;
  app::check_same_options(
      {{"--checkpoint", checkpoint}, {"--format", hf ? "transformers" : "baai"}}, comm,
      "vqtok export");
  const std::string dir = checkpoint.empty() ? checkpoint_root(cfg) : checkpoint;
  std::vector<std::string> inputs = app::config_inputs(cfg);
  inputs.push_back(dir);
  app::check_on_rank0(comm, [&] { app::check_output_writable("export -o", out, inputs); });
  const fs::path json_path = fs::path(out).parent_path() / "config.json";
  if (hf) {  // config.json beside the weights is an output too, and not theirs
    std::error_code ec;
    const auto real = [&](const fs::path& p) {
      return fs::weakly_canonical(fs::absolute(write_target(p.string())), ec);
    };
    ZT_CHECK(fs::path(out).filename() != "config.json" && real(out) != real(json_path),
             "export -o '", out,
             "': --format transformers writes config.json beside the weights, which would "
             "replace them; pass another file name, e.g. '",
             (json_path.parent_path() / "model.safetensors").string(), "'");
    app::check_on_rank0(comm, [&] {
      app::check_output_file("export -o (its config.json)", json_path.string(), inputs);
    });
  }
  ZT_CHECK(zero::has_checkpoint(dir), "export: no checkpoint at '", dir, "'",
           app::run_folder_hint(dir),
           "; pass --checkpoint with a checkpoint directory or a run's output_dir/checkpoints");
  nlohmann::json hf_config;
  if (hf) {
    hf_config = vq::transformers_config(cfg.model);  // unrepresentable: fail first
    refuse_foreign_config(json_path, hf_config["model_type"]);
  }
  auto [model, engine] = load_engine(cfg, dir, comm, app::kExportIsFp32);
  // The whole fp32 state on rank 0 (every rank gathers), its rows or names changed there
  // and written once: no intermediate file to leave behind or to need room for.
  nn::NamedTensors state = zero::consolidated_state(*engine);
  const zero::Engine& exported = *engine;  // named: clang before 16 captures no binding
  app::decided_by_rank0(comm, [&] {        // its error, if any, reaches every rank
    app::make_parent_folders(out);
    if (cfg.model.l2_norm_codes) unit_codebook_rows(state);
    if (hf) {
      // safetensors' "format: pt" is what from_pretrained requires of a PyTorch file.
      nn::save_safetensors(out, vq::to_transformers(state), {{"format", "pt"}, {"exporter", "zt"}});
      write_transformers_config(json_path, hf_config.dump(2) + "\n", out);
    } else {
      nn::save_safetensors(out, state, zero::export_metadata(exported));
    }
    return std::string();
  });
  if (comm.rank() == 0 && !quiet)
    std::printf("export: %s -> %s (%zu tensors, fp32, %s names%s)\n",
                zero::find_checkpoint(dir).c_str(), out.c_str(), nn::state_dict(*model).size(),
                hf ? "transformers Emu3VQVAE" : "BAAI", hf ? ", config.json beside it" : "");
}

}  // namespace zt::vqtok
