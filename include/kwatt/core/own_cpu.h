// The CPU time kwatt's own work used in this process: its threads (a meter's sampler, formula and
// outputs, a server's event loop) and the jobs it runs on threads it shares (a server's handler
// pool). A meter measuring the process it runs in (kwatt.measure, `kwatt meter --all-processes`)
// takes it off that process's CPU time, so that kwatt never charges its own work to a target
// (doc/meter/attribution.md, "Activity and targets"): it then shows as unattributed.
//
// Work is counted by scopes: an OwnCpuScope counts the calling thread's CPU time (its
// CLOCK_THREAD_CPUTIME_ID, nanoseconds) from its construction to its destruction; a scope within
// a scope of the same thread counts nothing more.
//
// Thread safety: every function is thread-safe; a scope is made and destroyed on one thread.
#ifndef KWATT_CORE_OWN_CPU_H_
#define KWATT_CORE_OWN_CPU_H_

#include <cstdint>

namespace kwatt {

class OwnCpuScope {
 public:
  OwnCpuScope();
  ~OwnCpuScope();
  OwnCpuScope(const OwnCpuScope&) = delete;
  OwnCpuScope& operator=(const OwnCpuScope&) = delete;

 private:
  int slot_ = -1;  // its place among the scopes open now; -1: nested, counts nothing
};

// The CPU nanoseconds counted by every scope of this process so far: the ended ones and, up to
// now, the open ones. Never decreases.
int64_t OwnCpuNanos();

}  // namespace kwatt

#endif  // KWATT_CORE_OWN_CPU_H_
