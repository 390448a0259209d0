#include "kwatt/report/run.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "kwatt/energy/phase_text.h"
#include "kwatt/energy/workflow.h"
#include "kwatt/rows/source.h"

namespace kwatt::report {

bool IsJob(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const uint8_t c = uint8_t(text[i]);
    if (i < colon ? !(std::islower(c) || std::isdigit(c) || c == '-')
                  : i > colon && !std::isdigit(c))
      return false;
  }
  return true;
}

Result<energy::EnergyOptions> CheckRunReading(const RunReading& how) {
  energy::EnergyOptions options;
  options.metric = how.metric;
  options.baseline_phase = how.baseline_phase;
  options.gap_factor = how.gap_factor;
  options.clock_offset_seconds = how.clock_offset_s;
  KWATT_RETURN_IF_ERROR(energy::CheckGapFactor(how.gap_factor, "--gap-factor"));
  KWATT_RETURN_IF_ERROR(energy::CheckClockOffset(how.clock_offset_s, "--clock-offset"));
  Result<std::map<std::string, energy::StatedAccuracy>> accuracies =
      energy::ParseStatedAccuracies(how.accuracies);
  if (!accuracies.ok()) return accuracies.status().WithContext("--accuracy");
  options.accuracies = std::move(*accuracies);
  // The phases and roles as written, each run placing them after its own start.
  std::vector<energy::Interval> phases;
  std::vector<energy::Role> roles;
  KWATT_RETURN_IF_ERROR(energy::ParsePhasesAndRoles(how.phases, how.roles, WallClockNow(),
                                                    UnixNanos(0), &phases, &roles));
  return options;
}

Result<Run> ReadRun(const std::string& given, const RunReading& how) {
  KWATT_ASSIGN_OR_RETURN(energy::EnergyOptions options, CheckRunReading(how));
  rows::RowSource source;
  source.query.nodes = how.nodes;
  source.query.start = how.start;
  source.query.end = how.end;
  std::error_code error;
  if (std::filesystem::is_directory(given, error)) {
    source.from = rows::FromArchive{given};
  } else if (IsJob(given)) {
    const size_t colon = given.find(':');
    kwollect::JobRef job{given.substr(0, colon), 0};
    const char* digits = given.data() + colon + 1;
    if (std::from_chars(digits, given.data() + given.size(), job.id).ec != std::errc()) {
      return Status::InvalidArgument("the job's number is too large");
    }
    source.from = rows::FromQuery{how.client};
    source.query.job = job;
    source.query.summary = how.summary;
    source.query.check_metrics = false;  // power sources to try, not metrics the user named
  } else {
    return Status::InvalidArgument("neither an archive directory nor a job SITE:ID (lyon:1234)");
  }
  source.query.margin = energy::EnergyFetchMargin(how.summary);
  source.with_archives = how.with_archives;
  source.with_archives_shared = true;
  const ProgressCallback progress = how.progress ? how.progress(given) : ProgressCallback();
  // The run's energy as `kwatt energy` computes it: the one workflow, its rows read the margin
  // beyond the window, its phases placed after the run's start.
  std::vector<std::string> archives_read;
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) -> Result<RowsReport> {
    archives_read.clear();
    Result<RowsReport> read = rows::FeedSource(source, metrics, sink, progress, &archives_read);
    if (read.ok() && how.read) how.read(given, *read);
    return read;
  };
  auto place = [&](const RowsReport& resolved, energy::EnergyOptions* placed) {
    placed->phases.clear();
    placed->roles.clear();
    return energy::ParsePhasesAndRoles(how.phases, how.roles, WallClockNow(), resolved.start,
                                       &placed->phases, &placed->roles);
  };
  KWATT_ASSIGN_OR_RETURN(energy::EnergyOutcome outcome, energy::EnergyOf(feed, options, place));
  return Run{given,
             std::move(outcome.rows),
             std::move(archives_read),
             std::move(outcome.report),
             std::move(outcome.checks),
             std::move(outcome.read)};
}

std::vector<std::vector<energy::RunFigure>> FiguresOf(const std::vector<Run>& runs) {
  std::vector<std::vector<energy::RunFigure>> out;
  for (const Run& r : runs) out.push_back(energy::RunFiguresOf(r.energy));
  return out;
}

Status CheckEveryArchiveRead(const std::vector<std::string>& with_archives,
                             const std::vector<const Run*>& runs) {
  for (const std::string& dir : with_archives) {
    bool read = std::any_of(runs.begin(), runs.end(), [&](const Run* run) {
      return std::find(run->with_archives.begin(), run->with_archives.end(), dir) !=
             run->with_archives.end();
    });
    if (!read) {
      return Status::InvalidArgument("--with-archive " + dir +
                                     ": no run has its nodes during its window (give the "
                                     "recordings made on the runs' nodes while they ran)");
    }
  }
  return Status::OK();
}

}  // namespace kwatt::report
