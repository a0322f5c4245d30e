// OpenBLAS's kernels for CPUs newer than the OpenBLAS release (blas.h: use_cpu_blas_kernels).
#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <string>

#include "core/cpu/blas.h"
#include "core/cpu/lanes.h"

namespace zt::cpu {

std::string use_cpu_blas_kernels() {
  static const std::string core = [] {
    // OpenBLAS (built for every x86 core, as distributions ship it) picks its kernels by the
    // CPU's model number when it loads. A release older than the CPU (Debian 12's 0.3.21 on
    // Intel's Emerald Rapids) does not know the model and falls back to its SSE3 kernels,
    // "Prescott": 4-5x slower GEMMs. There, pick the kernels of the widest vector
    // instructions the CPU runs, as OPENBLAS_CORETYPE would have at load, and select again;
    // OpenBLAS's own choice otherwise, and a user's OPENBLAS_CORETYPE, stand.
    const char* picked = openblas_get_corename();
    if (std::getenv("OPENBLAS_CORETYPE") || picked == nullptr ||
        strcasecmp(picked, "Prescott") != 0)
      return std::string(picked ? picked : "");
    const char* want = cpu_isa() == Isa::kAvx512 ? "SkylakeX"
                       : cpu_isa() == Isa::kAvx2 ? "Haswell"
                                                 : nullptr;
    using Fn = void (*)();
    // OpenBLAS's selection, exported by its builds for every core (not declared in cblas.h).
    auto quit = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
    auto init = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
    if (want == nullptr || quit == nullptr || init == nullptr) return std::string(picked);
    setenv("OPENBLAS_CORETYPE", want, 0);
    quit();
    init();
    return std::string(openblas_get_corename());
  }();
  return core;
}

}  // namespace zt::cpu
