// What export_consolidated writes for parameters that are not floating: an integer table
// registered as a frozen parameter (a codebook's indices, a position map) is partitioned
// like any parameter, and the export keeps its dtype, so the file loads back into the plain
// model (nn::load_state_dict refuses integers read as floats) with the values it had.
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_util.h"

using namespace zt;

namespace {

// y = Linear(x) + idx (as floats), idx an i64 [5] parameter that does not train.
struct WithIndices : nn::UnaryModule {
  WithIndices() : nn::UnaryModule("WithIndices") {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 5));
    idx = register_parameter("idx", from_vector({3, -1, 1 << 30, 7, 0}, {5}, DType::i64),
                             /*requires_grad=*/false);
  }
  Tensor forward(const Tensor& x) override { return add((*lin)(x), idx.to(DType::f32)); }
  std::shared_ptr<nn::Linear> lin;
  Tensor idx;
};

}  // namespace

TEST(ExportDtypes, AnIntegerParameterKeepsItsDtypeAndLoadsIntoThePlainModel) {
  lesson::TempDir tmp;
  const std::string path = tmp / "model.safetensors";
  for (int N : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(N) + " ranks");
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(4);
      auto m = lesson::partitioned<WithIndices>(comm);
      zero::Engine e(m, comm, {}, {});
      zero::export_consolidated(e, path);
    });
    nn::SafetensorsFile f(path);
    EXPECT_EQ(f.info("idx").dtype, DType::i64);
    auto plain = std::make_shared<WithIndices>();
    nn::load_state_dict(*plain, nn::load_safetensors(path), /*strict=*/true);
    EXPECT_EQ(plain->idx.to_vector(), (std::vector<double>{3, -1, 1 << 30, 7, 0}));
  }
}
