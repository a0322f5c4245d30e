// Lesson 10 — memory.
// Invariant: with AdamW in fp32 each parameter element costs 16 bytes of model state
// (4 parameter + 4 gradient + 8 optimizer moments). Under ZeRO-3 a rank keeps only its
// shards of all three, so per-rank persistent model state is at most
// 1.05 x (16 x numel / N) plus padding — measured from the allocator's tags.
#include "zero/lesson_util.h"

using namespace zt;

namespace {
// Big enough that per-tensor overheads do not matter: 3 layers of 96 x 96.
class Wide : public nn::UnaryModule {
 public:
  Wide() : nn::UnaryModule("Wide") {
    for (const char* name : {"l0", "l1", "l2"})
      layers.push_back(register_module(name, std::make_shared<nn::Linear>(96, 96)));
  }
  std::vector<std::shared_ptr<nn::Linear>> layers;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers) h = relu((*l)(h));
    return h;
  }
};
}  // namespace

TEST(Lesson10Memory, ModelStateIsOneNthPerRank) {
  for (int N : {1, 2, 4}) {
    comm::run_threads(N, [N](comm::Communicator& comm) {
      std::shared_ptr<Wide> m;
      {
        zero::Init init(comm);
        m = std::make_shared<Wide>();
      }
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      engine.backward(sum(engine(ones({4, 96}))));
      engine.step();  // creates the optimizer moments
      zero::MemoryReport r = engine.memory_report();
      int64_t numel = m->num_parameters(), padding = 0;
      for (const auto& mp : engine.partitioned())
        padding += zero::zero_param(mp.param)->part.padding();
      double full = 16.0 * static_cast<double>(numel);
      double bound = 1.05 * full / N + 16.0 * static_cast<double>(padding) / N;
      EXPECT_LE(static_cast<double>(r.model_state()), bound) << r.json();
      EXPECT_GE(static_cast<double>(r.model_state()), full / N) << "all three shards are counted";
      EXPECT_EQ(r.gathered_param, 0) << "nothing stays gathered after the step";
    });
  }
}
