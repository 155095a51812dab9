// A whole file mapped read-only into memory (mmap), or read into a buffer
// where mapping is not possible. The bytes stay valid while the MappedFile
// lives; share it (std::shared_ptr) with whatever holds views into it.
//
// If another process truncates the file while it is mapped, reading the lost
// pages raises SIGBUS: conveyor assumes model files do not change under it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace conveyor {

class MappedFile {
 public:
  // io_error naming `path` when it cannot be opened, is not a regular file or
  // cannot be read.
  static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // True when bytes() is a read-only mapping of the file (not a buffer copy):
  // pages of it can then be dropped from memory and are read again on use.
  bool mapped() const { return mapped_; }

 private:
  MappedFile() = default;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;           // data_ came from mmap (else from buffer_)
  std::vector<uint8_t> buffer_;   // fallback when mmap fails
};

}  // namespace conveyor
