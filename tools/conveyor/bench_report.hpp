// `conveyor bench --report DIR`: a directory that collects runs and shows
// them. DIR/results.json holds {"runs": [run, ...]} and DIR/index.html is
// drawn from it alone (so it can be regenerated at any time): a title, the
// conditions of every run, then per group of runs a table of the headline
// figures and SVG plots (bench_svg.hpp). No scripts, no external assets.
//
// A run is one of:
//   - what `conveyor bench --json` writes ({"config", "summary", "errors",
//     "requests", "metrics"}) plus "label", "group", "date" and "note";
//   - {"kind": "figures", "label", "group", "date", "note", "source",
//     "figures": {name: number or string}, "ttft_ms"?: [...], "e2e_ms"?: [...]}
//     for figures another program measured (examples/agent_swarm --json).
//
// In a group, bench runs are plotted together: CDFs of TTFT, inter-token
// latency and end-to-end latency, and the server's KV cache usage, running
// and waiting requests over time. Where a label has runs at two or more
// concurrencies, throughput, TTFT p50 and end-to-end p50 are drawn against
// concurrency as one line per label; otherwise output throughput is a bar
// per run. Figures runs get a table and CDFs of the latencies they carry.
#pragma once

#include <string>

#include <boost/json/object.hpp>

#include "base/status.hpp"

namespace conveyor::bench {

// DIR/results.json, or {"runs": []} when DIR or the file does not exist yet.
// An error when the file is there but is not such an object (so a run never
// overwrites something it cannot read).
Expected<boost::json::object> load_report(const std::string& dir);

// The page for `results` (as load_report returns it). `generated` is the
// date printed under the title.
std::string render_report_html(const boost::json::object& results, const std::string& generated);

// Appends `run` to DIR/results.json (creating DIR) and rewrites
// DIR/index.html from all the runs in it. `now` is an ISO 8601 date.
Status append_to_report(const std::string& dir, boost::json::object run, const std::string& now);

// The current UTC time as "2025-01-31T12:34:56Z".
std::string utc_now_iso8601();

}  // namespace conveyor::bench
