#include "kernels/cpu/embedding.hpp"

#include <gtest/gtest.h>

#include "kernels/cpu/matmul.hpp"
#include "tests/kernels/cpu/random.hpp"

namespace conveyor::kernels {
namespace {

TEST(Embedding, PlainAndPackedTablesGiveTheRows) {
  const int vocab = 50, dim = 24;
  const std::vector<float> table = testing::random_vector(size_t(vocab) * dim, 1);
  std::vector<float> packed(packed_matrix_floats(vocab, dim));
  pack_matrix(table.data(), vocab, dim, packed.data());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 7 + 3) % vocab);  // 100 rows: threaded path
  const int64_t ld = dim + 1;
  std::vector<float> plain(tokens.size() * ld), from_packed(tokens.size() * ld);
  embedding_lookup(table.data(), dim, tokens.data(), int32_t(tokens.size()), plain.data(), ld);
  embedding_lookup_packed(packed.data(), dim, tokens.data(), int32_t(tokens.size()),
                          from_packed.data(), ld);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int c = 0; c < dim; ++c) {
      ASSERT_EQ(plain[t * ld + c], table[size_t(tokens[t]) * dim + c]);
      ASSERT_EQ(from_packed[t * ld + c], table[size_t(tokens[t]) * dim + c]);
    }
}

}  // namespace
}  // namespace conveyor::kernels
