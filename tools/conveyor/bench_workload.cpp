#include "tools/conveyor/bench_workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

namespace conveyor::bench {

uint64_t Rng::next_u64() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  const auto span = static_cast<double>(hi - lo + 1);
  return std::min(hi, lo + static_cast<int64_t>(uniform01() * span));
}

double Rng::exponential(double mean) { return -mean * std::log1p(-uniform01()); }

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

template <class T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

Error bad_dist(std::string_view spec, const std::string& why) {
  return make_error(Errc::invalid_argument,
                    "bad length distribution '" + std::string(spec) + "': " + why +
                        " (use fixed:N, uniform:A:B or exponential:MEAN[:CAP])");
}

}  // namespace

Expected<LengthDist> LengthDist::parse(std::string_view spec) {
  const auto parts = split(spec, ':');
  const std::string_view kind = parts[0];
  LengthDist d;
  if (kind == "fixed") {
    if (parts.size() != 2 || !parse_number(parts[1], d.a)) return bad_dist(spec, "fixed takes one integer");
    if (d.a < 1) return bad_dist(spec, "lengths must be at least 1");
    return fixed(d.a);
  }
  if (kind == "uniform") {
    d.kind = Kind::uniform;
    if (parts.size() != 3 || !parse_number(parts[1], d.a) || !parse_number(parts[2], d.b))
      return bad_dist(spec, "uniform takes two integers");
    if (d.a < 1 || d.b < d.a) return bad_dist(spec, "need 1 <= A <= B");
    return d;
  }
  if (kind == "exponential") {
    d.kind = Kind::exponential;
    if (parts.size() < 2 || parts.size() > 3 || !parse_number(parts[1], d.mean))
      return bad_dist(spec, "exponential takes a mean and an optional integer cap");
    if (!(d.mean >= 1.0) || !std::isfinite(d.mean)) return bad_dist(spec, "the mean must be at least 1");
    if (parts.size() == 3 && (!parse_number(parts[2], d.cap) || d.cap < 1))
      return bad_dist(spec, "the cap must be an integer of at least 1");
    return d;
  }
  return bad_dist(spec, "unknown kind '" + std::string(kind) + "'");
}

int64_t LengthDist::draw(Rng& rng) const {
  switch (kind) {
    case Kind::fixed: return a;
    case Kind::uniform: return rng.uniform_int(a, b);
    case Kind::exponential: {
      auto n = std::max<int64_t>(1, std::llround(rng.exponential(mean)));
      return cap > 0 ? std::min(n, cap) : n;
    }
  }
  return a;
}

std::string LengthDist::describe() const {
  switch (kind) {
    case Kind::fixed: return "fixed:" + std::to_string(a);
    case Kind::uniform: return "uniform:" + std::to_string(a) + ":" + std::to_string(b);
    case Kind::exponential: {
      std::ostringstream os;
      os << "exponential:" << mean;
      if (cap > 0) os << ":" << cap;
      return os.str();
    }
  }
  return {};
}

Expected<std::vector<DatasetEntry>> parse_dataset(std::string_view jsonl, const std::string& name) {
  std::vector<DatasetEntry> entries;
  size_t line_no = 0;
  size_t start = 0;
  while (start < jsonl.size()) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view line = jsonl.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = name + ":" + std::to_string(line_no) + ": ";
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(line, ec);
    if (ec) return make_error(Errc::bad_format, where + "not JSON (" + ec.message() + ")");
    const auto* obj = v.if_object();
    const auto* prompt = obj ? obj->if_contains("prompt") : nullptr;
    if (!prompt) return make_error(Errc::bad_format, where + "expected an object with \"prompt\"");
    DatasetEntry e;
    if (const auto* s = prompt->if_string()) {
      e.prompt_text = std::string(s->data(), s->size());
      e.prompt_is_text = true;
      if (e.prompt_text.empty()) return make_error(Errc::bad_format, where + "empty prompt");
    } else if (const auto* arr = prompt->if_array()) {
      for (const auto& id : *arr) {
        const auto* n = id.if_int64();
        if (!n || *n < 0 || *n > INT32_MAX)
          return make_error(Errc::bad_format, where + "\"prompt\" array must hold token ids");
        e.prompt_ids.push_back(static_cast<int32_t>(*n));
      }
      if (e.prompt_ids.empty()) return make_error(Errc::bad_format, where + "empty prompt");
    } else {
      return make_error(Errc::bad_format, where + "\"prompt\" must be a string or an array of token ids");
    }
    if (const auto* mt = obj->if_contains("max_tokens")) {
      const auto* n = mt->if_int64();
      if (!n || *n < 1) return make_error(Errc::bad_format, where + "\"max_tokens\" must be a positive integer");
      e.max_tokens = *n;
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return make_error(Errc::bad_format, name + ": no prompts");
  return entries;
}

Expected<std::vector<DatasetEntry>> load_dataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io_error, path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_dataset(text.str(), path);
}

WorkloadSource::WorkloadSource(LengthDist input, LengthDist output, bool chat, uint64_t seed)
    : input_(input), output_(output), chat_(chat), rng_(seed) {}

WorkloadSource::WorkloadSource(std::vector<DatasetEntry> dataset, LengthDist output, uint64_t seed)
    : output_(output), dataset_(std::move(dataset)), rng_(seed) {}

namespace {
// Short common words: about one token each in SentencePiece and BPE
// vocabularies (several in a byte-level one).
constexpr std::string_view kWords[] = {
    "the", "a", "of", "and", "to", "in", "is", "it", "was", "for", "on", "with", "he", "she",
    "as", "at", "by", "one", "day", "cat", "dog", "sun", "tree", "big", "little", "red",
    "blue", "happy", "friend", "play", "went", "saw", "said", "time", "home", "park"};
}  // namespace

RequestSpec WorkloadSource::next() {
  RequestSpec spec;
  if (!dataset_.empty()) {
    const DatasetEntry& e = dataset_[next_entry_];
    next_entry_ = (next_entry_ + 1) % dataset_.size();
    spec.prompt_ids = e.prompt_ids;
    spec.prompt_text = e.prompt_text;
    spec.prompt_is_text = e.prompt_is_text;
    spec.prompt_len_hint = e.prompt_is_text ? 0 : static_cast<int64_t>(e.prompt_ids.size());
    spec.max_tokens = e.max_tokens ? *e.max_tokens : output_.draw(rng_);
    return spec;
  }
  const int64_t n = input_.draw(rng_);
  spec.prompt_len_hint = n;
  if (chat_) {
    spec.prompt_is_text = true;
    for (int64_t i = 0; i < n; ++i) {
      if (i) spec.prompt_text += ' ';
      spec.prompt_text += kWords[rng_.uniform_int(0, std::size(kWords) - 1)];
    }
  } else {
    spec.prompt_ids.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      spec.prompt_ids.push_back(static_cast<int32_t>(rng_.uniform_int(kMinTokenId, kMaxTokenId)));
  }
  spec.max_tokens = output_.draw(rng_);
  return spec;
}

double PoissonArrivals::next() {
  t_ += rng_.exponential(1.0 / rate_);
  return t_;
}

}  // namespace conveyor::bench
