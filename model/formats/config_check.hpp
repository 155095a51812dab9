// The checks every loader applies to a model shape before allocating weights
// for it: positive sizes, heads that divide the width, sane RoPE settings, and
// upper bounds far above any real Llama so that absurd headers are refused
// instead of driving huge allocations.
#pragma once

#include <string>

#include "model/config.hpp"
#include "base/status.hpp"

namespace conveyor {

// OK, or bad_format "SOURCE: <problem>" (for example "n_heads 7 does not
// divide dim 64").
Status check_config(const ModelConfig& config, const std::string& source);

}  // namespace conveyor
