#include "policies/admission.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor {

const char* to_string(AdmissionMode mode) {
  switch (mode) {
    case AdmissionMode::conservative: return "conservative";
    case AdmissionMode::watermark: return "watermark";
    case AdmissionMode::profiled: return "profiled";
  }
  return "?";
}

Expected<AdmissionMode> parse_admission_mode(std::string_view name) {
  if (name == "conservative") return AdmissionMode::conservative;
  if (name == "watermark") return AdmissionMode::watermark;
  if (name == "profiled") return AdmissionMode::profiled;
  return make_error(Errc::invalid_argument, "unknown admission policy '" + std::string(name) +
                                                "' (expected conservative, watermark or profiled)");
}

namespace {

int64_t blocks_for(int64_t tokens, int32_t block_size) {
  return (std::max<int64_t>(tokens, 0) + block_size - 1) / block_size;
}

int32_t fraction_of(double fraction, int32_t total) {
  return int32_t(std::ceil(std::clamp(fraction, 0.0, 1.0) * double(total)));
}

}  // namespace

void AdmissionPolicy::decide(const AdmissionQuery& q, AdmissionDecision& out) const {
  out.clear();
  const int32_t block_size = std::max(q.block_size, 1);
  int64_t budget = int64_t(q.free_blocks) - q.reserved_blocks - keep_blocks(q);
  int32_t running = q.num_running;
  // An empty cache admits the head of the queue whenever its prompt fits,
  // even if the policy's estimate of its footprint, plus the blocks it keeps
  // free, is more than the cache: else it, and all behind it, would wait
  // forever. (It grows into the cache; past that it is preempted or ends at
  // its length, as any running sequence.)
  const bool empty = q.num_running == 0 && q.reserved_blocks == 0 && q.free_blocks >= q.total_blocks;
  bool blocked = false;  // head of line did not fit: only rejections from here on
  for (const AdmissionCandidate& c : q.candidates) {
    int64_t prompt_blocks = blocks_for(int64_t(c.prompt_tokens) + 1, block_size);
    if (c.prompt_tokens <= 0 || prompt_blocks > q.total_blocks) {
      out.rejected.emplace_back(
          c.id, c.prompt_tokens <= 0
                    ? std::string("the prompt is empty")
                    : "the prompt needs " + std::to_string(prompt_blocks) +
                          " KV blocks; the whole cache holds " + std::to_string(q.total_blocks));
      continue;
    }
    const int32_t samples = std::max(c.num_samples, 1);
    if (blocked || running + samples > q.max_running) {
      blocked = true;
      continue;
    }
    int64_t footprint = std::clamp<int64_t>(
        blocks_for(footprint_tokens(c), block_size) + (samples - 1), prompt_blocks, q.total_blocks);
    const bool head_of_empty = empty && out.admitted.empty() && prompt_blocks + (samples - 1) <= q.free_blocks;
    if (footprint > budget && !head_of_empty) {
      blocked = true;
      continue;
    }
    budget -= footprint;
    running += samples;
    out.admitted.push_back(c.id);
    out.footprints.push_back(int32_t(footprint));
  }
}

int64_t ConservativeAdmission::footprint_tokens(const AdmissionCandidate& c) const {
  return int64_t(c.prompt_tokens) + int64_t(std::max(c.num_samples, 1)) * std::max(c.max_tokens, 1);
}

int64_t WatermarkAdmission::footprint_tokens(const AdmissionCandidate& c) const {
  return c.prompt_tokens;
}

int32_t WatermarkAdmission::keep_blocks(const AdmissionQuery& q) const {
  return fraction_of(watermark_, q.total_blocks);
}

ProfiledAdmission::ProfiledAdmission(const AdmissionConfig& config)
    : config_(config), history_(config.history_window) {}

void ProfiledAdmission::record_finished(int32_t output_tokens) { history_.record(output_tokens); }

int32_t ProfiledAdmission::predicted_output(int32_t max_tokens) const {
  if (!warmed_up()) return -1;
  return std::min(std::max(max_tokens, 1), std::max(history_.quantile(config_.percentile), 1));
}

int64_t ProfiledAdmission::footprint_tokens(const AdmissionCandidate& c) const {
  int32_t out = predicted_output(c.max_tokens);
  return int64_t(c.prompt_tokens) +
         int64_t(std::max(c.num_samples, 1)) * (out < 0 ? std::max(c.max_tokens, 1) : out);
}

int32_t ProfiledAdmission::keep_blocks(const AdmissionQuery& q) const {
  return warmed_up() ? fraction_of(config_.reserve_fraction, q.total_blocks) : 0;
}

std::unique_ptr<AdmissionPolicy> make_admission_policy(AdmissionMode mode,
                                                       const AdmissionConfig& config) {
  switch (mode) {
    case AdmissionMode::conservative: return std::make_unique<ConservativeAdmission>();
    case AdmissionMode::watermark: return std::make_unique<WatermarkAdmission>(config.watermark);
    case AdmissionMode::profiled: return std::make_unique<ProfiledAdmission>(config);
  }
  return nullptr;
}

Expected<std::unique_ptr<AdmissionPolicy>> make_admission_policy(std::string_view name,
                                                                 const AdmissionConfig& config) {
  Expected<AdmissionMode> mode = parse_admission_mode(name);
  if (!mode) return mode.error();
  return make_admission_policy(*mode, config);
}

}  // namespace conveyor
