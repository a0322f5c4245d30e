// vqtok plan: the tokenizer's training memory per rank for a config, predicted and measured.
#include "apps/common/run_checks.h"
#include "apps/vqtok/vqtok_app.h"
#include "data/factory.h"

namespace zt::vqtok {

app::PlanResult plan(const config::AppConfig& cfg, comm::Communicator& comm, int steps,
                     bool quiet) {
  app::check_same_config(cfg, comm, "vqtok plan");
  app::check_same_options({{"--steps", std::to_string(steps)}}, comm, "vqtok plan");
  app::NoMemoryLimit measure_all;  // compared with memory.limit at the end
  const Device device = app::train_device(cfg.train, comm, "vqtok plan");
  std::shared_ptr<vq::VqModel> model = build_model(cfg, device, comm);
  auto engine = app::make_engine(model, cfg, comm, app::EngineUse::planning, quiet);
  auto dataset = data::make_dataset(cfg.data);
  auto loader = data::make_loader(dataset, cfg.data, cfg.train.batch, comm.rank(), comm.size());
  const Tensor clips = loader->next().clips.to(device);  // every step sees this batch
  model->train();
  std::vector<Tensor> out;  // held over backward and the step, as a training step holds it
  return app::plan_training(
      *engine, *model, cfg, measure_all,
      [&] {
        out.clear();
        out = engine->forward({clips});
        return objective(out, clips, cfg.loss).total;
      },
      comm, "vqtok plan", steps, quiet);
}

}  // namespace zt::vqtok
