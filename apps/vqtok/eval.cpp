// vqtok eval: reconstruction errors, the VQ term and codebook usage of a frozen replica over
// a dataset split (evaluate), and the same scoring of a training run's model
// (evaluate_batches). Each clip's sums are taken over its own elements in f64 and added up
// in dataset-index order across every rank, so that the scores are the same bits on any
// number of ranks wherever the model's outputs for a clip are (on the CPU: at one batch
// size; the kernels' results can change in the last bits with the number of clips in a
// batch).
#include <array>
#include <cmath>
#include <cstdio>

#include "apps/common/ordered_sums.h"
#include "apps/common/run_checks.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/ops.h"
#include "data/factory.h"

namespace zt::vqtok {

nlohmann::json EvalResult::json() const {
  return {{"psnr", psnr},
          {"mse", mse},
          {"l1", l1},
          {"loss_vq", loss_vq},
          {"codebook_usage", codebook.usage},
          {"codes_used", codebook.used},
          {"perplexity", codebook.perplexity},
          {"clips", clips}};
}

EvalResult evaluate_batches(const ForwardFn& forward, data::DataLoader& loader, int64_t batches,
                            const config::AppConfig& cfg, comm::Communicator& comm,
                            std::vector<Tensor>* first) {
  autograd::NoGradGuard no_grad;
  const int64_t n = app::begin_eval_pass(loader, batches, comm, "evaluation");
  app::CodebookUsage usage(cfg.model.codebook_size);
  // Per clip: squared and absolute errors, elements, the VQ term's mean squared error.
  std::vector<app::IndexedValues<4>> scores;
  for (int64_t i = 0; i < n; ++i) {
    data::Batch b = loader.next();
    // Only the epoch's own samples count, not the padding that evens out the ranks. A
    // batch of padding alone still runs: every rank runs each forward (ZeRO-3 gathers).
    const int64_t real = loader.unpadded(b);
    const Tensor clips = real > 0 ? b.clips.narrow(0, 0, real) : b.clips;
    std::vector<Tensor> out = forward(clips);
    if (real == 0) continue;
    ZT_CHECK(out.size() >= 6, "evaluation: the model returned ", out.size(),
             " outputs without gradient recording; expected {recon, codes, loss_vq, "
             "loss_commit, loss_codebook, item_errors}");
    // Each clip's sums in f64 over its own elements: the same bits however it was batched.
    const Tensor d = (out[0] - clips).to(DType::f64).reshape({real, -1});
    const std::vector<double> squared = sum(d * d, {1}).to_vector();
    const std::vector<double> absolute = sum(abs(d), {1}).to_vector();
    const std::vector<double> vq_error = out[5].to_vector();
    const std::vector<int64_t> index = app::item_indices(b, real);
    for (int64_t k = 0; k < real; ++k)
      scores.push_back(
          {index[k], {squared[k], absolute[k], static_cast<double>(d.size(1)), vq_error[k]}});
    usage.add(out[1]);
    if (i == 0 && first) *first = {clips, out[0]};
  }
  const std::array<double, 5> v = app::sum_in_index_order(scores, comm, "vqtok eval scores");
  EvalResult r;
  r.mse = v[0] / v[2];
  r.l1 = v[1] / v[2];
  // vq_term's value: the codebook and commitment terms are both mean((zq - z)^2).
  r.loss_vq = (1.0 + cfg.loss.commitment) * v[3] / v[4];
  r.clips = static_cast<int64_t>(v[4]);
  r.psnr = app::psnr_from_mse(r.mse);
  r.codebook = usage.reduce(comm);
  ZT_CHECK(std::isfinite(r.mse) && std::isfinite(r.l1) && std::isfinite(r.loss_vq),
           "evaluation: non-finite result (mse ", r.mse, ", l1 ", r.l1, ", vq loss ", r.loss_vq,
           ") over ", r.clips,
           " clips: the model's outputs overflowed or the data holds "
           "non-finite values");
  return r;
}

EvalResult evaluate(const config::AppConfig& cfg, const EvalOptions& o, comm::Communicator& comm) {
  const int64_t batch = batch_of(cfg, o.batch);
  app::check_same_options({{"--weights", o.weights},
                           {"--split", o.eval_split ? "eval" : "train"},
                           {"--batch", std::to_string(batch)},
                           {"--batches", std::to_string(o.batches)}},
                          comm, "vqtok eval");
  // With --batches, the clips scored are spread over the split, not its first folders.
  const int64_t scored = o.batches > 0 ? app::clips_of(o.batches, batch, comm.size()) : 0;
  auto dataset = data::make_dataset(cfg.data, o.eval_split, scored, data::Headers::left_to_caller);
  app::check_same_data(*dataset, comm, "vqtok eval");
  app::check_image_headers(
      *dataset, comm, o.eval_split && !cfg.data.eval_path.empty() ? "data.eval_path" : "data.path");
  if (!o.eval_split && scored > 0) dataset = data::spread(dataset, scored);
  if (comm.rank() == 0 && o.eval_split && !data::eval_held_out(cfg.data))
    std::fprintf(stderr, "vqtok eval: note: eval split: %s\n",
                 data::describe_eval(cfg.data, *dataset).c_str());
  auto loader =
      data::make_loader(dataset, cfg.data, batch, comm.rank(), comm.size(), /*eval=*/true);
  auto model = load_frozen_model(cfg, o.weights, comm);  // once the data is known to be there
  return evaluate_batches([&](const Tensor& x) { return model->call({x}); }, *loader, o.batches,
                          cfg, comm);
}

}  // namespace zt::vqtok
