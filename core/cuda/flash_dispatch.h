// Fused attention (core/cuda/flash_tiles.h): the Tiles instantiation a call runs, from its
// dtype, head dim and the tile shape its pass takes (flash_shapes.h). Shared by the GPU
// kernels (core/cuda/flash_attention.cu) and their host emulation
// (core/cpu/flash_attention.cpp), so both run the same shapes.
#pragma once

#include <iterator>
#include <type_traits>
#include <utility>

#include "core/cuda/flash_shapes.h"
#include "core/cuda/flash_tiles.h"

namespace zt::flash {

/// The shared memory of one block of kPass: none for the atomic backward's prepare and
/// dq_finish passes, ds's stage besides the tiles for its dkdvq pass.
struct NoSmem {};
template <class Tiles, Pass kPass>
using SmemOf = std::conditional_t<
    kPass == Pass::prepare || kPass == Pass::dq_finish, NoSmem,
    std::conditional_t<kPass == Pass::dkdvq, typename Tiles::SmemDq, typename Tiles::Smem>>;

/// Runs task `task` of kPass on one block.
template <class Tiles, Pass kPass>
ZT_FLASH_FN void run_task(const Params& p, int64_t task, SmemOf<Tiles, kPass>& sm) {
  if constexpr (kPass == Pass::forward)
    Tiles::forward(p, task, sm);
  else if constexpr (kPass == Pass::dq)
    Tiles::backward_dq(p, task, sm);
  else if constexpr (kPass == Pass::dkdv)
    Tiles::backward_dkdv(p, task, sm);
  else if constexpr (kPass == Pass::prepare)
    Tiles::backward_prepare(p, task);
  else if constexpr (kPass == Pass::dkdvq)
    Tiles::template backward_dkdv<true>(p, task, sm);
  else
    Tiles::backward_dq_finish(p, task);
}

/// The rows whose tiles are kPass's tasks: keys for dk / dv, queries otherwise.
template <Pass kPass>
int64_t task_rows(const Params& p) {
  return kPass == Pass::dkdv || kPass == Pass::dkdvq ? p.tk : p.tq;
}

/// The backward's passes in order for the way to dq set (backward(), flash_shapes.h): each
/// as run.template operator()<kPass>(). Before the atomic ones, zero_acc() must give
/// p.dq_acc: Tq D zeros per matrix, living until the passes are done.
template <class Run, class ZeroAcc>
void backward_passes(Params& p, Run&& run, ZeroAcc&& zero_acc) {
  if (backward() == Backward::split) {
    run.template operator()<Pass::dq>();
    run.template operator()<Pass::dkdv>();
    return;
  }
  p.dq_acc = zero_acc();
  run.template operator()<Pass::prepare>();
  run.template operator()<Pass::dkdvq>();
  run.template operator()<Pass::dq_finish>();
}

/// Calls fn.template operator()<Tiles<Block<E, W>, DK, MT, KB, ST>>() for the first of
/// kShapes equal to `shape` ({16 MT, 16 KB, ST}); false if none is.
template <template <class, int> class Block, class E, int W, int DK, const auto& kShapes, class Fn>
bool with_shape(TileShape shape, Fn&& fn) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return ((shape == kShapes[I] &&
             (fn.template operator()<Tiles<Block<E, W>, DK, kShapes[I].warp_rows / 16,
                                           kShapes[I].step_rows / 16, kShapes[I].stages>>(),
              true)) ||
            ...);
  }
  (std::make_index_sequence<std::size(kShapes)>());
}

/// fn.template operator()<Tiles<Block<E, W>, DK, MT, KB>>() for dtype dt (E: Bf16 or F16,
/// the backend's 16-bit types), head dim d = 16 DK and the tile shape kPass takes at d
/// (tile_shape, flash_shapes.h): blocks of W = 4 warps up to D = 64, of 2 above (their
/// registers and shared memory grow with D).
template <Pass kPass, template <class, int> class Block, class Bf16, class F16, class Fn>
void with_tiles(DType dt, int64_t d, Fn&& fn) {
  const TileShape shape = tile_shape(kPass, d);
  auto by_dim = [&]<class E>() {
    constexpr bool kForward = kPass == Pass::forward;
    switch (d) {
      case 32:
        if constexpr (kForward)
          return with_shape<Block, E, 4, 2, kNarrowShapes>(shape, fn);
        else
          return with_shape<Block, E, 4, 2, kNarrowBackwardShapes>(shape, fn);
      case 64:
        if constexpr (kForward)
          return with_shape<Block, E, 4, 4, kNarrowShapes>(shape, fn);
        else
          return with_shape<Block, E, 4, 4, kNarrowBackwardShapes>(shape, fn);
      case 96:
        return with_shape<Block, E, 2, 6, kWideShapes>(shape, fn);
      case 128:
        return with_shape<Block, E, 2, 8, kWideShapes>(shape, fn);
      default:
        ZT_FAIL("flash attention: head dim ", d, " is not one of 32, 64, 96, 128");
    }
  };
  bool built = false;
  if (dt == DType::bf16) {
    built = by_dim.template operator()<Bf16>();
  } else {
    ZT_CHECK(dt == DType::f16, "flash attention: expected bf16 or f16, got ", dtype_name(dt));
    built = by_dim.template operator()<F16>();
  }
  ZT_CHECK(built, "flash attention: tile shape ", shape.str(), " is not built for head dim ", d,
           " (built: ", tile_shapes_str(kPass, d), ")");
}

}  // namespace zt::flash
