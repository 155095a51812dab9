#include "engine/fault_injection.hpp"

#include <charconv>

namespace conveyor {
namespace {

constexpr std::array<std::string_view, kFaultPoints> kNames = {"executor", "swap", "alloc"};
constexpr std::array<std::string_view, kFaultPoints> kEvents = {"executor step", "swap order",
                                                                 "allocation batch"};

}  // namespace

Expected<std::shared_ptr<FaultInjector>> FaultInjector::parse(std::string_view spec) {
  auto injector = std::make_shared<FaultInjector>();
  auto bad = [](std::string_view item, const std::string& why) {
    return make_error(Errc::invalid_argument,
                      "fault injection: '" + std::string(item) + "': " + why +
                          " (expected executor|swap|alloc=N or =N+, comma-separated)");
  };
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return bad(item, "no '='");
    const std::string_view name = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    size_t index = kFaultPoints;
    for (size_t i = 0; i < kFaultPoints; ++i)
      if (kNames[i] == name) index = i;
    if (index == kFaultPoints) return bad(item, "unknown fault point");
    Point& p = injector->points_[index];
    if (p.at != 0) return bad(item, "given twice");
    if (!value.empty() && value.back() == '+') {
      p.onward = true;
      value.remove_suffix(1);
    }
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size() || n < 1)
      return bad(item, "N must be a whole number >= 1");
    p.at = n;
  }
  return injector;
}

bool FaultInjector::hit(FaultPoint point) {
  Point& p = points_[size_t(point)];
  const int64_t n = ++p.seen;
  return p.at != 0 && (n == p.at || (p.onward && n > p.at));
}

std::string describe_fault(FaultPoint point, int64_t n) {
  return "injected fault: " + std::string(kEvents[size_t(point)]) + " " + std::to_string(n);
}

}  // namespace conveyor
