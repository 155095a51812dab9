#include "model/formats/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace conveyor {

namespace {

Error io_error(const std::string& path, const std::string& what) {
  return make_error(Errc::io_error, path + ": " + what + ": " + std::strerror(errno));
}

// read() until `size` bytes arrive; false on error or early end of file.
bool read_fully(int fd, uint8_t* dst, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, dst + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

}  // namespace

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error e = io_error(path, "cannot stat");
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io_error, path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = size_t(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      file->data_ = static_cast<const uint8_t*>(p);
      file->mapped_ = true;
    } else {
      file->buffer_.resize(file->size_);
      if (!read_fully(fd, file->buffer_.data(), file->size_)) {
        Error e = io_error(path, "cannot read");
        ::close(fd);
        return e;
      }
      file->data_ = file->buffer_.data();
    }
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace conveyor
