// A tiny SVG line-plot writer for training curves (loss, PSNR): one or more series,
// axes with tick labels, a legend, optional log-scale y. No dependencies.
#pragma once

#include <string>
#include <vector>

namespace zt::data {

/// One curve.
struct PlotSeries {
  std::string name{};
  std::vector<double> x;  ///< e.g. steps
  std::vector<double> y;  ///< same length as x; non-finite points are skipped
};

/// Labels and size.
struct PlotOptions {
  std::string title{};
  std::string xlabel = "step";
  std::string ylabel{};
  bool log_y = false;  ///< points with y <= 0 are skipped
  int width = 640;
  int height = 400;
};

/// The plot as an SVG document.
std::string svg_plot(const std::vector<PlotSeries>& series, const PlotOptions& options = {});
/// Writes svg_plot() to `path`; error naming the file if it cannot be written.
void save_svg_plot(const std::string& path, const std::vector<PlotSeries>& series,
                   const PlotOptions& options = {});

}  // namespace zt::data
