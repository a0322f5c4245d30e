// What the apps may write (apps/common/output_paths.h): an output path that is one of the
// command's inputs (the config's dataset among them) or lies in an input folder, lies in
// saved checkpoints, is a run's own record, or is a device or FIFO is refused before any
// work, naming the option, the path and why; a folder likewise; a link is followed. Then
// one app end to end: `vqtok encode -o` over the weights it reads changes nothing. A write
// that rank 0 alone does (an export's rewrite) fails on every rank with rank 0's reason.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "apps/app_test_util.h"
#include "apps/common/metrics.h"
#include "apps/common/output_paths.h"
#include "apps/common/run_checks.h"
#include "common/test_util.h"
#include "core/text_file.h"

using namespace zt;
namespace fs = std::filesystem;
using test::error_of;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void touch(const fs::path& p, const std::string& text = "x") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A run's folder as training leaves it: checkpoints/latest, one checkpoint, metrics.
fs::path saved_run(const std::string& name) {
  const fs::path run = fs::path(test::process_temp_dir("zt_output_paths")) / name;
  touch(run / "checkpoints" / "latest", "step_000002");
  touch(run / "checkpoints" / "step_000002" / "meta.json", "{}");
  touch(run / "checkpoints" / "step_000002" / "rank_00000.safetensors");
  touch(run / "metrics.jsonl", "{\"step\": 1}\n");
  return run;
}

}  // namespace

TEST(OutputPaths, FilesThatWouldDestroyWhatWasSavedOrReadAreRefused) {
  const fs::path run = saved_run("files");
  const fs::path ckpt = run / "checkpoints" / "step_000002";
  const std::string weights = (run / "tok.safetensors").string();
  touch(weights);
  auto refused = [&](const fs::path& out, const std::vector<std::string>& why) {
    const std::string err = error_of([&] {
      app::check_output_file("encode -o", out.string(), {"", weights});
    });
    for (const std::string& w : why) EXPECT_TRUE(has(err, w)) << out << ": " << err;
    EXPECT_TRUE(has(err, "encode -o '" + out.string() + "'")) << err;
  };
  refused(weights, {"is a file this command reads"});
  refused(run / "." / "tok.safetensors", {"is a file this command reads"});  // another spelling
  // Another name of the same file (a hard link).
  fs::create_hard_link(weights, run / "tok_alias.safetensors");
  refused(run / "tok_alias.safetensors", {"is a file this command reads"});
  // A path not written yet that another output of the command takes (sample's --tokens and
  // --out).
  const std::string grid = (run / "grid.png").string();
  EXPECT_TRUE(has(error_of([&] { app::check_output_file("sample --tokens", grid, {grid}); }),
                  "is a file this command reads"));
  refused(ckpt / "meta.json", {"lies in a checkpoint", ckpt.string()});
  refused(ckpt / "new.npy", {"lies in a checkpoint"});
  refused(run / "checkpoints" / "latest", {"lies in a checkpoints folder (it holds 'latest')"});
  refused(run / "checkpoints" / "ids.npy", {"lies in a checkpoints folder"});
  refused(run / "metrics.jsonl", {"is a training run's metrics.jsonl"});
  touch(run / "recon_step_000002.png");
  refused(run / "recon_step_000002.png", {"is a training run's recon_step_000002.png"});
  refused(run / "tb" / "events.json", {"is in a training run's TensorBoard folder"});
  // The run's lock and curves, beside its metrics.jsonl, are its own files too.
  touch(run / ".lock");
  touch(run / "curves.svg");
  refused(run / ".lock", {"is a training run's .lock"});
  refused(run / "curves.svg", {"is a training run's curves.svg"});
  refused(run, {"is a folder; pass the file to write"});
  // A path ending in '/' names a folder, there or not: the write at the end would fail.
  refused(run.string() + "/exports/", {"names a folder; pass the file to write"});
  refused(run.string() + "/exports/.", {"names a folder; pass the file to write"});
  // Beside the run, a new file, and an existing one the command does not read, are fine.
  for (const fs::path& ok : {run / "ids.npy", run / "model.safetensors", run / "old.npy"}) {
    if (ok.filename() == "old.npy") touch(ok);
    EXPECT_EQ(error_of([&] { app::check_output_file("encode -o", ok.string(), {weights}); }), "")
        << ok;
  }
  // A folder holding a meta.json but no rank file (an exported model's, say) is no
  // checkpoint: a file beside it is fine.
  touch(run / "export" / "meta.json");
  EXPECT_EQ(error_of([&] {
              app::check_output_file("encode -o", (run / "export" / "ids.npy").string(), {});
            }),
            "");
  // A file named like a run's that is not there yet, in a folder without a run, is new.
  const fs::path fresh = run.parent_path() / "files_elsewhere" / "metrics.jsonl";
  EXPECT_EQ(error_of([&] { app::check_output_file("eval -o", fresh.string(), {}); }), "");
  // An image named like a run's, away from a run's record, is just an image.
  const fs::path image = fresh.parent_path() / "recon_step_000002.png";
  touch(image);
  EXPECT_EQ(error_of([&] { app::check_output_file("decode -o", image.string(), {}); }), "");
  // Written only at the end of work: the folder must take a file now.
  EXPECT_TRUE(
      has(error_of([&] { app::check_output_writable("eval -o", "/proc/zt_no_such/x.json", {}); }),
          "cannot be written"));
  // Its folders are made when it is written, not by the check: a command that fails
  // first leaves none behind.
  const fs::path later = run / "deeper" / "still" / "eval.json";
  const auto entries = [](const fs::path& dir) {
    return std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  };
  const auto before = entries(run);
  EXPECT_EQ(error_of([&] { app::check_output_writable("eval -o", later.string(), {}); }), "");
  EXPECT_FALSE(fs::exists(run / "deeper"));
  EXPECT_EQ(entries(run), before) << "the probe is removed";
  app::make_parent_folders(later.string());
  EXPECT_TRUE(fs::is_directory(later.parent_path()));
  EXPECT_FALSE(fs::exists(later));
  // A file on the way is named.
  touch(run / "plain");
  EXPECT_TRUE(has(error_of([&] {
                    app::check_output_writable("eval -o", (run / "plain" / "x.json").string(), {});
                  }),
                  "' is a file, not a folder"));
}

