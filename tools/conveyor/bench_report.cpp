#include "tools/conveyor/bench_report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <boost/json.hpp>

#include "tools/conveyor/bench_svg.hpp"

namespace conveyor::bench {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using svg::escape;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- reading runs, forgiving about missing fields ---------------------------------

const json::value* at(const json::object& o, std::initializer_list<std::string_view> path) {
  const json::object* cur = &o;
  const json::value* v = nullptr;
  for (auto key : path) {
    if (!cur) return nullptr;
    v = cur->if_contains(key);
    if (!v) return nullptr;
    cur = v->if_object();
  }
  return v;
}

double num(const json::object& o, std::initializer_list<std::string_view> path) {
  const json::value* v = at(o, path);
  if (!v) return kNaN;
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  return kNaN;
}

std::string str(const json::object& o, std::initializer_list<std::string_view> path) {
  const json::value* v = at(o, path);
  if (!v) return {};
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  if (v->is_number()) return json::serialize(*v);
  return {};
}

std::vector<double> numbers(const json::value* v) {
  std::vector<double> out;
  if (!v || !v->is_array()) return out;
  for (const auto& x : v->get_array()) {
    if (x.is_double()) out.push_back(x.get_double());
    else if (x.is_int64()) out.push_back(static_cast<double>(x.get_int64()));
    else if (x.is_uint64()) out.push_back(static_cast<double>(x.get_uint64()));
    else out.push_back(kNaN);
  }
  return out;
}

// Per-request values of the requests that succeeded.
std::vector<double> request_values(const json::object& run, std::string_view key) {
  std::vector<double> out;
  const json::value* reqs = run.if_contains("requests");
  if (!reqs || !reqs->is_array()) return out;
  for (const auto& r : reqs->get_array()) {
    const json::object* o = r.if_object();
    if (!o) continue;
    if (const auto* ok = o->if_contains("ok"); ok && ok->is_bool() && !ok->get_bool()) continue;
    const double v = num(*o, {key});
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

double max_of(const std::vector<double>& v) {
  double m = kNaN;
  for (double x : v)
    if (std::isfinite(x) && !(x <= m)) m = x;
  return m;
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "\u2013";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Run {
  const json::object* data = nullptr;
  std::string name;  // unique within its group
  std::string group, label;
  bool figures = false;
  double concurrency = kNaN;
};

std::vector<Run> runs_of(const json::object& results) {
  std::vector<Run> runs;
  const json::value* list = results.if_contains("runs");
  if (!list || !list->is_array()) return runs;
  for (const auto& v : list->get_array()) {
    const json::object* o = v.if_object();
    if (!o) continue;
    Run r;
    r.data = o;
    r.group = str(*o, {"group"});
    if (r.group.empty()) r.group = "runs";
    r.label = str(*o, {"label"});
    if (r.label.empty()) r.label = "run " + std::to_string(runs.size() + 1);
    r.figures = str(*o, {"kind"}) == "figures";
    r.concurrency = num(*o, {"config", "concurrency"});
    runs.push_back(std::move(r));
  }
  // A label used twice in a group: tell its runs apart by concurrency, else by order.
  std::map<std::pair<std::string, std::string>, int> uses;
  for (const auto& r : runs) ++uses[{r.group, r.label}];
  std::map<std::pair<std::string, std::string>, int> seen;
  for (auto& r : runs) {
    r.name = r.label;
    if (uses[{r.group, r.label}] < 2) continue;
    const int k = ++seen[{r.group, r.label}];
    r.name += !r.figures && std::isfinite(r.concurrency) && r.concurrency > 0
                  ? " c=" + fixed(r.concurrency, 0)
                  : " #" + std::to_string(k);
  }
  return runs;
}

std::string load_text(const json::object& run) {
  if (str(run, {"config", "mode"}) == "poisson")
    return "Poisson " + str(run, {"config", "rate"}) + " req/s";
  return "closed loop, concurrency " + str(run, {"config", "concurrency"});
}

// ---- the page ---------------------------------------------------------------------

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px auto; max-width: 1240px; padding: 0 8px; color: #222; }
h1 { margin-bottom: 4px; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #f2f2f2; }
td.text, th.text { text-align: left; }
td.cmd { text-align: left; font-family: monospace; font-size: 12px; }
div.plots { display: flex; flex-wrap: wrap; gap: 8px; }
div.plots svg { border: 1px solid #eee; }
)";

std::string th(const std::string& s, bool text = false) {
  return std::string(text ? "<th class=\"text\">" : "<th>") + escape(s) + "</th>";
}
std::string td(const std::string& s, const char* cls = nullptr) {
  return std::string(cls ? "<td class=\"" + std::string(cls) + "\">" : "<td>") + escape(s) + "</td>";
}

void conditions_table(std::ostringstream& h, const std::vector<Run>& runs) {
  h << "<h2>Conditions</h2>\n<table class=\"conditions\">\n<tr>" << th("group", true) << th("run", true)
    << th("date", true) << th("server / source", true) << th("model", true) << th("load", true)
    << th("prompts", true) << th("output", true) << th("notes", true) << "</tr>\n";
  for (const auto& r : runs) {
    const json::object& o = *r.data;
    h << "<tr>" << td(r.group, "text") << td(r.name, "text") << td(str(o, {"date"}), "text");
    if (r.figures) {
      h << td(str(o, {"source"}), "text") << td(str(o, {"model"}), "text") << td("", "text") << td("", "text")
        << td("", "text");
    } else {
      const std::string requests = str(o, {"config", "num_requests"});
      h << td(str(o, {"config", "url"}) + " (" + str(o, {"config", "endpoint"}) + ")", "text")
        << td(str(o, {"config", "model"}), "text")
        << td(load_text(o) + (requests.empty() || requests == "0" ? "" : ", " + requests + " requests"), "text")
        << td(str(o, {"config", "input"}), "text")
        << td(str(o, {"config", "output"}) + (str(o, {"config", "ignore_eos"}) == "true" ? ", ignore_eos" : ""),
              "text");
    }
    h << td(str(o, {"note"}), "cmd") << "</tr>\n";
  }
  h << "</table>\n";
}

void bench_table(std::ostringstream& h, const std::vector<const Run*>& runs) {
  h << "<table class=\"figures\">\n<tr>" << th("run", true) << th("concurrency") << th("ok") << th("failed")
    << th("duration s") << th("req/s") << th("output tok/s") << th("TTFT p50 ms") << th("TTFT p99 ms")
    << th("ITL p50 ms") << th("ITL p99 ms") << th("e2e p50 ms") << th("e2e p99 ms") << th("KV peak %")
    << th("waiting peak") << "</tr>\n";
  for (const Run* r : runs) {
    const json::object& o = *r->data;
    const json::value* m = o.if_contains("metrics");
    const json::object* mo = m ? m->if_object() : nullptr;
    const double kv_peak = mo ? max_of(numbers(mo->if_contains("kv_cache_usage_ratio"))) * 100 : kNaN;
    const double waiting_peak = mo ? max_of(numbers(mo->if_contains("waiting"))) : kNaN;
    h << "<tr>" << td(r->name, "text") << td(fixed(r->concurrency, 0))
      << td(fixed(num(o, {"summary", "completed"}), 0)) << td(fixed(num(o, {"summary", "failed"}), 0))
      << td(fixed(num(o, {"summary", "duration_s"}), 2)) << td(fixed(num(o, {"summary", "request_throughput"}), 2))
      << td(fixed(num(o, {"summary", "output_throughput"}), 1))
      << td(fixed(num(o, {"summary", "ttft_ms", "p50"}), 1)) << td(fixed(num(o, {"summary", "ttft_ms", "p99"}), 1))
      << td(fixed(num(o, {"summary", "itl_ms", "p50"}), 2)) << td(fixed(num(o, {"summary", "itl_ms", "p99"}), 2))
      << td(fixed(num(o, {"summary", "e2e_ms", "p50"}), 1)) << td(fixed(num(o, {"summary", "e2e_ms", "p99"}), 1))
      << td(fixed(kv_peak, 1)) << td(fixed(waiting_peak, 0)) << "</tr>\n";
  }
  h << "</table>\n";
}

void figures_table(std::ostringstream& h, const std::vector<const Run*>& runs) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const Run* r : runs)
    if (const auto* f = at(*r->data, {"figures"}); f && f->is_object())
      for (const auto& [k, v] : f->get_object())
        if (seen.insert(std::string(k)).second) keys.emplace_back(k);
  h << "<table class=\"figures\">\n<tr>" << th("run", true);
  for (const auto& k : keys) h << th(k);
  h << "</tr>\n";
  for (const Run* r : runs) {
    h << "<tr>" << td(r->name, "text");
    for (const auto& k : keys) {
      const double v = num(*r->data, {"figures", k});
      h << td(std::isfinite(v) ? (v == std::floor(v) && std::abs(v) < 1e15 ? fixed(v, 0) : fixed(v, 2))
                               : str(*r->data, {"figures", k}));
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

// Two plots side by side on a page of 1240 pixels.
constexpr int kPlotWidth = 610;

void plot(std::ostringstream& h, const svg::Chart& chart) {
  if (!chart.empty()) h << chart.render(kPlotWidth, 330);
}

void bench_plots(std::ostringstream& h, const std::vector<const Run*>& runs) {
  // Throughput and latency against concurrency, a line per label with two or more.
  std::map<std::string, std::map<double, const Run*>> by_label;
  std::vector<std::string> label_order;
  for (const Run* r : runs) {
    if (!std::isfinite(r->concurrency) || r->concurrency <= 0) continue;
    if (!by_label.count(r->label)) label_order.push_back(r->label);
    by_label[r->label][r->concurrency] = r;
  }
  bool sweep = false;
  for (const auto& [label, points] : by_label) sweep = sweep || points.size() >= 2;
  if (sweep) {
    struct Figure {
      const char* title;
      const char* y_label;
      std::initializer_list<std::string_view> path;
    };
    for (const Figure& f : {Figure{"Output throughput against concurrency", "output tokens/s", {"summary", "output_throughput"}},
                            Figure{"TTFT p50 against concurrency", "ms", {"summary", "ttft_ms", "p50"}},
                            Figure{"End-to-end latency p50 against concurrency", "ms", {"summary", "e2e_ms", "p50"}}}) {
      svg::Chart chart(f.title, "concurrency (requests in flight)", f.y_label);
      for (const auto& label : label_order) {
        const auto& points = by_label[label];
        if (points.size() < 2) continue;
        svg::Series s{label, {}, {}, svg::Series::Style::line_points};
        for (const auto& [c, r] : points) {
          s.x.push_back(c);
          s.y.push_back(num(*r->data, f.path));
        }
        chart.add(std::move(s));
      }
      plot(h, chart.x_from_zero(true));
    }
  } else {
    std::vector<svg::Bar> bars;
    for (const Run* r : runs) bars.push_back({r->name, num(*r->data, {"summary", "output_throughput"})});
    h << svg::bar_chart("Output throughput", "output tokens/s", bars, "%.1f", kPlotWidth);
  }

  svg::Chart ttft("TTFT distribution (CDF)", "time to first token (ms)", "fraction of requests");
  svg::Chart itl("Inter-token latency distribution (CDF)", "inter-token latency (ms)", "fraction of tokens");
  svg::Chart e2e("End-to-end latency distribution (CDF)", "end-to-end latency (ms)", "fraction of requests");
  svg::Chart kv("KV cache usage over time (server /metrics)", "seconds from the start of the run", "KV cache used (%)");
  svg::Chart running("Requests running over time (server /metrics)", "seconds from the start of the run", "requests");
  svg::Chart waiting("Requests waiting over time (server /metrics)", "seconds from the start of the run", "requests");
  for (const Run* r : runs) {
    const json::object& o = *r->data;
    ttft.add(svg::cdf(r->name, request_values(o, "ttft_ms")));
    itl.add(svg::cdf_from_quantiles(r->name, numbers(at(o, {"summary", "itl_ms_quantiles"}))));
    e2e.add(svg::cdf(r->name, request_values(o, "e2e_ms")));
    const std::vector<double> t = numbers(at(o, {"metrics", "t_s"}));
    std::vector<double> usage = numbers(at(o, {"metrics", "kv_cache_usage_ratio"}));
    for (double& u : usage) u *= 100;
    kv.add({r->name, t, usage, svg::Series::Style::line});
    running.add({r->name, t, numbers(at(o, {"metrics", "running"})), svg::Series::Style::line});
    waiting.add({r->name, t, numbers(at(o, {"metrics", "waiting"})), svg::Series::Style::line});
  }
  plot(h, ttft.x_from_zero(true).y_range(0, 1));
  plot(h, itl.x_from_zero(true).y_range(0, 1));
  plot(h, e2e.x_from_zero(true).y_range(0, 1));
  plot(h, kv.x_from_zero(true).y_range(0, 100));
  plot(h, running.x_from_zero(true));
  plot(h, waiting.x_from_zero(true));
}

void figures_plots(std::ostringstream& h, const std::vector<const Run*>& runs) {
  svg::Chart ttft("TTFT distribution (CDF)", "time to first token (ms)", "fraction of requests");
  svg::Chart e2e("End-to-end latency distribution (CDF)", "end-to-end latency (ms)", "fraction of requests");
  for (const Run* r : runs) {
    ttft.add(svg::cdf(r->name, numbers(r->data->if_contains("ttft_ms"))));
    e2e.add(svg::cdf(r->name, numbers(r->data->if_contains("e2e_ms"))));
  }
  plot(h, ttft.x_from_zero(true).y_range(0, 1));
  plot(h, e2e.x_from_zero(true).y_range(0, 1));
}

std::string anchor(const std::string& group) {
  std::string a = "group-";
  for (char c : group) a += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return a;
}

Status write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return make_error(Errc::io_error, tmp.string() + ": cannot write");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return make_error(Errc::io_error, path.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace

std::string render_report_html(const json::object& results, const std::string& generated) {
  const std::vector<Run> runs = runs_of(results);
  std::vector<std::string> groups;
  for (const auto& r : runs)
    if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
    << "<meta charset=\"utf-8\"/>\n<title>conveyor bench report</title>\n<style>" << kStyle << "</style>\n"
    << "</head>\n<body>\n<h1>conveyor bench report</h1>\n";
  h << "<p class=\"meta\">" << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << " in " << groups.size()
    << " group" << (groups.size() == 1 ? "" : "s") << " from results.json; page generated " << escape(generated)
    << " by <code>conveyor bench --report</code>.</p>\n";
  if (!groups.empty()) {
    h << "<ul class=\"groups\">\n";
    for (const auto& g : groups) h << "<li><a href=\"#" << escape(anchor(g)) << "\">" << escape(g) << "</a></li>\n";
    h << "</ul>\n";
  }
  conditions_table(h, runs);

  for (const auto& g : groups) {
    std::vector<const Run*> bench_runs, figure_runs;
    for (const auto& r : runs)
      if (r.group == g) (r.figures ? figure_runs : bench_runs).push_back(&r);
    h << "<h2 id=\"" << escape(anchor(g)) << "\">" << escape(g) << "</h2>\n";
    if (!bench_runs.empty()) bench_table(h, bench_runs);
    if (!figure_runs.empty()) figures_table(h, figure_runs);
    h << "<div class=\"plots\">\n";
    if (!bench_runs.empty()) bench_plots(h, bench_runs);
    if (!figure_runs.empty()) figures_plots(h, figure_runs);
    h << "</div>\n";
  }
  h << "</body>\n</html>\n";
  return h.str();
}

Expected<json::object> load_report(const std::string& dir) {
  const fs::path path = fs::path(dir) / "results.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return json::object{{"runs", json::array()}};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return make_error(Errc::io_error, path.string() + ": cannot read");
  boost::system::error_code jec;
  json::value v = json::parse(text.str(), jec);
  if (jec) return make_error(Errc::bad_format, path.string() + ": not JSON (" + jec.message() + ")");
  if (!v.is_object() || !v.get_object().contains("runs") || !v.get_object().at("runs").is_array())
    return make_error(Errc::bad_format, path.string() + ": not a report (want {\"runs\": [...]})");
  return std::move(v.get_object());
}

Status append_to_report(const std::string& dir, json::object run, const std::string& now) {
  auto results = load_report(dir);
  if (!results) return results.error();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Errc::io_error, dir + ": " + ec.message());
  if (!run.contains("date")) run["date"] = now;
  json::array& runs = results->at("runs").as_array();
  runs.push_back(std::move(run));

  // One run per line, so a diff of the file shows which runs changed.
  std::string text = "{\"runs\": [\n";
  for (size_t i = 0; i < runs.size(); ++i) text += json::serialize(runs[i]) + (i + 1 < runs.size() ? ",\n" : "\n");
  text += "]}\n";
  if (auto s = write_file(fs::path(dir) / "results.json", text); !s) return s;
  return write_file(fs::path(dir) / "index.html", render_report_html(*results, now));
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace conveyor::bench
