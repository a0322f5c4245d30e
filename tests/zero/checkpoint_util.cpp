// Helpers of lesson 15 and the checkpoint robustness and cleanup tests.
#include "zero/checkpoint_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "zero/checkpoint_dir.h"

namespace zt::lesson {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kGlobalBatch = 6;  // splits evenly over 2 and 3 ranks
}  // namespace

Net::Net(comm::Communicator* comm) : nn::UnaryModule("Net") {
  if (comm) {
    zero::Replicated rep(*comm);
    bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(3));
  } else {
    bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(3));
  }
  mixed = register_module("mixed", std::make_shared<Mixed>());
}

Tensor Net::forward(const Tensor& x) {
  return (*mixed)((*bn)(x));
}

std::shared_ptr<nn::Module> make_mixed(comm::Communicator&) {
  return std::make_shared<Mixed>();
}

std::shared_ptr<nn::Module> make_net(comm::Communicator& comm) {
  return std::make_shared<Net>(&comm);
}

std::unique_ptr<zero::Engine> make_engine(comm::Communicator& comm, const Factory& make,
                                          uint64_t seed, zero::Config cfg,
                                          const std::string& optimizer) {
  manual_seed(seed);
  std::shared_ptr<nn::Module> m;
  {
    zero::Init init(comm);
    m = make(comm);
  }
  zero::OptimizerConfig o;
  o.type = optimizer;
  o.momentum = 0.9;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  return std::make_unique<zero::Engine>(m, comm, cfg, o);
}

void train_step(zero::Engine& e, int step) {
  auto [x, y] = batch(kGlobalBatch, 100 + step);
  e.backward(mse_loss(e(rank_slice(x, e.comm())), rank_slice(y, e.comm())));
  EXPECT_TRUE(e.step());
}

Named full_state(zero::Engine& e) {
  Named out = full_parameters(e.module(), e.comm());
  for (auto& [n, b] : e.module().named_buffers()) out.emplace_back(n, b.detach().clone());
  return out;
}

void expect_same(const Named& a, const Named& b, double rtol, double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    EXPECT_CLOSE(a[i].second, b[i].second, rtol, atol) << a[i].first;
  }
}

TempDir::TempDir() {
  char t[] = "/tmp/zt_checkpoint_test_XXXXXX";
  ZT_CHECK(mkdtemp(t) != nullptr, "mkdtemp failed");
  path = t;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string TempDir::operator/(const std::string& p) const {
  return (fs::path(path) / p).string();
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

void expect_agreed(comm::Communicator& comm, const std::function<void()>& f,
                   const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error thrown (wanted '" << needle << "')";
  } catch (const comm::AgreedError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(e.rank(), comm.rank());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a comm::AgreedError: " << e.what();
  }
  Tensor one = ones({1});
  comm.all_reduce(one, comm::ReduceOp::kSum);
  EXPECT_EQ(one.item(), static_cast<double>(comm.size()));
}

void edit_meta(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path meta_path = fs::path(dir) / "meta.json";
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(meta_path));
  edit(meta);
  zero::ckpt::seal_meta(meta);  // as a save would write it: the checks past the digest run
  std::ofstream(meta_path, std::ios::trunc) << meta.dump(1);
}

void save_steps(const std::string& root, int n) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, make_mixed, 5);
    for (int s = 0; s < n; ++s) {
      train_step(*e, s);
      zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()));
    }
  });
}

}  // namespace zt::lesson
