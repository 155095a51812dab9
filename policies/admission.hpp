// The admission rule: which waiting requests start now, which are refused.
//
// All three policies walk the candidates in queue order (the scheduler lists
// them as WaitingQueue orders them) and stop at the first one that does not
// fit, so a large request at the head is not overtaken forever by small ones
// behind it. A candidate whose prompt (plus the one slot its first generated
// token needs) is larger than the whole cache can never run: it is rejected,
// with a reason, and the walk goes on. Admission also stops at max_running.
// An empty cache (nothing running, nothing owed, every block free) admits
// the first candidate that can run whatever its footprint and `keep` say: a
// footprint near the whole cache would otherwise leave it, and the queue
// behind it, waiting forever.
//
// Each admitted request is charged a footprint in blocks against
//   budget = free_blocks - reserved_blocks - keep
// and the policies differ in the footprint and in `keep`. One exception for
// all: the head of the queue is admitted into an empty cache whenever its
// prompt fits, whatever its footprint and `keep` (else it would wait forever). A request with
// n samples counts as n running sequences; its generated tokens are charged
// n times, plus one block per extra sample for the copy-on-write of the
// prompt's last, partly filled block.
//   conservative  footprint = prompt + max_tokens, keep = 0: an admitted
//                 request can always finish without preemption (provided the
//                 scheduler passes the blocks it still owes running requests
//                 as reserved_blocks). A footprint above the whole cache is
//                 capped at the whole cache: such a request waits for an empty
//                 cache, it is not refused.
//   watermark     footprint = prompt (with its first token's slot), keep =
//                 watermark * total_blocks: a request is admitted only if
//                 the free blocks left after its prompt (and the blocks owed
//                 to running requests) stay at or above the watermark
//                 (vLLM's rule). The watermark is a test at admission, not a
//                 reserve: running sequences grow into those blocks freely,
//                 and past them growth is left to preemption. It guarantees
//                 no request a finish without preemption.
//   profiled      footprint = prompt + min(max_tokens, q-quantile of observed
//                 output lengths), keep = reserve_fraction * total_blocks.
//                 Until min_observations requests have finished
//                 (record_finished), it behaves as conservative.
//
// Thread-safety: none; one owner (the admission policy actor).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "policies/length_histogram.hpp"

namespace conveyor {

enum class AdmissionMode : uint8_t { conservative, watermark, profiled };
const char* to_string(AdmissionMode mode);
// "conservative" | "watermark" | "profiled".
Expected<AdmissionMode> parse_admission_mode(std::string_view name);

// One waiting request, as the policy sees it.
struct AdmissionCandidate {
  uint64_t id = 0;
  int32_t prompt_tokens = 0;  // tokens to prefill (prompt, plus generated ones after a recompute)
  int32_t max_tokens = 0;     // tokens it may still generate
  int32_t priority = 0;
  uint64_t arrival = 0;
  int32_t num_samples = 1;    // n > 1: sequences it becomes at its first token (sharing the prompt)
  std::string tenant;         // GenerateRequest::tenant
};

// What the running sequences of one tenant hold (GenerateRequest::tenant).
struct TenantUsage {
  std::string tenant;
  int32_t blocks = 0;         // device blocks held (a block shared by two sequences counts twice)
  int32_t sequences = 0;
};

struct AdmissionQuery {
  int32_t free_blocks = 0;      // blocks a new request can take now (free + evictable cached)
  int32_t total_blocks = 0;
  int32_t block_size = 16;
  int32_t num_running = 0;
  int32_t max_running = 256;
  int32_t reserved_blocks = 0;  // blocks promised to running requests but not yet taken
  std::vector<AdmissionCandidate> candidates;  // in queue order
  // The running sequences' blocks by tenant, for the tenants of the
  // candidates only (none when no candidate names a tenant).
  std::vector<TenantUsage> tenants;
};

struct AdmissionDecision {
  std::vector<uint64_t> admitted;                        // in order
  std::vector<int32_t> footprints;                       // blocks charged, parallel to admitted
  std::vector<std::pair<uint64_t, std::string>> rejected;  // id, why
  void clear() {
    admitted.clear();
    footprints.clear();
    rejected.clear();
  }
};

struct AdmissionConfig {
  double watermark = 0.01;          // watermark: fraction of the cache kept free
  double percentile = 0.9;          // profiled: output-length quantile reserved per request
  double reserve_fraction = 0.05;   // profiled: fraction of the cache kept as a buffer
  int32_t min_observations = 32;   // profiled: finished requests needed before predicting
  int64_t history_window = 4096;    // profiled: halve the histogram every N observations (0: never)
};

class AdmissionPolicy {
 public:
  virtual ~AdmissionPolicy() = default;
  virtual AdmissionMode mode() const = 0;

  // Fills `out` (cleared first) for q.
  void decide(const AdmissionQuery& q, AdmissionDecision& out) const;
  AdmissionDecision operator()(const AdmissionQuery& q) const {
    AdmissionDecision d;
    decide(q, d);
    return d;
  }

  // A request finished after generating output_tokens (profiled learns from it).
  virtual void record_finished(int32_t output_tokens) { (void)output_tokens; }

 protected:
  // Tokens to reserve for c (capped later at the whole cache).
  virtual int64_t footprint_tokens(const AdmissionCandidate& c) const = 0;
  // Blocks that must stay free after admission.
  virtual int32_t keep_blocks(const AdmissionQuery& q) const = 0;
};

class ConservativeAdmission : public AdmissionPolicy {
 public:
  AdmissionMode mode() const override { return AdmissionMode::conservative; }

 protected:
  int64_t footprint_tokens(const AdmissionCandidate& c) const override;
  int32_t keep_blocks(const AdmissionQuery&) const override { return 0; }
};

class WatermarkAdmission : public AdmissionPolicy {
 public:
  explicit WatermarkAdmission(double watermark = 0.01) : watermark_(watermark) {}
  AdmissionMode mode() const override { return AdmissionMode::watermark; }

 protected:
  int64_t footprint_tokens(const AdmissionCandidate& c) const override;
  int32_t keep_blocks(const AdmissionQuery& q) const override;

 private:
  double watermark_;
};

class ProfiledAdmission : public AdmissionPolicy {
 public:
  explicit ProfiledAdmission(const AdmissionConfig& config = {});
  AdmissionMode mode() const override { return AdmissionMode::profiled; }
  void record_finished(int32_t output_tokens) override;

  // The output length reserved now for a request allowed max_tokens; -1
  // while too few requests have finished (then max_tokens is reserved).
  int32_t predicted_output(int32_t max_tokens) const;
  const LengthHistogram& history() const { return history_; }

 protected:
  int64_t footprint_tokens(const AdmissionCandidate& c) const override;
  int32_t keep_blocks(const AdmissionQuery& q) const override;

 private:
  bool warmed_up() const { return history_.recorded() >= uint64_t(config_.min_observations); }

  AdmissionConfig config_;
  LengthHistogram history_;
};

std::unique_ptr<AdmissionPolicy> make_admission_policy(AdmissionMode mode,
                                                       const AdmissionConfig& config = {});
// By name; an unknown name is an error naming the choices.
Expected<std::unique_ptr<AdmissionPolicy>> make_admission_policy(std::string_view name,
                                                                 const AdmissionConfig& config = {});

}  // namespace conveyor
