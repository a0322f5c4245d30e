// Research code that links the Emu3 vision tokenizer (zt::emu3) without any app: a tiny
// tokenizer built on every rank as a plain replica (zero::Replicated), rank 0's weights
// broadcast, then each rank tokenizes the same clip and checks that every rank produced
// the same codes and that decoding them gives a clip of the input's shape.
//   tokenizer_example [--ranks N]       N thread ranks in this process (default 2)
//   mpirun -np 2 tokenizer_example      one process per rank
#include <cstdio>
#include <exception>
#include <string>

#include "apps/vqtok/model/vq_model.h"
#include "zero/zero.h"
using namespace zt;

bool tokenize(comm::Communicator& comm) {
  config::ModelConfig cfg;  // a small tokenizer: 32 channels, 4x spatial reduction
  cfg.ch_mult = {1, 2, 2};
  cfg.attn_resolutions = {2};
  cfg.codebook_size = 64;
  std::shared_ptr<vq::VqModel> tokenizer;
  {
    zero::Replicated frozen(comm);   // whole on every rank, outside any partitioning
    manual_seed(100 + comm.rank());  // different random weights per rank ...
    tokenizer = std::make_shared<vq::VqModel>(cfg);
  }
  // ... until rank 0's weights (a checkpoint, in real code) reach every rank.
  zero::load_state_dict(*tokenizer,
                        comm.rank() == 0 ? nn::state_dict(*tokenizer) : nn::NamedTensors{}, comm);
  tokenizer->eval();

  autograd::NoGradGuard no_grad;
  Generator g(7);  // the same clip on every rank: (B, T, C, H, W) in [-1, 1]
  Tensor clip = clamp(randn({2, 4, 3, 16, 16}, g), -1.0, 1.0);
  Tensor codes = tokenizer->encode(clip).codes;  // (2, 1, 4, 4) code indices
  Tensor recon = tokenizer->decode_codes(codes);

  const int64_t n = codes.numel();  // every rank's codes side by side
  Tensor all = empty({comm.size() * n});
  comm.all_gather(all, codes.to(DType::f32).reshape({n}));
  bool same = true;
  for (int r = 1; r < comm.size(); ++r) {
    same = same && max(abs(sub(all.narrow(0, 0, n), all.narrow(0, r * n, n)))).item() == 0;
  }
  const bool ok = same && recon.sizes() == clip.sizes();
  if (comm.rank() == 0) {
    std::printf("tokenizer_example: %d ranks | clip %s -> codes %s -> recon %s | codes %s\n",
                comm.size(), shape_str(clip.sizes()).c_str(), shape_str(codes.sizes()).c_str(),
                shape_str(recon.sizes()).c_str(), same ? "identical on every rank" : "DIFFER");
  }
  return ok;
}

int main(int argc, char** argv) {
  int ranks = 2;
  size_t parsed = 0;  // characters of a whole number given to --ranks
  if (argc == 3 && std::string(argv[1]) == "--ranks") {
    try {
      ranks = std::stoi(argv[2], &parsed);
    } catch (const std::exception&) {  // not a number: the usage line below
    }
    if (argv[2][parsed] != '\0' || ranks < 1) parsed = 0;
  }
  if (argc != 1 && parsed == 0) {
    std::printf("usage: tokenizer_example [--ranks N]   (or: mpirun -np N tokenizer_example)\n");
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  bool ok = true;
  try {
    comm::launch(comm::under_mpirun() ? 1 : ranks, [&](comm::Communicator& comm) {
      if (!tokenize(comm)) ok = false;
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_example: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
