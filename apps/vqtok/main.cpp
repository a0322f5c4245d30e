// vqtok: the Emu3-style video tokenizer's command line. Parses the subcommand and its
// options, loads the config (with --set overrides), starts the ranks (`--ranks N` thread
// ranks, or one process per rank under mpirun) and calls the library functions in
// apps/vqtok/vqtok_app.h. Errors print "vqtok: error: ..." on stderr and exit 1 (2 for a
// mistake on the command line, 128 + the signal when stopped by one).
//
//   vqtok train  --config C [--ranks N] [--set k=v ...] [--resume | --overwrite] ...
//   vqtok encode --config C [--weights W] [--input X] --out ids.npy [--verify] ...
//   vqtok decode --config C [--weights W] --codes ids.npy --out DIR ...
//   vqtok eval   --config C [--weights W] [--split eval|train] [--batches B] ...
//   vqtok export --config C [--checkpoint D] --out model.safetensors [--format baai|transformers]
//   vqtok plan   --config C [--ranks N] [--steps S] ...
// (`vqtok <command> --help` lists every option with its default.)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/app_cli.h"
#include "apps/common/cli_checks.h"
#include "apps/common/output_paths.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/text_file.h"
#include "data/factory.h"

namespace {

using namespace zt;

using Common = app::CommonArgs;

const app::AppCommands kCli{"vqtok", config::App::vqtok, "configs/vqtok_tiny.yaml"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vqtok: Emu3-style video tokenizer trained with ZeRO-3", "vqtok"};
  app.require_subcommand(1);
  app::show_defaults(app);

  Common train_c, encode_c, decode_c, eval_c, export_c, plan_c;

  CLI::App* train = app.add_subcommand("train", "train the tokenizer with ZeRO-3");
  kCli.add(train, train_c);
  app::add_device_arg(train, train_c);
  bool resume = false;
  int64_t steps = 0;
  bool overwrite = false;
  train->add_flag("--resume", resume, "continue from the newest checkpoint in output_dir");
  train->add_flag("--overwrite", overwrite,
                  "start a new run in an output_dir that holds an earlier run's checkpoints or "
                  "metrics, replacing them once the new run has taken a step");
  train->add_option("--steps", steps, "shortcut for --set train.steps=S (default: the config's)")
      ->check(zt::app::whole_number(1));

  CLI::App* encode = app.add_subcommand("encode", "clips or images -> token ids (.npy, int64)");
  kCli.add(encode, encode_c);
  vqtok::EncodeOptions eo;
  std::string encode_split = "eval";
  encode
      ->add_option(
          "--weights", eo.weights,
          "exported .safetensors or checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  CLI::Option* input =
      encode
          ->add_option("--input", eo.input,
                       ".npy of clips (N,T,3,H,W) or images (N,3,H,W), an image, or a folder of "
                       "images (default: the config's dataset)")
          ->check(zt::app::kInputPath);
  encode->add_option("--split", encode_split, "config dataset split (not with --input)")
      ->check(CLI::IsMember({"eval", "train"}))
      ->excludes(input);
  encode->add_option("-o,--out", eo.out, "token ids .npy to write")
      ->required()
      ->check(zt::app::kOutputPath);
  encode->add_option("--limit", eo.limit, "encode at most this many items (0: all)")
      ->check(zt::app::whole_number(0));
  encode->add_option("--batch", eo.batch, "items per forward (default: train.batch)")
      ->check(zt::app::kBatchSize);
  encode->add_flag(
      "--verify", eo.verify,
      "check that every rank produces identical tokens (each encodes the first batch)");

  CLI::App* decode = app.add_subcommand("decode", "token ids (.npy) -> PNG frames");
  kCli.add(decode, decode_c);
  vqtok::DecodeOptions dO;
  decode
      ->add_option(
          "--weights", dO.weights,
          "exported .safetensors or checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  decode->add_option("--codes", dO.codes, "token ids .npy (from vqtok encode)")
      ->required()
      ->check(CLI::ExistingFile);
  decode->add_option("-o,--out", dO.out_dir, "folder for the PNG frames")
      ->required()
      ->check(zt::app::kOutputPath);
  decode->add_option("--batch", dO.batch, "clips per forward (default: train.batch)")
      ->check(zt::app::kBatchSize);

  CLI::App* eval = app.add_subcommand("eval", "PSNR and codebook usage on a dataset (JSON)");
  kCli.add(eval, eval_c);
  vqtok::EvalOptions vo;
  std::string eval_split = "eval", eval_out;
  eval->add_option(
          "--weights", vo.weights,
          "exported .safetensors or checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  eval->add_option("--split", eval_split, "dataset split")->check(CLI::IsMember({"eval", "train"}));
  eval->add_option("--batches", vo.batches, "batches per rank (default: the whole split)")
      ->check(zt::app::whole_number(0));
  eval->add_option("--batch", vo.batch, "clips per rank per batch (default: train.batch)")
      ->check(zt::app::kBatchSize);
  eval->add_option("-o,--out", eval_out, "also write the JSON to this file")
      ->check(zt::app::kOutputPath);

  CLI::App* exp = app.add_subcommand("export", "checkpoint -> consolidated fp32 safetensors");
  kCli.add(exp, export_c);
  std::string checkpoint, export_out;
  exp->add_option("--checkpoint", checkpoint,
                  "checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  exp->add_option("-o,--out", export_out, "the .safetensors file to write")
      ->required()
      ->check(zt::app::kOutputPath);
  std::string export_format = "baai";
  exp->add_option("--format", export_format,
                  "key names: baai (the original Emu3-VisionTokenizer's) or transformers "
                  "(Emu3VQVAE's, with config.json beside --out)")
      ->check(CLI::IsMember({"baai", "transformers"}));

  int plan_steps = 2;
  CLI::App* plan = kCli.add_plan(app, plan_c, plan_steps);

  app::tidy_defaults(app);
  if (const int rc = app::check_subcommand(app, argc, argv); rc >= 0) return rc;
  if (const int rc = app::parse_command_line(app, argc, argv); rc >= 0) return rc;

  try {
    if (*train) {
      vqtok::TrainOptions to;
      to.resume = resume;
      to.overwrite = overwrite;
      to.tty = app::stdout_is_tty();
      return kCli.run_train(train_c, steps,
                            [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                              return vqtok::train(cfg, to, comm).stopped_by_signal;
                            });
    }
    if (*encode) {
      eo.eval_split = encode_split == "eval";
      return kCli.run(encode_c, "encode", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        kCli.note_cpu(cfg, comm, "encode");
                        vqtok::encode(cfg, eo, comm);
                      });
    }
    if (*decode) {
      return kCli.run(decode_c, "decode", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        kCli.note_cpu(cfg, comm, "decode");
                        vqtok::decode(cfg, dO, comm);
                      });
    }
    if (*eval) {
      vo.eval_split = eval_split == "eval";
      return kCli.run(eval_c, "eval", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        kCli.note_cpu(cfg, comm, "eval");
                        std::vector<std::string> inputs = app::config_inputs(cfg);
                        inputs.push_back(vo.weights);
                        app::check_on_rank0(
                            comm, [&] { app::check_output_writable("eval -o", eval_out, inputs); });
                        vqtok::EvalResult r = vqtok::evaluate(cfg, vo, comm);
                        if (comm.rank() != 0) return;
                        nlohmann::json j = r.json();
                        j["split"] = eval_split;
                        j["held_out"] = vo.eval_split && data::eval_held_out(cfg.data);
                        std::printf("%s\n", j.dump().c_str());
                        if (eval_out.empty()) return;
                        app::make_parent_folders(eval_out);
                        write_text_atomically(eval_out, j.dump(2) + "\n");
                      });
    }
    if (*exp) {
      return kCli.run(
          export_c, "export", {}, [&](const config::AppConfig& cfg, comm::Communicator& comm) {
            kCli.note_cpu(cfg, comm, "export");
            vqtok::export_model(cfg, checkpoint, export_out, comm, false,
                                export_format == "transformers" ? vq::KeyNaming::transformers
                                                                : vq::KeyNaming::baai);
          });
    }
    if (*plan) {
      return kCli.run(plan_c, "plan", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        vqtok::plan(cfg, comm, plan_steps);
                      });
    }
  } catch (const std::exception& e) {
    return kCli.fail(e);
  }
  return 0;
}
