#include "kwatt/archive/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kwatt::archive {

Result<ArchiveLock> ArchiveLock::Take(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + dir + ": " + std::strerror(errno));
  // A reader looking (BeingWritten) holds a shared lock for an instant: a few tries apart
  // before another writer is concluded.
  for (int tries = 1; ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++tries) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && tries < 20) {
      ::usleep(5000);
      continue;
    }
    int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return Status::Unavailable("another kwatt process is writing " + dir +
                                 " now (a backup, or a kwatt meter recording, holds its lock): "
                                 "wait for it to end, or choose another directory");
    }
    return Status::IOError("cannot lock " + dir + ": " + std::strerror(error));
  }
  return ArchiveLock(fd);
}

ArchiveLock& ArchiveLock::operator=(ArchiveLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ArchiveLock::~ArchiveLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

bool BeingWritten(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  int taken;
  do {
    taken = ::flock(fd, LOCK_SH | LOCK_NB);
  } while (taken != 0 && errno == EINTR);
  bool busy = taken != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // a shared lock taken only to look is dropped at once
  return busy;
}

}  // namespace kwatt::archive