TEST(OutputPaths, FoldersInsideSavedCheckpointsAreRefused) {
  const fs::path run = saved_run("folders");
  auto err = [](const fs::path& p) {
    return error_of([&] { app::check_output_folder("decode -o", p.string(), {}); });
  };
  EXPECT_TRUE(has(err(run / "checkpoints"), "is or lies in a checkpoints folder"));
  EXPECT_TRUE(has(err(run / "checkpoints" / "step_000002"), "is or lies in a checkpoint ("));
  EXPECT_TRUE(has(err(run / "checkpoints" / "step_000002" / "frames"), "is or lies in"));
  EXPECT_TRUE(has(err(run / "metrics.jsonl"), "is a file; pass a folder"));
  EXPECT_EQ(err(run), "") << "a run's own folder holds checkpoints, and is not one";
  EXPECT_EQ(err(run / "frames"), "");
  EXPECT_FALSE(fs::exists(run / "frames")) << "the check makes no folder";
  // A folder that takes no file is refused before any work, with the reason.
  EXPECT_TRUE(has(err("/proc/zt_no_such/frames"), "cannot be written"));
  EXPECT_TRUE(has(err("/proc/zt_no_such/frames"), "(in '/proc')"));
}

TEST(OutputPaths, EncodeOverItsOwnWeightsChangesNothing) {
  const std::string dir = test::process_temp_dir("zt_output_paths") + "/encode";
  const config::AppConfig cfg =
      apptest::tiny_vqtok_config(dir, {"train.steps=1", "train.eval_every=0"});
  apptest::train_vqtok(cfg, false, 1);
  const std::string weights = dir + "/checkpoints";
  const std::string meta = weights + "/step_000001/meta.json";
  ASSERT_TRUE(fs::exists(meta));
  const auto before = fs::file_size(meta);
  vqtok::EncodeOptions o;
  o.weights = weights;
  o.out = meta;
  o.limit = 1;
  const std::string err = error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_TRUE(has(err, "encode -o '" + meta + "' lies in a checkpoint")) << err;
  EXPECT_EQ(fs::file_size(meta), before);
  // A file that cannot be made is refused before the weights are read (none are here).
  o.weights = dir + "/no_such_weights";
  o.out = "/proc/zt_no_such/ids.npy";
  const std::string unwritable = error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_TRUE(has(unwritable, "encode -o '/proc/zt_no_such/ids.npy' cannot be written"))
      << unwritable;
}

