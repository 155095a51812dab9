#include "tools/conveyor/bench_svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace conveyor::bench::svg {
namespace {

constexpr std::array<std::string_view, 10> kPalette{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kLegendWidth = 180;
constexpr size_t kLegendChars = 26;
constexpr const char* kFont = "font-family=\"sans-serif\"";

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string px(double v) { return fmt("%.1f", v); }

// At most `n` bytes, cut at a UTF-8 character boundary, "…" when cut.
std::string shorten(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "\u2026";
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void take(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool valid() const { return lo <= hi; }
};

bool finite_pair(const Series& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

// One axis: the data range widened to ticks, and the mapping to pixels.
struct Scale {
  std::vector<double> ticks;
  double lo = 0, hi = 1, px_lo = 0, px_hi = 1;
  double step() const { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1; }
  double operator()(double v) const {
    const double t = (std::clamp(v, lo, hi) - lo) / (hi - lo);
    return px_lo + t * (px_hi - px_lo);
  }
};

Scale make_scale(Range r, bool from_zero, double px_lo, double px_hi, int target) {
  if (!r.valid()) r = Range{0, 1};
  if (from_zero && r.lo >= 0) {
    r.lo = 0;
    if (r.hi == 0) r.hi = 1;  // all zero: show 0..1, not a range around 0
  }
  Scale s;
  s.ticks = nice_ticks(r.lo, r.hi, target);
  s.lo = s.ticks.front();
  s.hi = s.ticks.back();
  s.px_lo = px_lo;
  s.px_hi = px_hi;
  return s;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.5;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  std::vector<double> ticks;
  for (double t = first;; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (t >= hi - step * 1e-9) break;
  }
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string tick_label(double value, double step) {
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string_view series_colour(size_t i) { return kPalette[i % kPalette.size()]; }

Series cdf(std::string name, std::vector<double> samples, size_t max_points) {
  Series s{std::move(name), {}, {}, Series::Style::step};
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double v) { return !std::isfinite(v); }),
                samples.end());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  const size_t points = std::min(n, std::max<size_t>(2, max_points));
  for (size_t k = 0; k < points; ++k) {
    // The k-th kept sample; the last kept is always the maximum.
    const size_t i = points == n ? k : (k * (n - 1)) / (points - 1);
    s.x.push_back(samples[i]);
    s.y.push_back(static_cast<double>(i + 1) / static_cast<double>(n));
  }
  return s;
}

Series cdf_from_quantiles(std::string name, const std::vector<double>& quantiles) {
  Series s{std::move(name), {}, {}, Series::Style::line};
  if (quantiles.size() < 2) return s;
  const double n = static_cast<double>(quantiles.size() - 1);
  for (size_t i = 0; i < quantiles.size(); ++i) {
    s.x.push_back(quantiles[i]);
    s.y.push_back(static_cast<double>(i) / n);
  }
  return s;
}

Chart& Chart::add(Series s) {
  s.y.resize(s.x.size(), std::numeric_limits<double>::quiet_NaN());
  series_.push_back(std::move(s));
  return *this;
}

bool Chart::empty() const {
  for (const auto& s : series_)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (finite_pair(s, i)) return false;
  return true;
}

std::string Chart::render(int width, int height) const {
  const bool legend = series_.size() > 1 || (series_.size() == 1 && !series_.front().name.empty());
  const double left = 70, top = 34, right = width - (legend ? kLegendWidth : 0) - 20, bottom = height - 48;

  Range xr, yr;
  for (const auto& s : series_)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (finite_pair(s, i)) {
        xr.take(s.x[i]);
        yr.take(s.y[i]);
      }
  if (y_fixed_) yr = Range{y_lo_, y_hi_};
  const Scale xs = make_scale(xr, x_from_zero_, left, right, 6);
  const Scale ys = make_scale(yr, y_from_zero_, bottom, top, 5);

  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + std::to_string(width) +
                  "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
                  std::to_string(height) + "\" " + kFont + " font-size=\"12\">\n";
  o += "<title>" + escape(title_) + "</title>\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
       "\" fill=\"white\"/>\n";
  o += "<text x=\"" + px(left) + "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + escape(title_) + "</text>\n";

  if (empty()) {
    o += "<text x=\"" + px((left + right) / 2) + "\" y=\"" + px((top + bottom) / 2) +
         "\" text-anchor=\"middle\" fill=\"#777\">no data</text>\n</svg>\n";
    return o;
  }

  // Grid and ticks.
  o += "<g class=\"axes\" stroke=\"#ddd\" stroke-width=\"1\">\n";
  for (double t : ys.ticks)
    o += "<line x1=\"" + px(left) + "\" x2=\"" + px(right) + "\" y1=\"" + px(ys(t)) + "\" y2=\"" + px(ys(t)) +
         "\"/>\n";
  for (double t : xs.ticks)
    o += "<line x1=\"" + px(xs(t)) + "\" x2=\"" + px(xs(t)) + "\" y1=\"" + px(top) + "\" y2=\"" + px(bottom) +
         "\"/>\n";
  o += "<rect x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(right - left) + "\" height=\"" +
       px(bottom - top) + "\" fill=\"none\" stroke=\"#444\"/>\n</g>\n";
  o += "<g class=\"ticks\" fill=\"#333\">\n";
  for (double t : ys.ticks)
    o += "<text x=\"" + px(left - 6) + "\" y=\"" + px(ys(t) + 4) + "\" text-anchor=\"end\">" +
         escape(tick_label(t, ys.step())) + "</text>\n";
  for (double t : xs.ticks)
    o += "<text x=\"" + px(xs(t)) + "\" y=\"" + px(bottom + 16) + "\" text-anchor=\"middle\">" +
         escape(tick_label(t, xs.step())) + "</text>\n";
  o += "</g>\n";
  o += "<text class=\"xlabel\" x=\"" + px((left + right) / 2) + "\" y=\"" + px(height - 10.0) +
       "\" text-anchor=\"middle\">" + escape(x_label_) + "</text>\n";
  o += "<text class=\"ylabel\" x=\"16\" y=\"" + px((top + bottom) / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
       px((top + bottom) / 2) + ")\">" + escape(y_label_) + "</text>\n";

  // The data.
  for (size_t k = 0; k < series_.size(); ++k) {
    const Series& s = series_[k];
    const std::string colour(series_colour(k));
    const std::string dash = k >= kPalette.size() ? " stroke-dasharray=\"6 3\"" : "";
    o += "<g class=\"series\" data-name=\"" + escape(s.name) + "\">\n";
    std::string points;
    double last_y = 0;
    bool first = true;
    size_t n = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_pair(s, i)) continue;
      const double x = xs(s.x[i]), y = ys(s.y[i]);
      if (s.style == Series::Style::step && !first) points += px(x) + "," + px(last_y) + " ";
      points += px(x) + "," + px(y) + " ";
      last_y = y;
      first = false;
      ++n;
    }
    if (s.style != Series::Style::points && n > 0) {
      points.pop_back();
      o += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.8\"" + dash + " points=\"" + points +
           "\"/>\n";
    }
    if (s.style == Series::Style::points || s.style == Series::Style::line_points || n == 1) {
      for (size_t i = 0; i < s.x.size(); ++i)
        if (finite_pair(s, i))
          o += "<circle cx=\"" + px(xs(s.x[i])) + "\" cy=\"" + px(ys(s.y[i])) + "\" r=\"3\" fill=\"" + colour +
               "\"/>\n";
    }
    o += "</g>\n";
  }

  if (legend) {
    const double lx = right + 14;
    const size_t rows = static_cast<size_t>(std::max(1.0, (bottom - top) / 18));
    o += "<g class=\"legend\">\n";
    for (size_t k = 0; k < series_.size(); ++k) {
      const double y = top + 8 + 18 * static_cast<double>(k);
      if (k + 1 == rows && series_.size() > rows) {
        o += "<text x=\"" + px(lx) + "\" y=\"" + px(y + 4) + "\" fill=\"#555\">and " +
             std::to_string(series_.size() - k) + " more</text>\n";
        break;
      }
      const std::string dash = k >= kPalette.size() ? " stroke-dasharray=\"6 3\"" : "";
      o += "<line x1=\"" + px(lx) + "\" x2=\"" + px(lx + 22) + "\" y1=\"" + px(y) + "\" y2=\"" + px(y) +
           "\" stroke=\"" + std::string(series_colour(k)) + "\" stroke-width=\"2.5\"" + dash + "/>\n";
      o += "<text x=\"" + px(lx + 28) + "\" y=\"" + px(y + 4) + "\">" + escape(shorten(series_[k].name, kLegendChars)) +
           "</text>\n";
    }
    o += "</g>\n";
  }
  o += "</svg>\n";
  return o;
}

std::string bar_chart(const std::string& title, const std::string& value_label, const std::vector<Bar>& bars,
                      const char* value_format, int width) {
  const double bar_h = 20, gap = 8, top = 34, label_w = 220, right_pad = 90;
  const double height = top + static_cast<double>(bars.size()) * (bar_h + gap) + 44;
  double hi = 0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  const Scale xs = make_scale(Range{0, hi > 0 ? hi : 1}, true, label_w, width - right_pad, 5);
  const double bottom = height - 44;

  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + std::to_string(width) +
                  "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + px(height) +
                  "\" " + kFont + " font-size=\"12\">\n";
  o += "<title>" + escape(title) + "</title>\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" + px(height) +
       "\" fill=\"white\"/>\n";
  o += "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + escape(title) + "</text>\n";
  o += "<g class=\"axes\" stroke=\"#ddd\">\n";
  for (double t : xs.ticks)
    o += "<line x1=\"" + px(xs(t)) + "\" x2=\"" + px(xs(t)) + "\" y1=\"" + px(top) + "\" y2=\"" + px(bottom) +
         "\"/>\n";
  o += "</g>\n<g class=\"ticks\" fill=\"#333\">\n";
  for (double t : xs.ticks)
    o += "<text x=\"" + px(xs(t)) + "\" y=\"" + px(bottom + 16) + "\" text-anchor=\"middle\">" +
         escape(tick_label(t, xs.step())) + "</text>\n";
  o += "</g>\n";
  o += "<text class=\"xlabel\" x=\"" + px((label_w + width - right_pad) / 2) + "\" y=\"" + px(height - 10) +
       "\" text-anchor=\"middle\">" + escape(value_label) + "</text>\n";
  o += "<g class=\"series\">\n";
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = top + static_cast<double>(i) * (bar_h + gap);
    const double v = std::isfinite(b.value) ? std::max(0.0, b.value) : 0;
    o += "<text x=\"" + px(label_w - 8) + "\" y=\"" + px(y + bar_h - 6) + "\" text-anchor=\"end\">" +
         escape(shorten(b.name, 34)) + "</text>\n";
    o += "<rect x=\"" + px(label_w) + "\" y=\"" + px(y) + "\" width=\"" + px(xs(v) - label_w) + "\" height=\"" +
         px(bar_h) + "\" fill=\"" + std::string(series_colour(i)) + "\"/>\n";
    o += "<text x=\"" + px(xs(v) + 6) + "\" y=\"" + px(y + bar_h - 6) + "\">" + escape(fmt(value_format, b.value)) +
         "</text>\n";
  }
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace conveyor::bench::svg
