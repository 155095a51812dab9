// The SwiGLU gate of the feed-forward block: out = silu(gate) · up, where
// silu(g) = g / (1 + e^-g).
#pragma once

#include <cstdint>

namespace conveyor::kernels {

// gate and up are usually the two halves of one fused w1|w3 product row.
// out may alias gate (same stride).
void swiglu(const float* gate,  // [n, ldg], first hidden columns read
            const float* up,    // [n, ldg]
            int64_t ldg, int32_t n, int32_t hidden,
            float* out,  // [n, ldo]
            int64_t ldo);

}  // namespace conveyor::kernels