// A write replaces its file through a rename, which would put a regular file in place of a
// device, a FIFO or a link. So an output that is a link is followed (the file it leads to is
// written, beside it the temporary, and the link stays), and one that is a device, FIFO or
// socket is refused before any work, by the checks and by the writer itself.
TEST(OutputPaths, ALinkIsFollowedAndAFifoIsNeverReplaced) {
  const fs::path dir = fs::path(test::process_temp_dir("zt_output_paths")) / "special";
  fs::create_directories(dir / "real");
  const std::string fifo = (dir / "pipe.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string err = error_of([&] { app::check_output_writable("eval -o", fifo, {}); });
  EXPECT_TRUE(has(err, "eval -o '" + fifo + "' is a FIFO, not a regular file")) << err;
  EXPECT_TRUE(has(error_of([&] { write_text_atomically(fifo, "{}"); }),
                  "cannot write '" + fifo + "': it is a FIFO"));
  EXPECT_TRUE(fs::is_fifo(fifo)) << "the FIFO is left as it was";
  // A link to a FIFO is refused naming both.
  fs::create_symlink(fifo, dir / "to_pipe.json");
  EXPECT_TRUE(has(
      error_of([&] { app::check_output_file("encode -o", (dir / "to_pipe.json").string(), {}); }),
      "(a link to '" + fifo + "') is a FIFO"));
  // A relative link to a file in another folder: the file is written, the link stays.
  const fs::path link = dir / "latest.json", target = dir / "real" / "eval.json";
  touch(target, "old");
  fs::create_symlink(fs::path("real") / "eval.json", link);
  EXPECT_EQ(error_of([&] { app::check_output_writable("eval -o", link.string(), {}); }), "");
  write_text_atomically(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << "the link is kept";
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "real"), fs::directory_iterator()), 1)
      << "no temporary is left beside the file";
  // A link into a folder that takes no file: the folder it leads to is probed, not the
  // link's own.
  const fs::path dangling = dir / "elsewhere.json";
  fs::create_symlink("/proc/zt_no_such/eval.json", dangling);
  EXPECT_TRUE(has(error_of([&] { app::check_output_writable("eval -o", dangling.string(), {}); }),
                  "eval -o '" + dangling.string() + "' cannot be written"));
  // What the link leads to is what the checks judge: here a file the command reads.
  EXPECT_TRUE(
      has(error_of([&] { app::check_output_file("encode -o", link.string(), {target.string()}); }),
          "is a file this command reads"));
  // A command refuses it before any work (no weights exist here to be read).
  const config::AppConfig cfg = apptest::tiny_vqtok_config((dir / "run").string());
  vqtok::EncodeOptions o;
  o.weights = (dir / "no_such_weights").string();
  o.out = fifo;
  const std::string refused = error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_TRUE(has(refused, "encode -o '" + fifo + "' is a FIFO")) << refused;
  // So is a FIFO where its file list goes, beside the codes.
  const std::string codes = (dir / "codes.npy").string();
  ASSERT_EQ(::mkfifo((codes + ".files.txt").c_str(), 0600), 0);
  o.out = codes;
  const std::string list_refused = error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_TRUE(has(list_refused, "encode -o (its file list) '" + codes + ".files.txt' is a FIFO"))
      << list_refused;
  EXPECT_TRUE(fs::is_fifo(codes + ".files.txt"));
}

