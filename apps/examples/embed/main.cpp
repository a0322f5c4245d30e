// zt inside a project of its own: a small model trained with ZeRO-3 around a frozen
// encoder (a stand-in for a pretrained vision tokenizer) that stays whole on every rank.
//   embed_example [--ranks N]       N thread ranks in this process (default 2)
//   mpirun -np 2 embed_example      one process per rank, MPI between them
#include <cstdio>
#include <exception>
#include <string>

#include "nn/nn.h"
#include "zero/zero.h"
using namespace zt;

// The frozen encoder: images (B, 3, 8, 8) -> features (B, 8, 4, 4).
struct Encoder : nn::UnaryModule {
  Encoder() : nn::UnaryModule("Encoder") {
    conv = register_module(
        "conv", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1)));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(8));
  }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  Tensor forward(const Tensor& x) override { return silu((*bn)((*conv)(x))); }
};

// The trained model: encoder features -> conv -> mean over pixels -> linear -> (B, 3).
struct Model : nn::UnaryModule {
  explicit Model(std::shared_ptr<Encoder> frozen) : nn::UnaryModule("Model") {
    encoder = register_module("encoder", std::move(frozen));
    conv = register_module("conv",
                           std::make_shared<nn::Conv2d>(nn::Conv2dOptions(8, 16, 3).padding(1)));
    out = register_module("out", std::make_shared<nn::Linear>(16, 3));
  }
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> out;
  Tensor forward(const Tensor& x) override {
    return (*out)(mean(silu((*conv)((*encoder)(x))), {2, 3}));
  }
};

// What a checkpoint file would hold; only rank 0 reads it.
std::vector<std::pair<std::string, Tensor>> pretrained_encoder() {
  manual_seed(7);
  auto e = std::make_shared<Encoder>();
  e->bn->running_mean.fill_(0.1);
  e->bn->running_var.fill_(2.0);
  return nn::state_dict(*e);
}

// A batch of noisy one-colour images and their colours (B, 3): the model learns to see
// the colour through the frozen encoder.
std::pair<Tensor, Tensor> batch(uint64_t seed, int64_t size) {
  Generator g(seed);
  Tensor colour = randn({size, 3}, g);
  Tensor x = add(colour.reshape({size, 3, 1, 1}), mul(randn({size, 3, 8, 8}, g), 0.5));
  return {x, colour};
}

void train(comm::Communicator& comm, bool& improved) {
  std::shared_ptr<Model> model;
  {
    zero::Init init(comm);  // parameters partitioned as they are registered
    std::shared_ptr<Encoder> encoder;
    {
      zero::Replicated frozen(comm);  // innermost scope wins: whole replicas, no hooks
      encoder = std::make_shared<Encoder>();
    }
    model = std::make_shared<Model>(encoder);
  }
  // Rank 0's weights are broadcast; the other ranks pass nothing.
  zero::load_state_dict(*model->encoder,
                        comm.rank() == 0 ? pretrained_encoder() : nn::NamedTensors{}, comm);
  model->encoder->requires_grad_(false);
  model->encoder->eval();

  zero::Config cfg;  // DeepSpeed's key names and defaults; buffers averaged across ranks
  cfg.gradient_clipping = 1.0;
  zero::Engine engine(model, comm, cfg, {.type = "adamw", .lr = 1e-2});
  auto held_out_loss = [&] {
    autograd::NoGradGuard ng;  // every rank runs it: the forward gathers parameters
    auto [x, y] = batch(99, 32);
    return mse_loss(engine(x), y).item();
  };
  const double before = held_out_loss();
  for (int step = 0; step < 40; ++step) {
    auto [x, y] = batch(1000 * step + comm.rank(), 8);
    engine.backward(mse_loss(engine(x), y));
    engine.step();  // reduce-scatter, clip, AdamW on fp32 shards
  }
  engine.verify_replicas();  // encoder and buffers identical on every rank, or an error
  const double after = held_out_loss();
  if (comm.rank() != 0) return;
  std::printf("embed_example: %d ranks (%s) | held-out loss %.4f -> %.4f\n", comm.size(),
              comm.backend(), before, after);
  improved = after < 0.5 * before;
}

int main(int argc, char** argv) {
  int ranks = 2;
  size_t parsed = 0;
  if (argc == 3 && std::string(argv[1]) == "--ranks") {
    try {
      ranks = std::stoi(argv[2], &parsed);
    } catch (const std::exception&) {  // not a number: the usage line below
    }
  }
  if (argc != 1 && !(argc == 3 && parsed > 0 && argv[2][parsed] == '\0' && ranks >= 1)) {
    std::printf("usage: embed_example [--ranks N]   (or: mpirun -np N embed_example)\n");
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  bool improved = true;
  try {
    comm::launch(comm::under_mpirun() ? 1 : ranks,
                 [&](comm::Communicator& comm) { train(comm, improved); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_example: %s\n", e.what());
    return 1;
  }
  return improved ? 0 : 1;
}
