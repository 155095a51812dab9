// A small SVG plotting helper for `conveyor bench --report`: line, point and
// step charts on linear axes (ticks at 1, 2 or 5 times a power of ten, axis
// labels, a legend), CDFs from samples, and horizontal bar charts. Each chart
// renders to one self-contained <svg> element (no scripts, no external
// assets, colours inline) that can be pasted into an HTML page.
//
// Every text that reaches the output (titles, labels, series names) goes
// through escape(), so any string is safe to pass. Plain values, no state:
// safe to use from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace conveyor::bench::svg {

// `text` with &, <, >, " and ' replaced by entities: safe in XML text and
// in double- or single-quoted attributes.
std::string escape(std::string_view text);

// Tick positions covering [lo, hi]: multiples of a step of 1, 2 or 5 times a
// power of ten, chosen so that there are about `target` of them; the first
// is <= lo and the last >= hi. lo == hi gives a unit range around the value.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// A tick label: as many decimals as the step needs, no more.
std::string tick_label(double value, double step);

struct Series {
  enum class Style {
    line,         // points joined in order
    line_points,  // joined, with a dot on each point
    points,       // dots only
    step,         // a staircase: holds each y until the next x (CDFs)
  };
  std::string name;
  std::vector<double> x, y;  // same length; non-finite pairs are skipped
  Style style = Style::line;
};

// The empirical CDF of `samples` as a step series: y in [0, 1]. With more
// than `max_points` samples it keeps `max_points` evenly spaced quantiles.
Series cdf(std::string name, std::vector<double> samples, size_t max_points = 400);
// The same from quantiles q[0..n] of a distribution (q[i] is its
// i/n-quantile), as `summary.itl_ms_quantiles` holds them.
Series cdf_from_quantiles(std::string name, const std::vector<double>& quantiles);

class Chart {
 public:
  Chart(std::string title, std::string x_label, std::string y_label)
      : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

  Chart& add(Series s);
  // Axes start at zero when every value is >= 0 (default on for y, off for x).
  Chart& x_from_zero(bool on) { x_from_zero_ = on; return *this; }
  Chart& y_from_zero(bool on) { y_from_zero_ = on; return *this; }
  // Fix the y range (e.g. [0, 1] for a CDF or a ratio).
  Chart& y_range(double lo, double hi) { y_lo_ = lo; y_hi_ = hi; y_fixed_ = true; return *this; }
  bool empty() const;  // no series with a finite point

  // The <svg> element, `width` x `height` pixels, legend on the right.
  std::string render(int width = 720, int height = 340) const;

 private:
  std::string title_, x_label_, y_label_;
  std::vector<Series> series_;
  bool x_from_zero_ = false, y_from_zero_ = true, y_fixed_ = false;
  double y_lo_ = 0, y_hi_ = 1;
};

struct Bar {
  std::string name;
  double value = 0;
};

// Horizontal bars from zero, one per entry, each with its value written at
// its end (`value_format` a printf format for one double).
std::string bar_chart(const std::string& title, const std::string& value_label, const std::vector<Bar>& bars,
                      const char* value_format = "%.1f", int width = 720);

// The colour of the i-th series (a 10-colour palette, cycling).
std::string_view series_colour(size_t i);

}  // namespace conveyor::bench::svg
