#include "engine/speculation.hpp"

#include <algorithm>

#include "grammar/matcher.hpp"

namespace conveyor {

Expected<SpeculativeChoice> parse_speculative(std::string_view text) {
  if (text == "none" || text.empty()) return SpeculativeChoice{};
  if (text == "ngram") return SpeculativeChoice{SpeculativeMethod::ngram, {}};
  if (text == "suffix") return SpeculativeChoice{SpeculativeMethod::suffix, {}};
  if (text.starts_with("draft:")) {
    if (text.size() == 6)
      return make_error(Errc::invalid_argument, "--speculative draft:FILE: the draft model's file is missing");
    return SpeculativeChoice{SpeculativeMethod::draft, std::string(text.substr(6))};
  }
  return make_error(Errc::invalid_argument, "unknown speculative method '" + std::string(text) +
                                                "' (expected none, ngram, suffix or draft:FILE)");
}

const char* to_string(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::ngram: return "ngram";
    case SpeculativeMethod::suffix: return "suffix";
    case SpeculativeMethod::draft: return "draft";
    case SpeculativeMethod::none: break;
  }
  return "none";
}

std::string to_string(const SpeculativeChoice& choice) {
  if (choice.method == SpeculativeMethod::draft) return "draft:" + choice.draft_model;
  return to_string(choice.method);
}

Status validate(const SpeculativeConfig& c) {
  auto bad = [](const char* flag, const std::string& what) {
    return make_error(Errc::invalid_argument, std::string("--") + flag + ": " + what);
  };
  if (c.num_tokens < 0 || c.num_tokens > 16) return bad("speculative-tokens", "must be between 0 and 16");
  if (c.ngram_min < 1 || c.ngram_min > 16) return bad("speculative-ngram-min", "must be between 1 and 16");
  if (c.ngram_max < c.ngram_min || c.ngram_max > 16)
    return bad("speculative-ngram-max", "must be between --speculative-ngram-min and 16");
  if (c.disable_batch < 1) return bad("speculative-disable-batch", "must be at least 1");
  if ((c.method == SpeculativeMethod::draft) != !c.draft_model.empty())
    return bad("speculative", "a draft model goes with the draft method, as draft:FILE");
  return Status::ok();
}

int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<int32_t>& drafts) {
  drafts.clear();
  const auto len = int64_t(tokens.size());
  if (k <= 0) return 0;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size_t(len - n));
    // The latest occurrence that ends before the suffix itself does.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (tokens[size_t(start)] != suffix[0] ||
          !std::equal(suffix.begin(), suffix.end(), tokens.begin() + start))
        continue;
      // What followed it; past the end of `tokens`, the drafts themselves
      // (a cycle shorter than k repeats).
      const int64_t from = start + n;
      for (int64_t i = from; i < from + k; ++i)
        drafts.push_back(i < len ? tokens[size_t(i)] : drafts[size_t(i - len)]);
      return int32_t(n);
    }
  }
  return 0;
}

void propose_forced(const grammar::CompiledGrammar& grammar, grammar::Matcher& matcher, int32_t k,
                    std::vector<int32_t>& drafts) {
  drafts.clear();
  if (k <= 0 || matcher.is_terminated()) return;
  // Forced bytes and forced tokens (a token element), in turn, while each
  // run of bytes ends on a token boundary.
  for (bool more = true; more && int32_t(drafts.size()) < k;) {
    if (const int32_t token = matcher.forced_token(); token >= 0) {
      if (!matcher.accept_token(token)) break;
      drafts.push_back(token);
      continue;
    }
    const std::string forced = matcher.forced_bytes(256);
    std::string_view rest = forced;
    while (int32_t(drafts.size()) < k && !rest.empty()) {
      const auto [token, length] = grammar.vocabulary().longest_prefix(rest);
      if (token < 0 || !matcher.accept_token(token)) break;
      drafts.push_back(token);
      rest.remove_prefix(length);
    }
    more = !forced.empty() && rest.empty();
  }
  matcher.rollback(int32_t(drafts.size()));
}

void DraftLength::update(int32_t drafted, int32_t accepted, int32_t most) {
  if (drafted <= 0) return;
  next = accepted == drafted ? std::min(most, drafted + 1) : std::min(most, accepted + 1);
  misses = accepted == 0 ? misses + 1 : 0;
  if (misses >= 2) pause = std::min(32, 1 << std::min(misses - 1, 5));
}

bool DraftLength::may_draft() {
  if (pause == 0) return true;
  --pause;
  return false;
}

}  // namespace conveyor
