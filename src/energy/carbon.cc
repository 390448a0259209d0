// Emissions from energy, a PUE and a carbon intensity (carbon.h).
#include "kwatt/energy/carbon.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kwatt/core/text.h"

namespace kwatt::energy {
namespace {

// The fields of a line split at `separator`, each trimmed of spaces and quotes.
std::vector<std::string> Fields(std::string_view line, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = line.find(separator, start);
    std::string_view field =
        TrimBlanks(line.substr(start, end == std::string_view::npos ? end : end - start));
    if (field.size() >= 2 && field.front() == '"' && field.back() == '"') {
      field = field.substr(1, field.size() - 2);
    }
    out.emplace_back(field);
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// A number of the whole field, else NaN.
double NumberOf(const std::string& field) {
  if (field.empty()) return NAN;
  char* end = nullptr;
  double value = std::strtod(field.c_str(), &end);
  return *end == '\0' ? value : NAN;
}

std::string Where(std::string_view origin, size_t line) {
  return std::string(origin) + ":" + std::to_string(line);
}

// The lines of `text`.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

Status AddValue(CarbonIntensity* out, UnixNanos t, double value, const std::string& where) {
  if (!std::isfinite(value) || value < 0 || value > 2000) {
    return Status::InvalidArgument(where + ": a carbon intensity of " + std::to_string(value) +
                                   " g/kWh is none (0 to 2000 expected)");
  }
  if (!out->times.empty() && t <= out->times.back()) {
    return Status::InvalidArgument(where + ": the times should go forward; " +
                                   FormatParisTimestamp(t) + " comes after " +
                                   FormatParisTimestamp(out->times.back()));
  }
  out->times.push_back(t);
  out->grams_per_kwh.push_back(value);
  return Status::OK();
}

Result<CarbonIntensity> ParseEco2mix(const std::vector<std::string_view>& lines, size_t header,
                                     std::string_view origin) {
  std::vector<std::string> names = Fields(lines[header], '\t');
  auto column = [&](std::string_view name) -> int {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].size() == name.size() &&
          std::equal(name.begin(), name.end(), names[i].begin(), [](char a, char b) {
            return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b));
          })) {
        return int(i);
      }
    }
    return -1;
  };
  const int date = column("Date"), hours = column("Heures"), co2 = column("Taux de Co2");
  if (date < 0 || hours < 0 || co2 < 0) {
    return Status::InvalidArgument(Where(origin, header + 1) +
                                   ": an eCO2mix export names the columns Date, Heures and Taux "
                                   "de Co2");
  }
  CarbonIntensity out;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    std::vector<std::string> f = Fields(lines[i], '\t');
    if (int(f.size()) <= std::max({date, hours, co2})) continue;  // a notice, a blank line
    const double value = NumberOf(f[size_t(co2)]);
    if (std::isnan(value)) continue;  // a quarter-hour without a value
    Result<ParsedTime> local = ParseIsoTimestamp(f[size_t(date)] + "T" + f[size_t(hours)] + ":00");
    if (!local.ok()) {
      return Status::InvalidArgument(Where(origin, i + 1) + ": '" + f[size_t(date)] + " " +
                                     f[size_t(hours)] + "' is no date and time");
    }
    Result<UnixNanos> t = ParisLocalToUtc(local->utc);
    if (!t.ok()) continue;  // the repeated hour of the autumn change: ambiguous, skipped
    KWATT_RETURN_IF_ERROR(AddValue(&out, *t, value, Where(origin, i + 1)));
  }
  return out;
}

Result<CarbonIntensity> ParseCsv(const std::vector<std::string_view>& lines, size_t header,
                                 std::string_view origin) {
  std::vector<std::string> names = Fields(lines[header], ',');
  if (names.size() != 2 || names[0] != "time" || names[1] != "grams_per_kwh") {
    return Status::InvalidArgument(
        Where(origin, header + 1) +
        ": expected an eCO2mix export (RTE's, tab-separated, with Date, Heures and Taux de Co2) "
        "or CSV with the header time,grams_per_kwh");
  }
  CarbonIntensity out;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    if (TrimBlanks(lines[i]).empty()) continue;
    std::vector<std::string> f = Fields(lines[i], ',');
    if (f.size() != 2) {
      return Status::InvalidArgument(Where(origin, i + 1) + ": expected TIME,GRAMS_PER_KWH");
    }
    Result<UnixNanos> t = ParseKwollectTimeParameter(f[0]);
    if (!t.ok()) return t.status().WithContext(Where(origin, i + 1));
    KWATT_RETURN_IF_ERROR(AddValue(&out, *t, NumberOf(f[1]), Where(origin, i + 1)));
  }
  return out;
}

}  // namespace

double CarbonIntensity::At(UnixNanos t) const {
  if (!series()) return constant;
  auto it = std::upper_bound(times.begin(), times.end(), t);
  if (it == times.begin()) return NAN;
  const size_t i = size_t(it - times.begin()) - 1;
  if (t - times[i] > kMaxStaleSeconds * kNanosPerSecond) return NAN;
  return grams_per_kwh[i];
}

Result<CarbonIntensity> ParseCarbonIntensity(std::string_view text, std::string_view origin) {
  std::vector<std::string_view> lines = Lines(text);
  // The header: the first line that is not blank.
  size_t header = 0;
  while (header < lines.size() && TrimBlanks(lines[header]).empty()) {
    ++header;
  }
  if (header == lines.size()) {
    return Status::InvalidArgument(std::string(origin) + ": empty, no carbon intensity in it");
  }
  Result<CarbonIntensity> out = lines[header].find('\t') != std::string_view::npos
                                    ? ParseEco2mix(lines, header, origin)
                                    : ParseCsv(lines, header, origin);
  if (out.ok() && out->times.empty()) {
    return Status::InvalidArgument(std::string(origin) + ": no carbon intensity value in it");
  }
  return out;
}

