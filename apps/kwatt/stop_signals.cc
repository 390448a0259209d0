#include "apps/kwatt/stop_signals.h"

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <ctime>

namespace kwatt::cli {
namespace {

// What the handler touches: lock-free atomics only (async-signal-safe).
std::atomic<int> g_requested{0};
std::atomic<void (*)(void*)> g_notify{nullptr};
std::atomic<void*> g_context{nullptr};

extern "C" void OnStopSignal(int signal_number) {
  g_requested.store(signal_number);
  void (*notify)(void*) = g_notify.load();
  if (notify) notify(g_context.load());
}

}  // namespace

StopSignals::StopSignals(How how, std::initializer_list<int> also) : how_(how) {
  sigemptyset(&blocked_);
  sigemptyset(&old_mask_);
  if (how_ == How::kBlock) {
    sigaddset(&blocked_, SIGINT);
    sigaddset(&blocked_, SIGTERM);
    for (int signal_number : also) sigaddset(&blocked_, signal_number);
    pthread_sigmask(SIG_BLOCK, &blocked_, &old_mask_);
    return;
  }
  g_requested.store(0);
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR at once
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignals::~StopSignals() {
  if (how_ == How::kBlock) {
    // A stop signal that came after the one taken is dropped rather than delivered by the
    // unblocking (it would end kwatt on its way out, with another exit status).
    timespec now{0, 0};
    while (sigtimedwait(&blocked_, nullptr, &now) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    return;
  }
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_notify.store(nullptr);
  g_context.store(nullptr);
}

int StopSignals::requested() const { return g_requested.load(); }

void StopSignals::OnStop(void (*notify)(void* context), void* context) {
  g_notify.store(nullptr);  // never the old function with the new context
  g_context.store(context);
  g_notify.store(notify);
}

int StopSignals::Wait(std::optional<std::chrono::nanoseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
  while (true) {
    int got;
    if (timeout) {
      auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      timespec wait{time_t(left.count() / 1000000000), long(left.count() % 1000000000)};
      got = sigtimedwait(&blocked_, nullptr, &wait);
      if (got < 0) {
        if (errno == EAGAIN) return 0;
        continue;  // EINTR
      }
    } else {
      got = sigwaitinfo(&blocked_, nullptr);
      if (got < 0) continue;
    }
    if (got == SIGINT || got == SIGTERM) return got;
  }
}

int StopSignals::WaitAny() {
  while (true) {
    int got = sigwaitinfo(&blocked_, nullptr);
    if (got > 0) return got;
  }
}

}  // namespace kwatt::cli
