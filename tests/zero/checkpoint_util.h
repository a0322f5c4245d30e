// Shared pieces of lesson 15 (checkpoints) and the checkpoint robustness tests: a model
// with partitioned parameters, a trainable replica and buffers; engines over it; one
// training step on a slice of a global batch; temporary directories.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "zero/checkpoint.h"
#include "zero/lesson_util.h"

namespace zt::lesson {

using Named = std::vector<std::pair<std::string, Tensor>>;

/// x (B, 3, 2, 6, 6) -> BatchNorm3d(3) -> Mixed -> (B, 5). Built with a communicator,
/// the BatchNorm is a trainable zero::Replicated replica with its own optimizer state;
/// its buffers change every step. Without one, a plain model (for exported weights).
class Net : public nn::UnaryModule {
 public:
  explicit Net(comm::Communicator* comm);
  std::shared_ptr<nn::BatchNorm3d> bn;
  std::shared_ptr<Mixed> mixed;

 protected:
  Tensor forward(const Tensor& x) override;
};

/// Builds a model (inside the caller's zero::Init).
using Factory = std::function<std::shared_ptr<nn::Module>(comm::Communicator&)>;
std::shared_ptr<nn::Module> make_mixed(comm::Communicator& comm);
std::shared_ptr<nn::Module> make_net(comm::Communicator& comm);

/// An engine over `make`'s model built under zero::Init with seed `seed`; AdamW (or
/// `optimizer`) with lr 1e-2 and weight decay 0.01.
std::unique_ptr<zero::Engine> make_engine(comm::Communicator& comm, const Factory& make,
                                          uint64_t seed, zero::Config cfg = {},
                                          const std::string& optimizer = "adamw");

/// One step on this rank's slice of global batch `step` (the same data at any world size).
void train_step(zero::Engine& e, int step);

/// Saves steps 1..n of a 2-rank run of make_mixed under root.
void save_steps(const std::string& root, int n);

/// Full parameters and buffers, cloned.
Named full_state(zero::Engine& e);

/// Names equal pairwise and values within rtol/atol.
void expect_same(const Named& a, const Named& b, double rtol, double atol);

/// A fresh directory under /tmp, removed with everything in it.
struct TempDir {
  TempDir();
  ~TempDir();
  std::string operator/(const std::string& p) const;
  std::string path;
};

/// Names in `dir`, sorted.
std::set<std::string> entries(const std::string& dir);

/// Runs f on every rank of `comm`, expecting comm::AgreedError (every rank raised it
/// together, so launch() ends an mpirun job without MPI_Abort) whose message contains
/// `needle`; the communicator is not aborted: the next collective works.
void expect_agreed(comm::Communicator& comm, const std::function<void()>& f,
                   const std::string& needle);

/// Rewrites meta.json of checkpoint folder `dir` through `edit`, resealed (its meta_digest
/// recomputed, as a save writes it) so that the checks past the digest see the edit.
void edit_meta(const std::string& dir, const std::function<void(nlohmann::json&)>& edit);

}  // namespace zt::lesson