Status CheckEmissionFactors(const EmissionFactors& f) {
  if (!std::isfinite(f.pue) || f.pue < 1 || f.pue > 5) {
    return Status::InvalidArgument(
        "a PUE is the facility's power over the IT equipment's: a "
        "number from 1 to 5, not " +
        std::to_string(f.pue));
  }
  if (!f.intensity.series() && (!std::isfinite(f.intensity.constant) || f.intensity.constant < 0 ||
                                f.intensity.constant > 2000)) {
    return Status::InvalidArgument(
        "a carbon intensity is grams of CO2e per kWh, from 0 to 2000, "
        "not " +
        std::to_string(f.intensity.constant));
  }
  return Status::OK();
}

namespace {

// The emissions of `total`, the report's figures over `intervals` (the window, or a phase's).
Result<Emissions> EmissionsOver(const PowerCollector& data, const EnergyReport& report,
                                const EnergyOptions& options, const EmissionFactors& factors,
                                const Figures& total, const std::vector<Interval>& intervals) {
  KWATT_RETURN_IF_ERROR(CheckEmissionFactors(factors));
  Emissions e;
  if (!total.has_power) {
    e.why = "no power data";
    return e;
  }
  const double joules_per_kwh = 3.6e6;
  e.kwh_at_wall = total.total_joules() / joules_per_kwh;
  e.kwh_with_pue = e.kwh_at_wall * factors.pue;
  const double relative_half_width =
      total.total_joules() != 0
          ? total.uncertainty(report.clock_offset_seconds).half_width / total.total_joules()
          : 0;
  if (!factors.intensity.series()) {
    e.mean_grams_per_kwh = factors.intensity.constant;
  } else {
    // Each interval cut where the series changes; each part's energy at its value.
    const CarbonIntensity& c = factors.intensity;
    std::vector<UnixNanos> cuts;  // (part start, part end) pairs
    for (const Interval& interval : intervals) {
      std::vector<UnixNanos> own = {interval.start};
      for (UnixNanos t : c.times) {
        if (t > interval.start && t < interval.end) own.push_back(t);
      }
      own.push_back(interval.end);
      for (size_t i = 0; i + 1 < own.size(); ++i) cuts.insert(cuts.end(), {own[i], own[i + 1]});
    }
    EnergyOptions parts = options;
    parts.phases.clear();
    parts.roles.clear();
    parts.baseline_phase.clear();
    for (size_t i = 0; i + 1 < cuts.size(); i += 2) {
      // A value holds at most kMaxStaleSeconds: a part whose end is further from its value's
      // time (the series ends, or has a hole, inside the window) has none there.
      const double value = c.At(cuts[i]);
      const UnixNanos last = cuts[i + 1] - 1;
      if (std::isnan(value) || std::isnan(c.At(last))) {
        // From when: this part's start, or where its value stops holding.
        UnixNanos from = cuts[i];
        if (!std::isnan(value)) {
          auto held = std::upper_bound(c.times.begin(), c.times.end(), cuts[i]) - 1;
          from = *held + kMaxStaleSeconds * kNanosPerSecond;
        }
        e.why = "the carbon intensity series (" + c.source + ") has no value from " +
                FormatParisTimestamp(from) + " (a value holds an hour at most)";
        return e;
      }
      parts.phases.push_back({"part " + std::to_string(i / 2), cuts[i], cuts[i + 1]});
    }
    KWATT_ASSIGN_OR_RETURN(EnergyReport cut, ComputeEnergy(data, report.start, report.end, parts));
    double grams_per_pue = 0, joules = 0;
    for (size_t i = 0; i < cut.phase_totals.size(); ++i) {
      const Figures& f = cut.phase_totals[i];
      if (!f.has_power) continue;
      grams_per_pue += f.total_joules() / joules_per_kwh * c.At(cuts[2 * i]);
      joules += f.total_joules();
    }
    e.mean_grams_per_kwh = joules > 0 ? grams_per_pue / (joules / joules_per_kwh) : NAN;
  }
  e.grams = e.kwh_with_pue * e.mean_grams_per_kwh;
  e.half_width_grams = std::fabs(e.grams) * relative_half_width;
  return e;
}

}  // namespace

Result<Emissions> EmissionsOf(const PowerCollector& data, const EnergyReport& report,
                              const EnergyOptions& options, const EmissionFactors& factors) {
  return EmissionsOver(data, report, options, factors, report.total,
                       {{"window", report.start, report.end}});
}

Result<Emissions> EmissionsOfPhase(const PowerCollector& data, const EnergyReport& report,
                                   const EnergyOptions& options, const EmissionFactors& factors,
                                   size_t phase) {
  if (phase >= report.phase_names.size() || phase >= report.phase_totals.size()) {
    return Status::InvalidArgument("no phase " + std::to_string(phase) + " in the report");
  }
  std::vector<Interval> intervals;
  for (const Interval& interval : report.phase_intervals) {
    if (interval.name == report.phase_names[phase]) intervals.push_back(interval);
  }
  return EmissionsOver(data, report, options, factors, report.phase_totals[phase], intervals);
}

}  // namespace kwatt::energy
