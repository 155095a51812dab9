#include "tools/conveyor/bench_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <ostream>

#include <boost/json.hpp>

namespace conveyor::bench {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Distribution Distribution::of(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.count = samples.size();
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(d.count);
  d.min = samples.front();
  d.max = samples.back();
  d.p50 = percentile(samples, 50);
  d.p90 = percentile(samples, 90);
  d.p99 = percentile(samples, 99);
  return d;
}

Summary summarize(const std::vector<RequestResult>& results, double duration_s) {
  Summary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, itl, tpot, e2e;
  for (const auto& r : results) {
    if (!r.ok) {
      ++s.failed;
      ++s.errors[r.error_kind];
      continue;
    }
    ++s.completed;
    ++s.finish_reasons[r.finish_reason.empty() ? "none" : r.finish_reason];
    s.total_input_tokens += r.input_tokens;
    s.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    for (double x : r.itl_s) itl.push_back(x * 1e3);
    if (r.output_tokens > 1)
      tpot.push_back((r.e2e_s - r.ttft_s) * 1e3 / static_cast<double>(r.output_tokens - 1));
  }
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput = static_cast<double>(s.total_output_tokens) / duration_s;
    s.input_throughput = static_cast<double>(s.total_input_tokens) / duration_s;
  }
  s.ttft_ms = Distribution::of(std::move(ttft));
  if (!itl.empty()) {
    std::sort(itl.begin(), itl.end());
    for (int p = 0; p <= 100; ++p) s.itl_ms_quantiles.push_back(percentile(itl, p));
  }
  s.itl_ms = Distribution::of(std::move(itl));
  s.tpot_ms = Distribution::of(std::move(tpot));
  s.e2e_ms = Distribution::of(std::move(e2e));
  return s;
}

namespace {

boost::json::object dist_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"min", d.min}, {"p50", d.p50},
          {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

template <class Map>
boost::json::object map_json(const Map& m) {
  boost::json::object o;
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

}  // namespace

boost::json::object to_json(const Summary& s, const boost::json::object& config,
                            const std::vector<RequestResult>& results) {
  boost::json::object summary{
      {"completed", s.completed},
      {"failed", s.failed},
      {"duration_s", s.duration_s},
      {"total_input_tokens", s.total_input_tokens},
      {"total_output_tokens", s.total_output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_throughput", s.output_throughput},
      {"input_throughput", s.input_throughput},
      {"ttft_ms", dist_json(s.ttft_ms)},
      {"itl_ms", dist_json(s.itl_ms)},
      {"tpot_ms", dist_json(s.tpot_ms)},
      {"e2e_ms", dist_json(s.e2e_ms)},
      {"finish_reasons", map_json(s.finish_reasons)},
      {"itl_ms_quantiles", boost::json::array(s.itl_ms_quantiles.begin(), s.itl_ms_quantiles.end())},
  };
  boost::json::array requests;
  requests.reserve(results.size());
  for (const auto& r : results) {
    boost::json::object o{{"ok", r.ok},
                          {"http_status", r.http_status},
                          {"input_tokens", r.input_tokens},
                          {"output_tokens", r.output_tokens},
                          {"start_s", r.start_s},
                          {"ttft_ms", r.ttft_s * 1e3},
                          {"e2e_ms", r.e2e_s * 1e3}};
    if (!r.finish_reason.empty()) o["finish_reason"] = r.finish_reason;
    if (!r.ok) {
      o["error"] = r.error_kind;
      o["error_message"] = r.error_message;
    }
    requests.push_back(std::move(o));
  }
  return {{"config", config},
          {"summary", std::move(summary)},
          {"errors", map_json(s.errors)},
          {"requests", std::move(requests)}};
}

void print_report(std::ostream& os, const Summary& s, const std::vector<std::string>& title_lines) {
  char line[160];
  auto row = [&](const char* label, double value, const char* fmt = "%.2f") {
    char v[64];
    std::snprintf(v, sizeof v, fmt, value);
    std::snprintf(line, sizeof line, "%-34s %12s\n", label, v);
    os << line;
  };
  auto dist = [&](const char* name, const Distribution& d) {
    std::snprintf(line, sizeof line, "%-10s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, d.mean,
                  d.p50, d.p90, d.p99, d.max);
    os << line;
  };
  os << "================ conveyor bench ================\n";
  for (const auto& t : title_lines) os << t << "\n";
  os << "------------------------------------------------\n";
  row("Successful requests:", static_cast<double>(s.completed), "%.0f");
  row("Failed requests:", static_cast<double>(s.failed), "%.0f");
  for (const auto& [kind, n] : s.errors) {
    std::snprintf(line, sizeof line, "  %-32s %12lld\n", (kind + ":").c_str(), static_cast<long long>(n));
    os << line;
  }
  row("Duration (s):", s.duration_s);
  row("Total input tokens:", static_cast<double>(s.total_input_tokens), "%.0f");
  row("Total output tokens:", static_cast<double>(s.total_output_tokens), "%.0f");
  row("Request throughput (req/s):", s.request_throughput);
  row("Output token throughput (tok/s):", s.output_throughput);
  row("Input token throughput (tok/s):", s.input_throughput);
  std::snprintf(line, sizeof line, "%-10s %10s %10s %10s %10s %10s\n", "(ms)", "mean", "p50", "p90", "p99", "max");
  os << "------------------------------------------------\n" << line;
  dist("TTFT", s.ttft_ms);
  dist("ITL", s.itl_ms);
  dist("TPOT", s.tpot_ms);
  dist("E2E", s.e2e_ms);
  os << "================================================\n";
}

}  // namespace conveyor::bench
