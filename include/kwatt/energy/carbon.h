// The emissions of an experiment's energy (doc/report.md, "Emissions"): the energy at the wall,
// times the data centre's PUE, times the carbon intensity of the electricity, each factor named
// with its source wherever a figure uses it.
//
// Values and pure functions; thread-safe.
#ifndef KWATT_ENERGY_CARBON_H_
#define KWATT_ENERGY_CARBON_H_

#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"

namespace kwatt::energy {

// The carbon intensity of the electricity, grams of CO2 equivalent per kWh: a constant, or a time
// series (each value holds from its time to the next one's).
struct CarbonIntensity {
  double constant = 0;                // when `times` is empty
  std::vector<UnixNanos> times;       // ascending
  std::vector<double> grams_per_kwh;  // one a time
  std::string source;                 // where it comes from, as the user names it

  bool series() const { return !times.empty(); }
  // The value at `t`: the constant, or the series' last value at or before t; NaN before the
  // series' first time or more than `kMaxStaleSeconds` after its last.
  double At(UnixNanos t) const;
};

// A series value holds at most this long after its time (RTE's are every 15 minutes).
inline constexpr int64_t kMaxStaleSeconds = 3600;

// A carbon-intensity series from a file's text (`origin` names it in errors):
// - RTE's eCO2mix export (the tab-separated "xls" files of rte-france.com/eco2mix, Latin-1): a
//   header naming "Date", "Heures" and "Taux de Co2" (g/kWh), French local time; rows without a
//   value (the half-hours an export leaves empty, a trailing notice) are skipped;
// - or CSV with a header `time,grams_per_kwh`, each time ISO 8601 or epoch seconds.
// InvalidArgument naming the line and what is wrong for anything else, or no value at all.
Result<CarbonIntensity> ParseCarbonIntensity(std::string_view text, std::string_view origin);

// What emissions are computed from.
struct EmissionFactors {
  CarbonIntensity intensity;
  double pue = 1;          // the data centre's power usage effectiveness (>= 1)
  std::string pue_source;  // where it comes from; empty with the default 1 ("not counted")
};

// OK when the PUE is a finite number from 1 to 5 and a constant intensity from 0 to 2000 g/kWh.
Status CheckEmissionFactors(const EmissionFactors& factors);

struct Emissions {
  double grams = NAN;             // CO2e, of the window's total energy
  double half_width_grams = NAN;  // the energy's 95 % interval carried over (the factors have none)
  double kwh_at_wall = 0;
  double kwh_with_pue = 0;
  double mean_grams_per_kwh = NAN;  // energy-weighted over the window
  std::string why;                  // NaN: why (the series does not cover the window)
};

// The emissions of `report`'s total (ComputeEnergy's over `data` with `options`): with a series,
// the window cut at the series' times, each part's energy (ComputeEnergy over them as phases) at
// its value.
Result<Emissions> EmissionsOf(const PowerCollector& data, const EnergyReport& report,
                              const EnergyOptions& options, const EmissionFactors& factors);

// The same for phase `phase` of `report` (an index of its phase_names): its total over each
// interval it was marked over, each cut where the series changes.
Result<Emissions> EmissionsOfPhase(const PowerCollector& data, const EnergyReport& report,
                                   const EnergyOptions& options, const EmissionFactors& factors,
                                   size_t phase);

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_CARBON_H_
