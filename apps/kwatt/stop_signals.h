// SIGINT and SIGTERM, the signals that stop a long-running command, taken in one of two ways:
//  - kBlock: blocked in the calling thread, and so in every thread it starts afterwards, and
//    waited for by that thread (Wait, WaitAny). For the commands that run threads (serve,
//    collect, meter): no thread is interrupted, the main one stops them all.
//  - kCatch: a handler records the signal, without SA_RESTART, so that a sleep or a read the
//    command is blocked in returns EINTR and the command sees requested() (simulate wattmetre,
//    rapl and hwpc; meter smartwatts, which also asks its listener to stop from the handler).
// Destruction puts back the mask or the handlers found. One StopSignals at a time in a process;
// made and destroyed by the main thread.
#ifndef KWATT_APPS_KWATT_STOP_SIGNALS_H_
#define KWATT_APPS_KWATT_STOP_SIGNALS_H_

#include <signal.h>

#include <chrono>
#include <initializer_list>
#include <optional>

namespace kwatt::cli {

class StopSignals {
 public:
  enum class How { kBlock, kCatch };

  // Takes SIGINT and SIGTERM as `how` says. With kBlock, the signals in `also` (SIGCHLD for a
  // command that waits for a child) are blocked with them, for WaitAny.
  explicit StopSignals(How how, std::initializer_list<int> also = {});
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals();

  // kCatch: the stop signal received (the last one), 0 while none.
  int requested() const;
  // kCatch: `notify(context)` is called from the handler after the signal is recorded; it must be
  // async-signal-safe (one write(2) to a wakeup pipe).
  void OnStop(void (*notify)(void* context), void* context);

  // kBlock: waits for SIGINT or SIGTERM, at most `timeout` when given. The signal, or 0 when the
  // timeout came first. Other blocked signals that come meanwhile are taken and ignored.
  int Wait(std::optional<std::chrono::nanoseconds> timeout = std::nullopt);
  // kBlock: waits for the next of the blocked signals, `also`'s included, and returns it.
  int WaitAny();

 private:
  How how_;
  sigset_t blocked_;             // kBlock: what is blocked, and waited for
  sigset_t old_mask_;            // kBlock: the mask found
  struct sigaction old_int_ {};  // kCatch: the handlers found
  struct sigaction old_term_ {};
};

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_STOP_SIGNALS_H_
