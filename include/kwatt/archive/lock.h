// The lock of an archive being written: one writer at a time in a directory, and readers that
// can tell a backup running now from one that was interrupted (doc/archive_format.md).
//
// The lock is an advisory flock(2) on the archive's directory itself: nothing is added to the
// archive, and the kernel drops it when the writer's process ends, however it ends (kill -9
// included), so that an interrupted backup is never taken for a running one.
#ifndef KWATT_ARCHIVE_LOCK_H_
#define KWATT_ARCHIVE_LOCK_H_

#include <string>

#include "kwatt/core/status.h"

namespace kwatt::archive {

class ArchiveLock {
 public:
  // Takes the writer's lock of `dir` (which must exist) without waiting. Unavailable naming the
  // directory when another process holds it (a backup or a `kwatt meter` recording writing into
  // it now); IOError when the directory cannot be opened.
  static Result<ArchiveLock> Take(const std::string& dir);

  ArchiveLock(ArchiveLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ArchiveLock& operator=(ArchiveLock&& other) noexcept;
  ArchiveLock(const ArchiveLock&) = delete;
  ArchiveLock& operator=(const ArchiveLock&) = delete;
  ~ArchiveLock();

 private:
  explicit ArchiveLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Whether a writer holds the lock of `dir` now (false when it holds none, or cannot be opened).
bool BeingWritten(const std::string& dir);

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_LOCK_H_
