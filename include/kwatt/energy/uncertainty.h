// How far an energy figure may be from the truth: the terms its 95 % interval is made of
// (doc/energy.md, "How far to trust it"), combined as the GUM combines independent uncertainties
// (JCGM 100:2008): each term a standard uncertainty, their variances added, the sum expanded to
// 95 % with a coverage factor of 1.96.
//
// - accuracy: the meter's stated accuracy (a bound, read as a rectangular distribution), the same
//   error over the whole interval (a meter's class error does not average out);
// - resolution: the step of the readings (whole watts on a PDU). Rounding errors average out only
//   where the readings move by more than a step between samples (the noise dithers them); on a
//   steadier signal a reading rounded once stays rounded the same way, a systematic error;
// - sampling: what the line between two samples may miss (the noise of each reading, and the
//   power's moves between samples), from how far each sample lies off the line of its neighbours;
// - gaps and edges: a gap is estimated on the line across it, the power within it unknown but for
//   the range the series shows; the value held one period past the first and last samples;
// - clock: the user's marks (window, phases) taken by a clock up to `clock_offset` seconds off the
//   meters': a constant offset moves every edge the same way, so the energy moves by the offset x
//   (power at the ends - power at the starts).
//
// Values; thread-safe.
#ifndef KWATT_ENERGY_UNCERTAINTY_H_
#define KWATT_ENERGY_UNCERTAINTY_H_

#include <cmath>
#include <string>

namespace kwatt::energy {

// How far a source's readings may be from the truth, as its maker states it (or, where none is
// published, as kwatt assumes and says): |error| <= relative x |reading| + watts.
struct StatedAccuracy {
  double relative = 0;  // 0.01: 1 % of the reading
  double watts = 0;     // plus this, whatever the reading
  std::string basis;    // where these figures come from (doc/energy.md cites each)

  // The most an energy over `seconds` read as `joules` may be off by.
  double BoundJoules(double joules, double seconds) const {
    return relative * std::fabs(joules) + watts * seconds;
  }
};

// The coverage factor of a 95 % interval of a normal distribution.
inline constexpr double kCoverageFactor95 = 1.96;

// The bound the user's marks' clock is assumed to keep from the meters' (seconds): NTP keeps a
// machine on a network within tens of milliseconds of the servers Grid'5000's meters are stamped
// by; `kwatt energy --clock-offset` / energy(clock_offset=) says better.
inline constexpr double kDefaultClockOffsetSeconds = 0.1;

// What an energy figure's interval is made of, in a form that adds: over the series of a node
// (its PSUs), the intervals of a phase, and the nodes of a sum.
struct ErrorTerms {
  // The stated accuracy's bound, joules (rectangular; added linearly: one meter model's class
  // error is assumed to go the same way on every series and node, the cautious reading). NaN:
  // the source's accuracy is unknown (an unknown --metric).
  double accuracy_bound = 0;
  double resolution_bound = 0;     // systematic rounding: step / 2 x seconds (rectangular, linear)
  double resolution_variance = 0;  // dithered rounding, joules squared
  double sampling_variance = 0;    // joules squared
  double gaps_variance = 0;        // gaps and held edges, joules squared
  // Power at the interval's end minus at its start (summed over intervals and nodes): a clock
  // late by d seconds moves the energy by d x this.
  double edge_watts = 0;

  void Add(const ErrorTerms& other) {
    accuracy_bound += other.accuracy_bound;
    resolution_bound += other.resolution_bound;
    resolution_variance += other.resolution_variance;
    sampling_variance += other.sampling_variance;
    gaps_variance += other.gaps_variance;
    edge_watts += other.edge_watts;
  }
};

// A figure's 95 % interval and each term's own 95 % half-width, joules.
struct Uncertainty {
  double half_width = 0;  // of the combined interval (accuracy included when known)
  // Without the accuracy term: what the data and the marks alone allow (the figure a simulator's
  // truth is checked against; doc/energy.md).
  double half_width_without_accuracy = 0;
  double accuracy = 0;  // NaN: unknown (then not in half_width)
  double resolution = 0;
  double sampling = 0;
  double gaps_and_edges = 0;
  double clock = 0;
};

// The terms' combination: standard uncertainties (a rectangular bound B: B / sqrt(3)) whose
// variances add, expanded by kCoverageFactor95; each term's half-width alone likewise.
inline Uncertainty Combine(const ErrorTerms& t, double clock_offset_seconds) {
  const double k = kCoverageFactor95;
  auto rectangular = [](double bound) { return bound * bound / 3; };
  const double clock_bound = clock_offset_seconds * std::fabs(t.edge_watts);
  Uncertainty u;
  u.accuracy = std::isnan(t.accuracy_bound) ? NAN : k * std::sqrt(rectangular(t.accuracy_bound));
  u.resolution = k * std::sqrt(rectangular(t.resolution_bound) + t.resolution_variance);
  u.sampling = k * std::sqrt(t.sampling_variance);
  u.gaps_and_edges = k * std::sqrt(t.gaps_variance);
  u.clock = k * std::sqrt(rectangular(clock_bound));
  const double data = rectangular(t.resolution_bound) + t.resolution_variance +
                      t.sampling_variance + t.gaps_variance + rectangular(clock_bound);
  u.half_width_without_accuracy = k * std::sqrt(data);
  const double accuracy = std::isnan(t.accuracy_bound) ? 0 : rectangular(t.accuracy_bound);
  u.half_width = k * std::sqrt(data + accuracy);
  return u;
}

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_UNCERTAINTY_H_