// The config's dataset is an input of every command: an output that is data.path or
// data.eval_path, or lies in such a folder, is refused naming both, before any work.
TEST(OutputPaths, TheConfigsDataIsNeitherReplacedNorAddedTo) {
  const fs::path root = fs::path(test::process_temp_dir("zt_output_paths")) / "data";
  const std::string clips = (root / "clips.npy").string(), images = (root / "images").string(),
                    held_out = (root / "held_out").string();
  touch(clips);
  touch(root / "images" / "a.png");
  fs::create_directories(held_out);
  config::AppConfig cfg = apptest::tiny_vqtok_config((root / "run").string());
  EXPECT_EQ(app::config_inputs(cfg), (std::vector<std::string>{cfg.source, ""}))
      << "synthetic data reads no file";
  cfg.data.kind = data::DataKind::npy;
  cfg.data.path = clips;
  EXPECT_TRUE(
      has(error_of([&] { app::check_output_file("encode -o", clips, app::config_inputs(cfg)); }),
          "encode -o '" + clips + "' is a file this command reads ('" + clips + "')"));
  cfg.data.kind = data::DataKind::image_folder;
  cfg.data.path = images;
  cfg.data.eval_path = held_out;
  const std::vector<std::string> inputs = app::config_inputs(cfg);
  auto refused = [&](const std::string& err, const std::string& out, const std::string& in) {
    EXPECT_TRUE(has(err, "'" + out + "' is or lies in '" + in + "', a folder this command reads"))
        << err;
  };
  const std::string json = images + "/eval.json", trace = held_out + "/trace.json";
  refused(error_of([&] { app::check_output_writable("eval -o", json, inputs); }), json, images);
  refused(error_of([&] { app::check_output_writable("train.trace", trace, inputs); }), trace,
          held_out);
  refused(error_of([&] { app::check_output_folder("decode -o", images, inputs); }), images, images);
  EXPECT_FALSE(fs::exists(json));
  EXPECT_EQ(
      error_of([&] { app::check_output_folder("decode -o", (root / "frames").string(), inputs); }),
      "");
  // The commands check before they read anything: decode -o into the training images.
  vqtok::DecodeOptions d;
  d.codes = (root / "ids.npy").string();
  d.out_dir = images + "/decoded";
  const std::string err = error_of(
      [&] { comm::run_threads(1, [&](comm::Communicator& c) { vqtok::decode(cfg, d, c); }); });
  refused(err, d.out_dir, images);
  EXPECT_TRUE(has(err, "decode -o")) << err;
}

// What rank 0 alone decides or writes (app::decided_by_rank0): every rank returns its answer,
// or throws its error as comm::AgreedError naming rank 0's reason, and the ranks go on.
TEST(OutputPaths, RankZerosFailureReachesEveryRankWithItsReason) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    EXPECT_EQ(app::decided_by_rank0(comm, [] { return std::string("fine"); }), "fine");
    try {
      app::decided_by_rank0(comm, []() -> std::string { throw Error("disk full at 'x'"); });
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const comm::AgreedError& e) {
      EXPECT_TRUE(has(e.what(), "disk full at 'x'")) << e.what();
      EXPECT_EQ(e.rank(), comm.rank());
    }
    comm.barrier();  // not aborted
  });
}

// A run appends its metrics to output_dir/metrics.jsonl in place: a FIFO there is refused
// (opening it would wait for a reader; one is opened here, so that the test cannot hang),
// as is a link to one, and the FIFO stays.
TEST(OutputPaths, AFifoWhereARunWritesItsMetricsIsRefused) {
  const fs::path dir = fs::path(test::process_temp_dir("zt_output_paths")) / "metrics";
  fs::create_directories(dir);
  const std::string fifo = (dir / "metrics.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  for (int64_t start : {0, 3}) {
    const std::string err =
        error_of([&] { app::open_run_metrics(dir.string(), start, false, "t"); });
    EXPECT_TRUE(has(err, "t: '" + fifo + "' is a FIFO, where the run writes its metrics")) << err;
  }
  fs::create_directories(dir / "linked");
  fs::create_symlink(fifo, dir / "linked" / "metrics.jsonl");
  EXPECT_TRUE(
      has(error_of([&] { app::open_run_metrics((dir / "linked").string(), 0, false, "t"); }),
          "is a FIFO"));
  ::close(reader);
  EXPECT_TRUE(fs::is_fifo(fifo));
}
