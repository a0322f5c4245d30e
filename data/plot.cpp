// SVG line plots. Ticks are "nice" numbers (1, 2, 5 x 10^k) on linear axes and powers
// of ten on a log axis; text is XML-escaped.
#include "data/plot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"

namespace zt::data {

namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

// v with `digits` significant digits.
std::string num(double v, int digits = 4) {
  std::ostringstream os;
  os.precision(digits);
  os << v;
  return os.str();
}

// At most this many ticks per axis: a step too small to advance its value (below half
// an ulp of it) would otherwise add ticks forever.
constexpr size_t kMaxTicks = 50;

// Nice tick positions covering [lo, hi]; `digits` gets the significant digits that tell
// them apart: four, or as many as the largest value has down to the step's digit (30.101,
// 30.102, ... need five).
std::vector<double> ticks(double lo, double hi, int& digits) {
  const double span = hi - lo;
  const double raw = span / 5.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  digits = 4;
  const double top = std::max(std::fabs(lo), std::fabs(hi));
  if (top > step) {  // the digits of the largest value's first down to the step's
    const double first = std::floor(std::log10(top)), last = std::floor(std::log10(step));
    digits = std::clamp(static_cast<int>(first - last) + 1, 4, 17);
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span && t.size() < kMaxTicks;
       v += step)
    t.push_back(std::fabs(v) < 1e-12 * step ? 0.0 : v);
  return t;
}

// [lo, hi] widened when it is too narrow to draw and label: a single value, or values equal
// to 9 digits (at 1e4 the next double is 2e-12 away, which no absolute threshold catches).
void widen_flat(double& lo, double& hi) {
  const double size = std::max({std::fabs(lo), std::fabs(hi), 1.0});
  if (hi - lo >= 1e-9 * size) return;
  const double pad = 0.5 * std::max(1.0, 1e-6 * size);
  lo -= pad, hi += pad;
}

}  // namespace

std::string svg_plot(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  auto ok = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!o.log_y || y > 0);
  };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series) {
    ZT_CHECK(s.x.size() == s.y.size(), "svg_plot: series '", s.name, "' has ", s.x.size(),
             " x values but ", s.y.size(), " y values");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!ok(s.x[i], s.y[i])) continue;
      const double y = o.log_y ? std::log10(s.y[i]) : s.y[i];
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to draw: empty axes
  widen_flat(x0, x1);
  widen_flat(y0, y1);
  if (o.log_y) y0 = std::floor(y0), y1 = std::ceil(y1);

  const double L = 70, R = 20, T = o.title.empty() ? 20 : 40, B = 50;
  const double W = o.width - L - R, H = o.height - T - B;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * W; };
  auto py = [&](double y) { return T + H - (y - y0) / (y1 - y0) * H; };

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\"" << o.height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!o.title.empty())
    s << "<text x=\"" << o.width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
      << esc(o.title) << "</text>\n";
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W << "\" height=\"" << H
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  int x_digits = 4, y_digits = 4;
  for (double t : ticks(x0, x1, x_digits))
    s << "<line x1=\"" << px(t) << "\" y1=\"" << T + H << "\" x2=\"" << px(t) << "\" y2=\""
      << T + H + 5 << "\" stroke=\"black\"/><text x=\"" << px(t) << "\" y=\"" << T + H + 18
      << "\" text-anchor=\"middle\">" << num(t, x_digits) << "</text>\n";
  std::vector<double> yt;
  if (o.log_y) {
    for (double e = y0; e <= y1 + 1e-9; e += std::max(1.0, std::floor((y1 - y0) / 6)))
      yt.push_back(e);
  } else {
    yt = ticks(y0, y1, y_digits);
  }
  for (double t : yt)
    s << "<line x1=\"" << L << "\" y1=\"" << py(t) << "\" x2=\"" << L + W << "\" y2=\"" << py(t)
      << "\" stroke=\"#ddd\"/><text x=\"" << L - 6 << "\" y=\"" << py(t) + 4
      << "\" text-anchor=\"end\">" << (o.log_y ? num(std::pow(10.0, t)) : num(t, y_digits))
      << "</text>\n";
  s << "<text x=\"" << L + W / 2 << "\" y=\"" << o.height - 12 << "\" text-anchor=\"middle\">"
    << esc(o.xlabel) << "</text>\n";
  s << "<text transform=\"translate(16," << T + H / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << esc(o.ylabel) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& sr = series[k];
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < sr.x.size(); ++i)
      if (ok(sr.x[i], sr.y[i]))
        s << px(sr.x[i]) << "," << py(o.log_y ? std::log10(sr.y[i]) : sr.y[i]) << " ";
    s << "\"/>\n";
    const double ly = T + 14 + 16.0 * static_cast<double>(k);
    s << "<line x1=\"" << L + W - 120 << "\" y1=\"" << ly - 4 << "\" x2=\"" << L + W - 100
      << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/><text x=\""
      << L + W - 95 << "\" y=\"" << ly << "\">" << esc(sr.name) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

void save_svg_plot(const std::string& path, const std::vector<PlotSeries>& series,
                   const PlotOptions& options) {
  // Readers see the old plot or the new one; a failed write leaves neither a truncated
  // plot nor a temporary behind.
  write_text_atomically(path, svg_plot(series, options));
}

}  // namespace zt::data
