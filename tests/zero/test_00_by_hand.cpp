// Lesson 0 — the life of a parameter, by hand.
//
// The lessons build up ZeRO-3 one invariant at a time; each is a test group named
// LessonNN..., labelled `zero`. Run them all with
//   ctest --test-dir build -L zero
// or one alone with, e.g.,
//   ctest --test-dir build -L zero -R Lesson08 --output-on-failure
//
// Invariant: everything the engine does to a parameter can be done by hand, in this
// order, with no Engine and no hooks: partition it, gather it, compute with it, release
// it, reduce-scatter its gradient into a shard, step the optimizer on the shard, and the
// result is the step one process would have taken on the whole batch. Read it top to
// bottom: it is the program zero::Engine runs for every parameter of a model (the engine
// does steps 2-4 twice, around forward and again around backward: lesson 5; and one
// all-gather serves a whole module: lesson 16).
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson00ByHand, TheLifeOfAParameter) {
  const int N = 2;
  const double lr = 0.1;
  Generator g(5);
  Tensor x = randn({4, 5}, g), y = randn({4, 3}, g);  // the global batch

  // The reference: one process, the whole batch, one SGD step.
  manual_seed(5);
  auto ref = std::make_shared<nn::Linear>(nn::LinearOptions(5, 3).bias(false));
  Tensor w0 = ref->weight.detach().clone();
  mse_loss((*ref)(x), y).backward();
  Tensor w1 = sub(w0, mul(ref->weight.grad(), lr));

  comm::run_threads(N, [&](comm::Communicator& comm) {
    const int rank = comm.rank();
    // 1. Partition. Every rank builds the layer, each from its own seed; rank 0's value
    //    (w0) is scattered and each rank keeps a flat shard of ceil(15 / 2) = 8 elements
    //    of it (rank 1's last one is padding). The tensor keeps its shape and name but
    //    has no storage.
    manual_seed(5 + 100 * rank);  // ranks disagree on purpose; rank 0 matches ref
    auto lin = std::make_shared<nn::Linear>(nn::LinearOptions(5, 3).bias(false));
    Tensor w = lin->weight;
    w.set_name("weight");
    zero::partition_param(w, comm, /*src=*/0);
    zero::ZeroParam* z = zero::zero_param(w);
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(z->part.shard_numel, 8);
    EXPECT_EQ(z->status, zero::ParamStatus::kNotAvailable);
    EXPECT_FALSE(w.has_storage());
    const int64_t off = z->part.shard_offset(rank), valid = z->part.shard_valid(rank);
    EXPECT_CLOSE(z->shard.narrow(0, 0, valid), w0.reshape({-1}).narrow(0, off, valid), 0, 0);

    // 2. Gather: the all-gather starts (INFLIGHT); wait() makes the parameter whole
    //    (AVAILABLE), the same full value on every rank.
    z->gather(comm);
    EXPECT_EQ(z->status, zero::ParamStatus::kInflight);
    z->wait();
    EXPECT_EQ(z->status, zero::ParamStatus::kAvailable);
    EXPECT_CLOSE(w, w0, 0, 0);

    // 3. Forward and backward on this rank's half of the batch, with the full parameter.
    Tensor xs = x.narrow(0, 2 * rank, 2), ys = y.narrow(0, 2 * rank, 2);
    mse_loss((*lin)(xs), ys).backward();
    ASSERT_TRUE(w.grad().defined());

    // 4. Release: the full storage goes; the full gradient (this rank's data only) stays
    //    until it is reduced.
    z->release();
    EXPECT_EQ(z->status, zero::ParamStatus::kNotAvailable);
    EXPECT_FALSE(w.has_storage());

    // 5. Reduce-scatter: each rank pads its full gradient (from its own data) to N x 8
    //    elements, and one reduce-scatter with kAvg hands rank r slice r of the AVERAGE
    //    over ranks, which becomes its fp32 gradient shard (here added to a fresh zero
    //    shard; the engine copies a window's first gradient over the stale shard and adds
    //    later ones: lesson 22). The full gradient is then freed. The engine's
    //    zero::GradReducer does the same for many parameters at once, laid side by side
    //    in a bucket (lessons 6 and 17).
    Tensor padded = zeros({z->part.padded_numel()});
    padded.narrow(0, 0, z->part.numel).copy_(w.grad().reshape({-1}));
    Tensor slice = zeros({z->part.shard_numel});
    comm.reduce_scatter(slice, padded, comm::ReduceOp::kAvg);
    z->grad_shard = zeros({z->part.shard_numel});
    add_(z->grad_shard, slice);
    w.set_grad(Tensor());
    Tensor ref_grad = ref->weight.grad().reshape({-1});
    EXPECT_CLOSE(z->grad_shard.narrow(0, 0, valid), ref_grad.narrow(0, off, valid), 1e-5, 1e-7);

    // 6. The optimizer steps on the shard alone: each rank updates only its slice.
    optim::SGD opt({{"weight", z->shard}}, optim::SGDOptions(lr));
    z->shard.set_grad(z->grad_shard);
    opt.step();

    // 7. Gathered again, the parameter is what the single process computed.
    z->gather(comm);
    z->wait();
    EXPECT_CLOSE(w, w1, 1e-5, 1e-7) << "rank " << rank;
    z->release();
  });
}
