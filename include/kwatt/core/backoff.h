// How long to wait before trying again after failures in a row: a first delay, doubled after each
// further failure, at most a ceiling. kwatt's one retry policy: the HTTP client's retries
// (the Kwollect client's fetches, the small requests), the meter's HTTP outputs, the collector's
// store.
//
// Thread safety: a value; a Backoff belongs to one thread at a time.
#ifndef KWATT_CORE_BACKOFF_H_
#define KWATT_CORE_BACKOFF_H_

#include <algorithm>
#include <cmath>
#include <limits>

namespace kwatt {

struct BackoffPolicy {
  double first_s = 1;                                      // the wait after the first failure
  double max_s = std::numeric_limits<double>::infinity();  // the longest wait

  // The wait before retry number `retry` (1: after the first failure): first_s * 2^(retry - 1),
  // at most max_s; 0 before any failure, or for a first_s of 0 or less.
  double DelayBefore(int retry) const {
    if (retry < 1 || !(first_s > 0)) return 0;
    return std::min(max_s, std::ldexp(first_s, std::min(retry - 1, 1000)));
  }
};

// The failures in a row of one thing retried under a policy.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy) : policy_(policy) {}

  // One more failure: the wait before the next attempt.
  double Failed() { return policy_.DelayBefore(++failures_); }
  // A success: the next failure waits first_s again.
  void Succeeded() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  BackoffPolicy policy_;
  int failures_ = 0;
};

}  // namespace kwatt

#endif  // KWATT_CORE_BACKOFF_H_
