// One writer of a kind per store, and the next one told who it is: `kwatt collect` takes the
// "collector" lock of its store, so that a second collector on the same store (on this machine or,
// with PostgreSQL, on another) is refused, naming the first, instead of writing every row twice.
//
// - The embedded store (a file): an flock on FILE.NAME, a small file holding the holder's PID.
// - PostgreSQL: a session advisory lock (pg_try_advisory_lock) held by a connection of the lock's
//   own, whose application_name says the holder's PID and host.
// The lock is dropped when the WriterLock is destroyed or the process dies (kill -9 included: the
// kernel closes the file, PostgreSQL ends the session); a PostgreSQL restart drops it too.
//
// Thread safety: a WriterLock is only held; nothing is called on it.
#ifndef KWATT_STORE_WRITER_LOCK_H_
#define KWATT_STORE_WRITER_LOCK_H_

#include <memory>
#include <string>

#include "kwatt/core/status.h"

namespace kwatt::store {

class WriterLock {
 public:
  virtual ~WriterLock() = default;
};

// Takes the lock `name` ("collector") of the store at `uri` (as OpenStore reads it); `shown` is
// the URI as messages show it (no password). InvalidArgument naming the holder when another
// process holds it: "another collector (PID 4242 on host-1) writes into lab.store: ...".
// Unavailable when PostgreSQL cannot be reached; IOError when the lock file cannot be made.
Result<std::unique_ptr<WriterLock>> TakeWriterLock(const std::string& uri, const std::string& shown,
                                                   const std::string& name);

}  // namespace kwatt::store

#endif  // KWATT_STORE_WRITER_LOCK_H_
