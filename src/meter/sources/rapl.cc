// OpenRapl (rapl.h): the path chosen, the domains asked, the two paths cross-checked.
#include "kwatt/meter/sources/rapl.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "src/meter/sources/rapl_internal.h"

namespace kwatt::meter {

using rapl_internal::PerfScan;
using rapl_internal::PowercapScan;

const char* RaplPathName(RaplPath path) {
  switch (path) {
    case RaplPath::kAuto:
      return "auto";
    case RaplPath::kPerf:
      return "perf";
    case RaplPath::kPowercap:
      return "powercap";
  }
  return "auto";
}

Result<RaplPath> ParseRaplPath(std::string_view text) {
  for (RaplPath path : {RaplPath::kAuto, RaplPath::kPerf, RaplPath::kPowercap}) {
    if (text == RaplPathName(path)) return path;
  }
  return Status::InvalidArgument("'" + std::string(text.substr(0, 40)) +
                                 "' is not a RAPL path: auto, perf or powercap");
}

namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

template <typename T>
std::vector<std::string> NamesOf(const std::vector<T>& items) {
  std::vector<std::string> names;
  for (const T& item : items) names.push_back(item.domain.name);
  return names;
}

// Keeps the domains `wanted` names (by name or kind); InvalidArgument naming what `path_name`
// has when one matches nothing.
template <typename T>
Status Filter(std::vector<T>* items, const std::vector<std::string>& wanted,
              const std::string& path_name) {
  if (wanted.empty()) return Status::OK();
  for (const std::string& w : wanted) {
    bool any = std::any_of(items->begin(), items->end(), [&](const T& item) {
      return item.domain.name == w || item.domain.kind == w;
    });
    if (!any) {
      return Status::InvalidArgument("no RAPL domain named or of kind '" + w + "' in " + path_name +
                                     ", which has " + Join(NamesOf(*items)));
    }
  }
  items->erase(std::remove_if(items->begin(), items->end(),
                              [&](const T& item) {
                                return std::none_of(
                                    wanted.begin(), wanted.end(), [&](const std::string& w) {
                                      return item.domain.name == w || item.domain.kind == w;
                                    });
                              }),
               items->end());
  return Status::OK();
}

// The cross-check of the two paths' domain sets (all domains, before --domains).
std::string CrossCheck(const std::vector<std::string>& perf,
                       const std::vector<std::string>& power) {
  std::set<std::string> a(perf.begin(), perf.end()), b(power.begin(), power.end());
  std::vector<std::string> only_perf, only_powercap;
  for (const std::string& n : a) {
    if (!b.count(n)) only_perf.push_back(n);
  }
  for (const std::string& n : b) {
    if (!a.count(n)) only_powercap.push_back(n);
  }
  if (only_perf.empty() && only_powercap.empty()) {
    return "perf's power PMU and powercap have the same " + std::to_string(a.size()) +
           " domains (" + Join(perf) + ")";
  }
  std::string text;
  if (!only_powercap.empty()) {
    text += "powercap has " + Join(only_powercap) + " that perf's power PMU lacks";
  }
  if (!only_perf.empty()) {
    text += std::string(text.empty() ? "" : "; ") + "perf's power PMU has " + Join(only_perf) +
            " that powercap lacks";
  }
  return text;
}

Status CheckOptions(const RaplOptions& options) {
  const RaplLargestPower& p = options.largest_power;
  for (double w : {p.package_watts, p.core_watts, p.uncore_watts, p.dram_watts, p.psys_watts}) {
    if (!(w > 0) || !std::isfinite(w)) {
      return Status::InvalidArgument(
          "a RAPL domain's largest power must be a positive number of "
          "watts");
    }
  }
  if (!(options.constraint_power_margin >= 1) || !std::isfinite(options.constraint_power_margin)) {
    return Status::InvalidArgument("the RAPL constraint power margin must be 1 or more");
  }
  return Status::OK();
}

// An EnergySource whose Notes() start with the path's choice and the cross-check.
class Noted : public EnergySource {
 public:
  Noted(std::unique_ptr<EnergySource> inner, std::vector<std::string> notes)
      : inner_(std::move(inner)), notes_(std::move(notes)) {
    for (std::string& note : inner_->Notes()) notes_.push_back(std::move(note));
  }
  const std::vector<Domain>& domains() const override { return inner_->domains(); }
  Status Read(std::vector<DomainReading>* out) override { return inner_->Read(out); }
  std::chrono::nanoseconds MaxReadPeriod() const override { return inner_->MaxReadPeriod(); }
  std::vector<std::string> Notes() const override { return notes_; }
  std::string SaveCounters() const override { return inner_->SaveCounters(); }
  Status ResumeCounters(std::string_view saved, std::chrono::nanoseconds elapsed) override {
    return inner_->ResumeCounters(saved, elapsed);
  }

