// GgufBuilder: serializes metadata and tensors in the GGUF layout.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/tensor_convert.hpp"

namespace conveyor {

namespace gguf_detail {

// Where serialized bytes go: memory or a file.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual bool write(const void* data, size_t n) = 0;

  bool u32(uint32_t v) { return write(&v, 4); }
  bool u64(uint64_t v) { return write(&v, 8); }
  bool str(const std::string& s) { return u64(s.size()) && write(s.data(), s.size()); }
  bool zeros(size_t n) {
    static const uint8_t pad[64] = {};
    while (n > 0) {
      const size_t k = n < sizeof pad ? n : sizeof pad;
      if (!write(pad, k)) return false;
      n -= k;
    }
    return true;
  }
};

}  // namespace gguf_detail

using gguf_detail::ByteSink;

namespace {

class VectorSink final : public ByteSink {
 public:
  bool write(const void* data, size_t n) override {
    const size_t old = bytes.size();
    bytes.resize(old + n);
    if (n > 0) std::memcpy(bytes.data() + old, data, n);
    return true;
  }
  std::vector<uint8_t> bytes;
};

class FileSink final : public ByteSink {
 public:
  FileSink(std::FILE* f, const std::atomic<bool>* stop) : f_(f), stop_(stop) {}
  bool write(const void* data, size_t n) override {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      stopped_ = true;
      return false;
    }
    return n == 0 || std::fwrite(data, 1, n, f_) == n;
  }
  bool stopped() const { return stopped_; }

 private:
  std::FILE* f_;
  const std::atomic<bool>* stop_;
  bool stopped_ = false;
};

bool write_array(ByteSink& sink, const GgufArray& a);

bool write_value_body(ByteSink& sink, const GgufValue& v) {
  if (v.type == GgufValueType::string) return sink.str(v.string);
  if (v.type == GgufValueType::array) {
    static const GgufArray empty;
    return write_array(sink, v.array ? *v.array : empty);
  }
  return sink.write(&v.bits, scalar_size(v.type));
}

bool write_array(ByteSink& sink, const GgufArray& a) {
  if (!sink.u32(uint32_t(a.elem_type)) || !sink.u64(a.size())) return false;
  if (a.elem_type == GgufValueType::string) {
    for (const std::string& s : a.strings)
      if (!sink.str(s)) return false;
    return true;
  }
  if (a.elem_type == GgufValueType::array) {
    for (const GgufArray& nested : a.arrays)
      if (!write_array(sink, nested)) return false;
    return true;
  }
  return sink.write(a.raw.data(), a.size() * scalar_size(a.elem_type));
}

uint64_t align_up(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufBuilder::add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type,
                             std::span<const float> values) {
  Tensor t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = uint32_t(type);
  t.values = values;
  t.n_bytes = encoded_size(type, values.size());
  tensors_.push_back(std::move(t));
}

void GgufBuilder::add_raw_tensor(std::string name, std::vector<uint64_t> dims, uint32_t type,
                                 std::vector<uint8_t> bytes) {
  Tensor t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = type;
  t.n_bytes = bytes.size();
  t.raw = std::move(bytes);
  t.is_raw = true;
  tensors_.push_back(std::move(t));
}

