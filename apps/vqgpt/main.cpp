// vqgpt: an autoregressive transformer over the tokens of a frozen vqtok tokenizer. Parses
// the subcommand and its options, loads the config (with --set overrides), starts the
// ranks (`--ranks N` thread ranks, or one process per rank under mpirun) and calls the
// library functions in apps/vqgpt/vqgpt_app.h. Errors print "vqgpt: error: ..." on
// stderr and exit 1 (2 for a mistake on the command line, 128 + the signal when stopped
// by one).
//
//   vqgpt train     --config C [--ranks N] [--set k=v ...] [--resume | --overwrite] ...
//   vqgpt sample    --config C [--checkpoint D] --out grid.png [--num N] [--temperature T] ...
//   vqgpt eval      --config C [--checkpoint D]   (held-out loss, one JSON line)
//   vqgpt export    --config C [--checkpoint D] --out model.safetensors
//   vqgpt tokenizer --config C [--steps S] [--out DIR] [--overwrite]   (a quick tokenizer)
//   vqgpt plan      --config C [--ranks N] [--steps S] ...   (training memory per rank)
// (`vqgpt <command> --help` lists every option with its default.)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/app_cli.h"
#include "apps/common/cli_checks.h"
#include "apps/vqgpt/vqgpt_app.h"

namespace {

using namespace zt;

using Common = app::CommonArgs;

const app::AppCommands kCli{"vqgpt", config::App::vqgpt, "configs/vqgpt_tiny.yaml"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vqgpt: a GPT over frozen vqtok tokens, trained with ZeRO-3", "vqgpt"};
  app.require_subcommand(1);
  app::show_defaults(app);
  Common train_c, sample_c, eval_c, export_c, tok_c, plan_c;

  CLI::App* train = app.add_subcommand("train", "train the GPT with ZeRO-3 on tokenized clips");
  kCli.add(train, train_c);
  app::add_device_arg(train, train_c);
  vqgpt::TrainOptions to;
  int64_t steps = 0;
  train->add_flag("--resume", to.resume, "continue from the newest checkpoint in output_dir");
  train->add_flag("--overwrite", to.overwrite,
                  "start a new run in an output_dir that holds an earlier run's checkpoints or "
                  "metrics, replacing them once the new run has taken a step");
  train->add_option("--steps", steps, "shortcut for --set train.steps=S (default: the config's)")
      ->check(zt::app::whole_number(1));
  train
      ->add_option("--tokenizer", to.tokenizer,
                   "tokenizer weights: a vqtok checkpoint directory or an exported "
                   ".safetensors file (default: gpt.tokenizer_checkpoint)")
      ->check(zt::app::kInputPath);

  CLI::App* sample = app.add_subcommand("sample", "sample token sequences and decode them");
  kCli.add(sample, sample_c);
  app::add_device_arg(sample, sample_c);
  vqgpt::SampleOptions so;
  sample
      ->add_option("--checkpoint", so.checkpoint,
                   "vqgpt checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  sample->add_option("-o,--out", so.out, "grid PNG to write")
      ->required()
      ->check(zt::app::kOutputPath);
  sample->add_option("--num", so.num, "sequences to sample (1 to 1024: one grid image)")
      ->check(zt::app::whole_number(1, 1024));
  sample
      ->add_option("--temperature", so.sampling.temperature,
                   "softmax temperature (> 0; for greedy decoding, --top-k 1)")
      ->check(zt::app::kPositive);
  sample->add_option("--top-k", so.sampling.top_k, "sample among the k most likely codes (0: all)")
      ->check(zt::app::whole_number(0));
  sample
      ->add_option("--seed", so.sampling.seed,
                   "sampling seed (sample i draws from its own place in the seed's stream: "
                   "the same at any --num above i, on any number of ranks)")
      ->check(zt::app::kSeed);
  sample->add_option("--tokens", so.tokens_out, "also write the code ids (.npy, int64)")
      ->check(zt::app::kOutputPath);

  CLI::App* eval = app.add_subcommand(
      "eval", "held-out loss of a checkpoint, as training evaluates (JSON; train.eval_batches)");
  kCli.add(eval, eval_c);
  app::add_device_arg(eval, eval_c);
  std::string eval_checkpoint;
  eval->add_option("--checkpoint", eval_checkpoint,
                   "vqgpt checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);

  CLI::App* exp = app.add_subcommand("export", "checkpoint -> consolidated fp32 safetensors");
  kCli.add(exp, export_c);
  std::string checkpoint, export_out;
  exp->add_option("--checkpoint", checkpoint,
                  "checkpoint directory (default: output_dir/checkpoints)")
      ->check(zt::app::kInputPath);
  exp->add_option("-o,--out", export_out, "the .safetensors file to write")
      ->required()
      ->check(zt::app::kOutputPath);

  CLI::App* tok = app.add_subcommand(
      "tokenizer", "train a quick vqtok tokenizer into gpt.tokenizer_checkpoint (no trained one?)");
  kCli.add(tok, tok_c);
  int64_t tok_steps = 200;
  std::string tok_out;
  bool tok_overwrite = false;
  tok->add_flag("--overwrite", tok_overwrite, "replace checkpoints already in the --out folder");
  tok->add_option("--steps", tok_steps, "tokenizer training steps")
      ->check(zt::app::whole_number(1));
  tok->add_option("-o,--out", tok_out,
                  "checkpoint root to write (default: gpt.tokenizer_checkpoint)")
      ->check(zt::app::kOutputPath);

  int plan_steps = 2;
  CLI::App* plan = kCli.add_plan(app, plan_c, plan_steps);

  app::tidy_defaults(app);
  if (const int rc = app::check_subcommand(app, argc, argv); rc >= 0) return rc;
  if (const int rc = app::parse_command_line(app, argc, argv); rc >= 0) return rc;

  try {
    if (*train) {
      to.tty = app::stdout_is_tty();
      return kCli.run_train(train_c, steps,
                            [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                              return vqgpt::train(cfg, to, comm).stopped_by_signal;
                            });
    }
    if (*sample)
      return kCli.run(sample_c, "sample", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        vqgpt::sample(cfg, so, comm);
                      });
    if (*eval)
      return kCli.run(
          eval_c, "eval", {}, [&](const config::AppConfig& cfg, comm::Communicator& comm) {
            const vqgpt::EvalResult r = vqgpt::evaluate_checkpoint(cfg, eval_checkpoint, comm);
            if (comm.rank() == 0) std::printf("%s\n", r.json().dump().c_str());
          });
    if (*exp)
      return kCli.run(export_c, "export", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        kCli.note_cpu(cfg, comm, "export");
                        vqgpt::export_model(cfg, checkpoint, export_out, comm);
                      });
    if (*tok)
      return kCli.run(
          tok_c, "tokenizer", {}, [&](const config::AppConfig& cfg, comm::Communicator& comm) {
            kCli.note_cpu(cfg, comm, "tokenizer");
            vqgpt::train_quick_tokenizer(cfg, tok_steps, tok_out, comm, false, tok_overwrite);
          });
    if (*plan)
      return kCli.run(plan_c, "plan", {},
                      [&](const config::AppConfig& cfg, comm::Communicator& comm) {
                        vqgpt::plan(cfg, comm, plan_steps);
                      });
  } catch (const std::exception& e) {
    return kCli.fail(e);
  }
  return 0;
}
