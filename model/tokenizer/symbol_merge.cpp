#include "model/tokenizer/symbol_merge.hpp"

#include "model/tokenizer/utf8.hpp"

namespace conveyor::tokenizer_detail {

void split_characters(std::string_view text, std::vector<Symbol>& symbols) {
  symbols.clear();
  symbols.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    size_t length = utf8::char_length(text, offset);
    if (length == 0) length = 1;
    const auto index = static_cast<ptrdiff_t>(symbols.size());
    offset += length;
    symbols.push_back({offset - length, length, index - 1, offset == text.size() ? -1 : index + 1});
  }
}

}  // namespace conveyor::tokenizer_detail
