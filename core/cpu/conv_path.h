// The CPU convolution's algorithms (core/cpu/conv.cpp) and the $ZT_CONV_PATH switch that
// forces one of them, for measuring them against each other (e.g. with zt-bench ops).
#pragma once

#include <optional>

namespace zt::cpu {

/// The three algorithms of the CPU convolution, each correct for the geometries it applies
/// to: Winograd F(2x2, 3x3), a GEMM per kernel tap over padded planes, exact columns.
enum class ConvPath { kWinograd, kPlanes, kColumns };

/// The path a value of $ZT_CONV_PATH forces: "winograd", "planes" or "columns"; none for a
/// null or empty value (unset: the automatic choice). Any other value is a zt::Error that
/// names the variable and the valid values.
std::optional<ConvPath> parse_conv_path(const char* value);

}  // namespace zt::cpu
