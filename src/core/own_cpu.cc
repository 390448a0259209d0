// kwatt's own CPU time in this process (include/kwatt/core/own_cpu.h).
#include "kwatt/core/own_cpu.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace kwatt {
namespace {

int64_t ClockNanos(clockid_t clock) {
  timespec now{};
  if (::clock_gettime(clock, &now) != 0) return -1;
  return int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

struct OpenScope {
  clockid_t clock{};
  int64_t start = 0;
  bool used = false;
};

// The open scopes and what the ended ones counted. A scope's thread clock is read only under the
// lock, and a scope ends (its thread alive) under it too: a clock is never read after its thread
// ended.
struct Registry {
  std::mutex mutex;
  std::vector<OpenScope> open;
  int64_t ended_nanos = 0;
  int64_t reported_nanos = 0;  // the running maximum returned
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();  // never destroyed: threads may outlive statics
  return *registry;
}

thread_local bool in_scope = false;

}  // namespace

OwnCpuScope::OwnCpuScope() {
  if (in_scope) return;
  clockid_t clock;
  if (::pthread_getcpuclockid(::pthread_self(), &clock) != 0) return;
  int64_t start = ClockNanos(CLOCK_THREAD_CPUTIME_ID);
  if (start < 0) return;
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto free = std::find_if(registry.open.begin(), registry.open.end(),
                           [](const OpenScope& s) { return !s.used; });
  if (free == registry.open.end()) free = registry.open.insert(free, OpenScope{});
  *free = OpenScope{clock, start, true};
  slot_ = int(free - registry.open.begin());
  in_scope = true;
}

OwnCpuScope::~OwnCpuScope() {
  if (slot_ < 0) return;
  int64_t end = ClockNanos(CLOCK_THREAD_CPUTIME_ID);
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  OpenScope& scope = registry.open[size_t(slot_)];
  if (end > scope.start) registry.ended_nanos += end - scope.start;
  scope.used = false;
  in_scope = false;
}

int64_t OwnCpuNanos() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  int64_t total = registry.ended_nanos;
  for (const OpenScope& scope : registry.open) {
    if (!scope.used) continue;
    int64_t now = ClockNanos(scope.clock);
    if (now > scope.start) total += now - scope.start;
  }
  registry.reported_nanos = std::max(registry.reported_nanos, total);
  return registry.reported_nanos;
}

}  // namespace kwatt
