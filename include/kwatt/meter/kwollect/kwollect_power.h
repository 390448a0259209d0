// A node's own power as the power meter's source known late: its wattmeter (or its best power
// metric, as `kwatt energy` chooses it) through Kwollect's API, live, or from an archive after the
// fact (doc/meter/sources.md, "Sources").
//
// One domain: source "kwollect", name the node's FQDN, kind "node", socket -1, origin
// "METRIC of FQDN (API URL)" or "METRIC of FQDN (archive DIR)".
//
// EnergyBetween(start, end) is the exact integral of the node's power over [start, end], computed
// by the energy part's integration (kwatt/energy/integration.h): trapezoids on the real
// timestamps, the power interpolated at `start` and `end`, the series of a 2-PSU node (its PDU
// outlets) summed. So consecutive intervals add up to what `kwatt energy` reports over their union.
// - Live, it is nullopt until every series has a row at or after `end` (the meter holds the
//   interval meanwhile, up to MaxDelay()).
// - A stretch of [start, end] in a gap (no row for more than gap_factor sampling periods, the
//   edges of the data, rows already dropped from the live window) is flagged kUnreadable; the
//   energy given is then the energy of the covered part only (0 when nothing of it is covered):
//   what `kwatt energy` reports as `joules`, its estimate across gaps (gap_joules) left out.
// - Microjoules are the integral rounded to the nearest microjoule.
//
// Thread safety: EnergyBetween, domains, Notes and stats may be called from any thread; the live
// source polls in a thread of its own, stopped and joined by its destructor.
#ifndef KWATT_METER_KWOLLECT_KWOLLECT_POWER_H_
#define KWATT_METER_KWOLLECT_KWOLLECT_POWER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

struct KwollectPowerOptions {
  // The node: "nova-1.lyon", its FQDN, or a KaVLAN name (ParseNodeName).
  std::string node;
  // The power metric; empty: the one `kwatt energy` would choose over the last `choice_window`
  // (wattmetre_power_watt, then pdu_outlet_power_watt, then bmc_node_power_watt...).
  std::string metric;
  // The API and its credentials, as `kwatt fetch` takes them (LoadClientOptions).
  kwollect::ClientOptions client;
  // How often the API is asked for the rows since the last ones. One request a poll (the node is
  // resolved once, at the open).
  std::chrono::nanoseconds poll_period = std::chrono::seconds(2);
  // How long after an instant its rows may still come (MaxDelay()): the meter holds an interval's
  // report at most this long. kwatt's simulator serves a row as soon as its instant passed;
  // Grid'5000's Kwollect some seconds later (doc/meter/README.md): stats() shows the lag observed.
  std::chrono::nanoseconds max_delay = std::chrono::seconds(60);
  // Each poll asks again for the rows of this long before the newest row it has, so that rows
  // the API stores out of order (a PSU's outlet after the other's) are not missed.
  std::chrono::nanoseconds reread = std::chrono::seconds(5);
  // Rows older than this (before now) are dropped: the window is bounded. At least max_delay plus
  // two poll periods and the reread.
  std::chrono::nanoseconds retention = std::chrono::minutes(10);
  // The recent past over which the metric is chosen when `metric` is empty.
  std::chrono::nanoseconds choice_window = std::chrono::seconds(60);
  // A gap: no row for more than this many sampling periods (as `kwatt energy --gap-factor`).
  double gap_factor = 3;
  // The wall clock of "now" and the sleeps between polls.
  std::shared_ptr<Clock> clock = SystemClock();
  // A line when polls fail for a passing reason (the API unreachable, a 5xx: retried at the next
  // poll), at most one a minute, and one when the source fails as a whole (refused credentials:
  // no more polls); stderr when empty. Called from the polling thread.
  std::function<void(const std::string&)> log;
};

// The live source, and what its polls saw.
class KwollectPowerSource : public DelayedEnergySource {
 public:
  struct Stats {
    int64_t polls = 0;         // polls that succeeded
    int64_t failed_polls = 0;  // polls that failed for a passing reason (retried at the next)
    int64_t rows = 0;          // rows of the metric in the window now
    // How far behind "now" the newest row was at the last poll, and at most, in seconds: the
    // API's delay plus up to one sampling period.
    double lag_seconds = 0;
    double max_lag_seconds = 0;
    std::string last_error;  // of the last failed poll
  };
  virtual Stats stats() const = 0;
};

// Resolves the node (its site, cluster and catalogue: NotFound for an unknown one), chooses the
// metric when none is given (NotFound naming why when the node has no power rows in the
// choice_window: no wattmeter, no monitoring job...), fetches the choice_window's rows and starts
// polling. Errors of the API are Fetch's (Unauthenticated for refused credentials, Unavailable
// when unreachable); InvalidArgument for options without meaning (periods <= 0, a retention
// shorter than max_delay + 2 poll periods + reread, gap_factor < 1).
Result<std::unique_ptr<KwollectPowerSource>> OpenKwollectPower(KwollectPowerOptions options);

// The same source over rows already at hand, after the fact: never nullopt (what is not in the
// rows never comes: kUnreadable), MaxDelay() 0.
//
// Over an archive (`kwatt backup`): `node` as above (NotFound when the archive does not hold it,
// naming those it holds), `metric` empty: chosen over the archive's window as `kwatt energy`
// does (NotFound when none has rows). The archive's errors (ReadManifest, Incomplete...).
Result<std::unique_ptr<DelayedEnergySource>> OpenArchivePower(const std::string& archive_dir,
                                                              const std::string& node,
                                                              const std::string& metric = "",
                                                              double gap_factor = 3);

// Over a PowerCollector that holds the node's rows (`node_fqdn` one of its nodes), the metric
// chosen over [start, end] when `metric` is empty. The rows are copied. `origin` says where they
// came from, for people ("archive X").
Result<std::unique_ptr<DelayedEnergySource>> CollectedPower(const energy::PowerCollector& data,
                                                            const std::string& node_fqdn,
                                                            UnixNanos start, UnixNanos end,
                                                            const std::string& metric = "",
                                                            double gap_factor = 3,
                                                            const std::string& origin = "rows");

}  // namespace kwatt::meter

#endif  // KWATT_METER_KWOLLECT_KWOLLECT_POWER_H_
