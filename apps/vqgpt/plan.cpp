// vqgpt plan: the GPT's training memory per rank for a config, predicted and measured. The
// tokenizer is a random replica of the configured shape: its weights change no byte count.
#include "apps/common/run_checks.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "data/factory.h"

namespace zt::vqgpt {

app::PlanResult plan(const config::AppConfig& cfg, comm::Communicator& comm, int steps,
                     bool quiet) {
  app::check_same_config(cfg, comm, "vqgpt plan");
  app::check_same_options({{"--steps", std::to_string(steps)}}, comm, "vqgpt plan");
  app::NoMemoryLimit measure_all;  // compared with memory.limit at the end
  const Device device = app::train_device(cfg.train, comm, "vqgpt plan");
  auto model = build_model(cfg, random_tokenizer(cfg, comm, device), comm);
  auto engine = make_engine(model, cfg, comm, app::EngineUse::planning, quiet);
  auto dataset = data::make_dataset(cfg.data);
  auto loader = data::make_loader(dataset, cfg.data, cfg.train.batch, comm.rank(), comm.size());
  model->train();
  // Every step sees this batch, and tokenizes it as a training step does (the tokenizer's
  // activations and the clips are in the measured peak).
  const Tensor clips = loader->next().clips;
  return app::plan_training(
      *engine, *model, cfg, measure_all, [&] { return model->loss(model->tokenize(clips)); }, comm,
      "vqgpt plan", steps, quiet);
}

}  // namespace zt::vqgpt