Status GgufBuilder::emit(ByteSink& sink) const {
  auto io_failure = [] { return Status(make_error(Errc::io_error, "write failed")); };
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    return make_error(Errc::invalid_argument,
                      "GGUF alignment " + std::to_string(alignment_) + " is not a power of two");
  for (const Tensor& t : tensors_)
    if (!t.is_raw && t.n_bytes == 0 && !t.values.empty())
      return make_error(Errc::invalid_argument,
                        "tensor '" + t.name + "' (" + std::to_string(t.values.size()) +
                            " values) cannot be stored as " + ggml_type_description(t.type));

  VectorSink head;  // header, metadata and tensor infos: small, built in memory
  if (!head.u32(0x46554747) || !head.u32(version) || !head.u64(tensors_.size()) ||
      !head.u64(metadata_.size()))
    return io_failure();
  for (const auto& [key, value] : metadata_)
    if (!head.str(key) || !head.u32(uint32_t(value.type)) || !write_value_body(head, value))
      return io_failure();
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    head.str(t.name);
    head.u32(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) head.u64(d);
    head.u32(t.type);
    head.u64(offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  const uint64_t header = head.bytes.size();
  if (!sink.write(head.bytes.data(), head.bytes.size()) ||
      !sink.zeros(size_t(align_up(header, alignment_) - header)))
    return io_failure();

  std::vector<uint8_t> encoded;
  for (const Tensor& t : tensors_) {
    if (t.is_raw) {
      if (!sink.write(t.raw.data(), t.raw.size())) return io_failure();
    } else {
      encoded.resize(size_t(t.n_bytes));
      if (!encode_from_f32(GgmlType(t.type), t.values, encoded))
        return make_error(Errc::invalid_argument, "tensor '" + t.name + "' cannot be encoded");
      if (!sink.write(encoded.data(), encoded.size())) return io_failure();
    }
    if (!sink.zeros(size_t(align_up(t.n_bytes, alignment_) - t.n_bytes))) return io_failure();
  }
  return Status::ok();
}

Expected<std::vector<uint8_t>> GgufBuilder::to_bytes() const {
  VectorSink sink;
  if (Status s = emit(sink); !s) return s.error();
  return std::move(sink.bytes);
}

namespace {

// Where writing `path` goes: a symbolic link's target (the link stays, a
// dangling one included), an existing file only if it is a regular file
// this process may write (a device, pipe or directory, or a read-only file,
// is refused rather than replaced by the rename). Sets `mode` to the
// existing file's permissions.
Expected<std::string> output_target(const std::string& path, bool& exists, mode_t& mode) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = path;
  for (int links = 0; fs::is_symlink(target, ec); ++links) {
    if (links == 40) return make_error(Errc::io_error, path + ": too many levels of symbolic links");
    const fs::path next = fs::read_symlink(target, ec);
    if (ec) return make_error(Errc::io_error, path + ": cannot read the link: " + ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  struct stat st{};
  exists = ::stat(target.c_str(), &st) == 0;
  if (!exists) return target.string();
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::invalid_argument,
                      path + ": exists and is not a regular file (a directory, device or pipe)");
  if (::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0) {
    const int err = errno;
    return make_error(Errc::io_error, path + ": cannot replace: " + std::strerror(err));
  }
  mode = st.st_mode & 07777;
  return target.string();
}

}  // namespace

Status check_gguf_output(const std::string& path) {
  bool exists = false;
  mode_t mode = 0;
  auto target = output_target(path, exists, mode);
  return target ? Status::ok() : Status(target.error());
}

Status GgufBuilder::write(const std::string& path, const std::atomic<bool>* stop) const {
  bool exists = false;
  mode_t mode = 0;
  auto target = output_target(path, exists, mode);
  if (!target) return target.error();
  // A file of our own beside the target (never an existing one), synced and
  // renamed over it once complete: a failed write leaves the target as it was.
  std::string tmp;
  int fd = -1;
  int err = 0;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = *target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(attempt);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    err = errno;
    if (fd < 0 && err != EEXIST) break;
  }
  if (fd < 0) return make_error(Errc::io_error, tmp + ": cannot create: " + std::strerror(err));
  const auto fail = [&](const std::string& what, int error) {
    std::remove(tmp.c_str());
    return make_error(Errc::io_error, path + ": " + what + (error ? std::string(": ") + std::strerror(error) : ""));
  };
  if (exists && ::fchmod(fd, mode) != 0) {
    err = errno;
    ::close(fd);
    return fail("cannot keep the file's permissions", err);
  }
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    err = errno;
    ::close(fd);
    return fail("cannot write", err);
  }
  FileSink sink(f, stop);
  Status status = emit(sink);
  err = errno;
  if (sink.stopped()) {
    std::fclose(f);
    return fail(exists ? "interrupted; the file was left as it was" : "interrupted; nothing was written", 0);
  }
  const bool flushed = std::fflush(f) == 0 && ::fsync(fd) == 0;
  if (status && !flushed) err = errno;
  const bool closed = std::fclose(f) == 0;
  if (status && flushed && !closed) err = errno;
  if (!status) {
    if (status.error().code != Errc::io_error) {
      std::remove(tmp.c_str());
      return make_error(status.error().code, path + ": " + status.error().message);
    }
    return fail(status.error().message, err);
  }
  if (!flushed || !closed) return fail("cannot write", err);
  if (std::rename(tmp.c_str(), target->c_str()) != 0) {
    err = errno;
    return fail("cannot rename to " + *target, err);
  }
  return Status::ok();
}

}  // namespace conveyor