 private:
  std::unique_ptr<EnergySource> inner_;
  std::vector<std::string> notes_;
};

Result<std::unique_ptr<EnergySource>> WithNotes(std::unique_ptr<EnergySource> source,
                                                std::vector<std::string> first) {
  return std::unique_ptr<EnergySource>(new Noted(std::move(source), std::move(first)));
}

Result<std::unique_ptr<EnergySource>> OpenPerf(const MeterEnvironment& environment,
                                               const RaplOptions& options, Result<PerfScan> perf) {
  if (!perf.ok()) return perf.status();
  KWATT_RETURN_IF_ERROR(Filter(&perf->domains, options.domains, "perf's power PMU"));
  return rapl_internal::OpenPerfSource(environment, std::move(*perf));
}

Result<std::unique_ptr<EnergySource>> OpenPowercap(const MeterEnvironment& environment,
                                                   const RaplOptions& options,
                                                   Result<PowercapScan> powercap) {
  if (!powercap.ok()) return powercap.status();
  KWATT_RETURN_IF_ERROR(Filter(&powercap->zones, options.domains, "the powercap tree"));
  return rapl_internal::OpenPowercapSource(environment, std::move(*powercap));
}

}  // namespace

Result<std::unique_ptr<EnergySource>> OpenRapl(const MeterEnvironment& environment,
                                               const RaplOptions& options) {
  KWATT_RETURN_IF_ERROR(CheckOptions(options));
  Result<PerfScan> perf_scan = rapl_internal::ScanPerf(environment.sysfs_root);
  Result<PowercapScan> powercap_scan = rapl_internal::ScanPowercap(environment.sysfs_root, options);
  std::vector<std::string> notes;
  if (perf_scan.ok() && powercap_scan.ok()) {
    notes.push_back(CrossCheck(NamesOf(perf_scan->domains), NamesOf(powercap_scan->zones)));
  }

  if (options.path == RaplPath::kPerf) {
    KWATT_ASSIGN_OR_RETURN(auto source, OpenPerf(environment, options, std::move(perf_scan)));
    notes.insert(notes.begin(), "perf's power PMU (asked for)");
    return WithNotes(std::move(source), std::move(notes));
  }
  if (options.path == RaplPath::kPowercap) {
    KWATT_ASSIGN_OR_RETURN(auto source,
                           OpenPowercap(environment, options, std::move(powercap_scan)));
    notes.insert(notes.begin(), "the powercap tree (asked for)");
    return WithNotes(std::move(source), std::move(notes));
  }

  // auto: perf's power PMU when its counters open (64-bit, no wraps, no root-only file), else
  // powercap.
  Result<std::unique_ptr<EnergySource>> perf = OpenPerf(environment, options, std::move(perf_scan));
  if (perf.ok()) {
    notes.insert(notes.begin(), "perf's power PMU (64-bit counters that do not wrap)");
    return WithNotes(std::move(*perf), std::move(notes));
  }
  Result<std::unique_ptr<EnergySource>> powercap =
      OpenPowercap(environment, options, std::move(powercap_scan));
  if (powercap.ok()) {
    notes.insert(notes.begin(), "the powercap tree, as perf's power PMU could not be used: " +
                                    perf.status().message());
    return WithNotes(std::move(*powercap), std::move(notes));
  }
  const Status& p = perf.status();
  const Status& c = powercap.status();
  std::string both = "perf: " + p.message() + "; powercap: " + c.message();
  using Code = Status::Code;
  auto refused = [](const Status& s) { return s.code() == Code::kPermissionDenied; };
  auto absent = [](const Status& s) { return s.code() == Code::kNotFound; };
  if (absent(p) && absent(c)) return Status::NotFound("no RAPL counters on this machine: " + both);
  if ((refused(p) || absent(p)) && (refused(c) || absent(c))) {
    return Status::PermissionDenied("the RAPL counters cannot be read without a permission: " +
                                    both);
  }
  if (p.code() == Code::kInvalidArgument && c.code() == Code::kInvalidArgument) {
    return Status::InvalidArgument(both);
  }
  // The more telling of the two: powercap's own error unless it is only absent.
  const Status& first = absent(c) ? p : c;
  return Status(first).WithContext(absent(c) ? std::string("RAPL (powercap: ") + c.message() + ")"
                                             : std::string("RAPL (perf: ") + p.message() + ")");
}

}  // namespace kwatt::meter
