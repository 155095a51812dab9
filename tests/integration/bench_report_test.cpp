// `conveyor bench --report` without a server: the SVG helper (ticks, escaping,
// one element per data point), the /metrics gauge parser, and the report
// page drawn from a results object (well-formed XML, one <svg> per plot, each
// with its data, every label escaped), appended to on disk.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <boost/json.hpp>

#include "tools/conveyor/bench_metrics.hpp"
#include "tools/conveyor/bench_report.hpp"
#include "tools/conveyor/bench_svg.hpp"

namespace conveyor::bench {
namespace {

namespace json = boost::json;

// A small XML well-formedness check (elements nest and close, attributes
// are quoted, & starts an entity, no stray <), enough for the page: the
// only non-XML construct allowed is the leading <!DOCTYPE html>. Returns
// "" or what is wrong and where.
std::string xml_error(std::string_view doc) {
  if (doc.substr(0, 15) == "<!DOCTYPE html>") doc.remove_prefix(15);
  std::vector<std::string> open;
  auto entity_ok = [&](size_t i) {
    static const std::regex entity("^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
    const auto rest = std::string(doc.substr(i, 12));
    return std::regex_search(rest, entity);
  };
  auto where = [&](size_t i) { return " at byte " + std::to_string(i) + ": " + std::string(doc.substr(i, 40)); };
  size_t i = 0;
  while (i < doc.size()) {
    if (doc[i] == '&' && !entity_ok(i)) return "bad entity" + where(i);
    if (doc[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = doc.find('>', i);
    if (end == std::string_view::npos) return "unclosed tag" + where(i);
    std::string_view tag = doc.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string_view::npos) return "< inside a tag" + where(i);
    if (!tag.empty() && tag[0] == '/') {
      const std::string name(tag.substr(1));
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">") + where(i);
      open.pop_back();
    } else {
      const bool self_closing = !tag.empty() && tag.back() == '/';
      if (self_closing) tag.remove_suffix(1);
      const size_t name_end = std::min(tag.find(' '), tag.size());
      const std::string name(tag.substr(0, name_end));
      static const std::regex name_re("^[a-zA-Z][a-zA-Z0-9:-]*$");
      if (!std::regex_match(name, name_re)) return "bad element name '" + name + "'" + where(i);
      // Attributes: name="value" pairs, values free of < and with entities only.
      std::string_view attrs = tag.substr(name_end);
      static const std::regex attr_re(R"(^\s+[a-zA-Z_:][-a-zA-Z0-9_:.]*="[^"<]*")");
      while (!attrs.empty() && attrs.find_first_not_of(' ') != std::string_view::npos) {
        std::match_results<std::string_view::const_iterator> m;
        if (!std::regex_search(attrs.begin(), attrs.end(), m, attr_re)) return "bad attribute" + where(i);
        attrs.remove_prefix(static_cast<size_t>(m.length(0)));
      }
      for (size_t k = i; k < end; ++k)
        if (doc[k] == '&' && !entity_ok(k)) return "bad entity in a tag" + where(k);
      if (!self_closing) open.push_back(name);
    }
    i = end + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The <svg> elements of a page, in order.
std::vector<std::string> svgs(const std::string& page) {
  std::vector<std::string> out;
  for (size_t at = page.find("<svg"); at != std::string::npos; at = page.find("<svg", at + 1))
    out.push_back(page.substr(at, page.find("</svg>", at) + 6 - at));
  return out;
}

std::string title_of(const std::string& svg) {
  const size_t a = svg.find("<title>") + 7;
  return svg.substr(a, svg.find("</title>") - a);
}

// Points in a polyline's points="x,y x,y ...".
size_t polyline_points(const std::string& svg) {
  size_t n = 0;
  for (size_t at = svg.find("points=\""); at != std::string::npos; at = svg.find("points=\"", at + 1)) {
    const size_t end = svg.find('"', at + 8);
    n += count(svg.substr(at + 8, end - at - 8), ",");
  }
  return n;
}

TEST(Svg, EscapeReplacesEveryMarkupCharacter) {
  EXPECT_EQ(svg::escape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  EXPECT_EQ(svg::escape("plain text, 1.5 ms"), "plain text, 1.5 ms");
}

TEST(Svg, NiceTicksCoverTheRangeInRoundSteps) {
  EXPECT_EQ(svg::nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const auto t = svg::nice_ticks(3.2, 97.1, 5);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 3.2);
  EXPECT_GE(t.back(), 97.1);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 20);
  const auto small = svg::nice_ticks(0.012, 0.018, 4);
  EXPECT_NEAR(small[1] - small[0], 0.002, 1e-12);
  EXPECT_EQ(svg::tick_label(0.004, 0.002), "0.004");
  EXPECT_EQ(svg::tick_label(40, 20), "40");
  // A single value still gets a range around it.
  const auto one = svg::nice_ticks(5, 5, 5);
  EXPECT_LT(one.front(), 5);
  EXPECT_GT(one.back(), 5);
}

TEST(Svg, CdfRisesToOneOverSortedSamples) {
  const auto s = svg::cdf("x", {3, 1, 2, 4});
  EXPECT_EQ(s.x, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(s.y, (std::vector<double>{0.25, 0.5, 0.75, 1}));
  std::vector<double> many(10000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(many.size() - i);
  const auto thin = svg::cdf("y", many, 100);
  EXPECT_EQ(thin.x.size(), 100u);
  EXPECT_EQ(thin.x.front(), 1);
  EXPECT_EQ(thin.x.back(), 10000);
  EXPECT_EQ(thin.y.back(), 1);
  EXPECT_TRUE(std::is_sorted(thin.x.begin(), thin.x.end()));
}

TEST(Svg, ChartDrawsEverySeriesPointWithEscapedLabels) {
  svg::Chart chart("TTFT <ms> & more", "x \"quoted\"", "y");
  chart.add({"a<b", {1, 2, 3}, {10, 20, 15}, svg::Series::Style::line});
  chart.add({"c&d", {1, 2}, {5, 7}, svg::Series::Style::line_points});
  const std::string out = chart.render();
  EXPECT_EQ(xml_error(out), "");
  EXPECT_EQ(count(out, "<polyline"), 2u);
  EXPECT_EQ(polyline_points(out), 5u);
  EXPECT_EQ(count(out, "<circle"), 2u);  // line_points: a dot on each of its points
  EXPECT_NE(out.find("TTFT &lt;ms&gt; &amp; more"), std::string::npos);
  EXPECT_NE(out.find("x &quot;quoted&quot;"), std::string::npos);
  EXPECT_NE(out.find(">a&lt;b</text>"), std::string::npos);  // the legend
  EXPECT_NE(out.find(">c&amp;d</text>"), std::string::npos);
  EXPECT_EQ(out.find("a<b"), std::string::npos);

  // A step series doubles its corners; points draw circles only.
  svg::Chart step("s", "x", "y");
  step.add({"", {1, 2, 3}, {0.2, 0.5, 1}, svg::Series::Style::step});
  step.add({"", {1, 2}, {0.1, 0.2}, svg::Series::Style::points});
  const std::string s = step.render();
  EXPECT_EQ(xml_error(s), "");
  EXPECT_EQ(polyline_points(s), 5u);
  EXPECT_EQ(count(s, "<circle"), 2u);

  svg::Chart empty("nothing", "x", "y");
  empty.add({"nan", {std::nan("")}, {1}, svg::Series::Style::line});
  EXPECT_TRUE(empty.empty());
  EXPECT_NE(empty.render().find("no data"), std::string::npos);
}

TEST(Svg, BarChartHasOneBarPerEntry) {
  const std::string out = svg::bar_chart("Throughput", "tok/s", {{"static", 120.5}, {"cont<inuous>", 410}});
  EXPECT_EQ(xml_error(out), "");
  EXPECT_EQ(count(out, "<rect"), 3u);  // the background and two bars
  EXPECT_NE(out.find("cont&lt;inuous&gt;"), std::string::npos);
  EXPECT_NE(out.find(">410.0</text>"), std::string::npos);
}

TEST(Metrics, PrometheusValuesByExactName) {
  const std::string text =
      "# HELP conveyor:kv_cache_usage_ratio KV\n"
      "# TYPE conveyor:kv_cache_usage_ratio gauge\n"
      "conveyor:kv_cache_usage_ratio_other 9\n"
      "conveyor:kv_cache_usage_ratio 0.375\n"
      "conveyor:num_requests_running 12\n"
      "conveyor:num_preemptions_total{mode=\"swap\"} 4\n";
  EXPECT_EQ(prometheus_value(text, "conveyor:kv_cache_usage_ratio"), 0.375);
  EXPECT_EQ(prometheus_value(text, "conveyor:num_preemptions_total"), 4);
  EXPECT_FALSE(prometheus_value(text, "conveyor:num_requests"));
  const auto s = parse_engine_gauges(text);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kv_cache_usage, 0.375);
  EXPECT_EQ(s->running, 12);
  EXPECT_EQ(s->waiting, 0);
  EXPECT_FALSE(parse_engine_gauges("vllm:kv_cache_usage_perc 0.5\n"));

  MetricsSeries series{0.25, {{0, 0.1, 1, 0}, {0.25, 0.5, 4, 2}}, ""};
  const auto j = to_json(series);
  EXPECT_EQ(j.at("t_s").as_array().size(), 2u);
  EXPECT_EQ(j.at("kv_cache_usage_ratio").as_array()[1].as_double(), 0.5);
  EXPECT_EQ(j.at("waiting").as_array()[1].as_double(), 2);
  EXPECT_FALSE(j.contains("error"));
}

// A bench run as `conveyor bench --json` writes it (the fields the page reads).
json::object bench_run(const std::string& label, int concurrency, double throughput) {
  json::array requests;
  for (int i = 0; i < 5; ++i)
    requests.push_back(json::object{{"ok", true}, {"ttft_ms", 10.0 * (i + 1)}, {"e2e_ms", 100.0 + 20 * i}});
  requests.push_back(json::object{{"ok", false}, {"ttft_ms", 0.0}, {"e2e_ms", 1.0}, {"error", "http 429"}});
  json::array quantiles;
  for (int p = 0; p <= 100; ++p) quantiles.push_back(1.0 + 0.05 * p);
  return {{"label", label},
          {"group", "batching <sweep>"},
          {"date", "2025-01-01T00:00:00Z"},
          {"note", "serve --batching continuous & --port 1"},
          {"config", {{"url", "http://127.0.0.1:1"}, {"endpoint", "completions"}, {"model", "m"},
                      {"mode", "closed"}, {"concurrency", concurrency}, {"num_requests", 6},
                      {"input", "fixed:16"}, {"output", "fixed:8"}, {"ignore_eos", true}}},
          {"summary", {{"completed", 5}, {"failed", 1}, {"duration_s", 2.0}, {"request_throughput", 2.5},
                       {"output_throughput", throughput},
                       {"ttft_ms", {{"p50", 30.0}, {"p99", 50.0}}},
                       {"itl_ms", {{"p50", 3.5}, {"p99", 6.0}}},
                       {"e2e_ms", {{"p50", 140.0}, {"p99", 180.0}}},
                       {"itl_ms_quantiles", quantiles}}},
          {"requests", requests},
          {"metrics", {{"interval_s", 0.25}, {"t_s", {0.0, 0.25, 0.5, 0.75}},
                       {"kv_cache_usage_ratio", {0.0, 0.4, 0.8, 0.1}}, {"running", {0, 3, 4, 1}},
                       {"waiting", {0, 1, 0, 0}}}}};
}

TEST(Report, PageIsWellFormedWithOneSvgPerPlotEachWithItsData) {
  json::array runs{bench_run("<b>continuous</b>", 1, 100), bench_run("<b>continuous</b>", 4, 300),
                   bench_run("static", 1, 90), bench_run("static", 4, 150)};
  runs.push_back(json::object{{"kind", "figures"}, {"label", "wait & see"}, {"group", "swarm"},
                              {"source", "examples/agent_swarm"},
                              {"figures", {{"throughput_tok_s", 812.5}, {"prefix_waits", 767}, {"mode", "inprocess"}}},
                              {"ttft_ms", {12.0, 30.0, 18.0}}, {"e2e_ms", {100.0, 140.0, 120.0}}});
  const std::string page = render_report_html(json::object{{"runs", runs}}, "2025-01-01 <now>");
  ASSERT_EQ(xml_error(page), "") << page.substr(0, 2000);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);  // no external assets
  EXPECT_EQ(page.find("href=\"http"), std::string::npos);

  // The title, the conditions, a table of headline figures per group, then plots.
  EXPECT_NE(page.find("<h1>conveyor bench report</h1>"), std::string::npos);
  EXPECT_NE(page.find("2025-01-01 &lt;now&gt;"), std::string::npos);
  EXPECT_NE(page.find("serve --batching continuous &amp; --port 1"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;continuous&lt;/b&gt; c=4"), std::string::npos);
  EXPECT_EQ(page.find("<b>continuous"), std::string::npos);
  EXPECT_NE(page.find("<td>300.0</td>"), std::string::npos);  // output tok/s in the table
  EXPECT_NE(page.find("<td>80.0</td>"), std::string::npos);   // KV peak %
  EXPECT_NE(page.find("<td>767</td>"), std::string::npos);    // a figure of the swarm

  const auto plots = svgs(page);
  std::vector<std::string> titles;
  for (const auto& s : plots) titles.push_back(title_of(s));
  const std::vector<std::string> expected{
      "Output throughput against concurrency", "TTFT p50 against concurrency",
      "End-to-end latency p50 against concurrency", "TTFT distribution (CDF)",
      "Inter-token latency distribution (CDF)", "End-to-end latency distribution (CDF)",
      "KV cache usage over time (server /metrics)", "Requests running over time (server /metrics)",
      "Requests waiting over time (server /metrics)",
      // the swarm group
      "TTFT distribution (CDF)", "End-to-end latency distribution (CDF)"};
  EXPECT_EQ(titles, expected);
  // Every plot draws every run's data: 2 labels x 2 concurrencies; 4 runs with
  // 5 successful requests (CDF steps: 2n - 1 points), 101 quantiles, 4 samples.
  const std::vector<size_t> points{4, 4, 4, 4 * 9, 4 * 101, 4 * 9, 4 * 4, 4 * 4, 4 * 4, 5, 5};
  for (size_t i = 0; i < plots.size() && i < points.size(); ++i) {
    EXPECT_EQ(polyline_points(plots[i]), points[i]) << titles[i];
    EXPECT_EQ(xml_error(plots[i]), "") << titles[i];
  }
  EXPECT_NE(plots[0].find(">static</text>"), std::string::npos);  // the legend names the lines

  // Runs at one concurrency each: throughput as a bar per run instead of lines.
  const std::string bars = render_report_html(
      json::object{{"runs", json::array{bench_run("continuous", 8, 400), bench_run("static", 8, 120)}}}, "now");
  EXPECT_EQ(xml_error(bars), "");
  EXPECT_EQ(title_of(svgs(bars).front()), "Output throughput");
  EXPECT_EQ(count(svgs(bars).front(), "<rect"), 3u);
}

class ReportDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("conveyor_report_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path dir_;
};

TEST_F(ReportDir, AppendKeepsEveryRunAndRedrawsThePage) {
  auto empty = load_report(dir_.string());
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->at("runs").as_array().empty());

  ASSERT_TRUE(append_to_report(dir_.string(), bench_run("a", 1, 10), "t1"));
  ASSERT_TRUE(append_to_report(dir_.string(), bench_run("a", 2, 20), "t2"));
  auto loaded = load_report(dir_.string());
  ASSERT_TRUE(loaded);
  const auto& runs = loaded->at("runs").as_array();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].at("config").at("concurrency").as_int64(), 2);
  const std::string page = read("index.html");
  EXPECT_EQ(xml_error(page), "");
  EXPECT_NE(page.find("2 runs in 1 group"), std::string::npos);
  EXPECT_NE(page.find("generated t2"), std::string::npos);
  EXPECT_NE(page.find("Output throughput against concurrency"), std::string::npos);
}

TEST_F(ReportDir, AFileThatIsNotAReportIsNeverOverwritten) {
  std::filesystem::create_directories(dir_);
  { std::ofstream(dir_ / "results.json") << "{\"summary\": {}}"; }
  EXPECT_FALSE(load_report(dir_.string()));
  EXPECT_FALSE(append_to_report(dir_.string(), bench_run("a", 1, 10), "t"));
  EXPECT_EQ(read("results.json"), "{\"summary\": {}}");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "index.html"));
}

}  // namespace
}  // namespace conveyor::bench
