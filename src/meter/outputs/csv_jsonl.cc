// kwatt's own formats of the meter's reports: CSV and JSON Lines (doc/meter/outputs.md, "CSV" and
// "JSON Lines").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kwatt/core/json_text.h"
#include "kwatt/core/text.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

constexpr const char* kCsvHeader =
    "sequence,start,end,seconds,sensor,source,domain,domain_kind,share,target,target_kind,name,"
    "pid,cpu_seconds,microjoules,joules,watts,flags\n";

// The flags of a domain's interval as words: "wrapped", "reset", "maybe_missed_wrap",
// "unreadable".
std::vector<const char*> FlagWords(uint32_t flags) {
  std::vector<const char*> words;
  if (flags & kWrapped) words.push_back("wrapped");
  if (flags & kReset) words.push_back("reset");
  if (flags & kMaybeMissedWrap) words.push_back("maybe_missed_wrap");
  if (flags & kUnreadable) words.push_back("unreadable");
  return words;
}

void AppendInteger(std::string* out, int64_t value) { *out += std::to_string(value); }

// Joules and watts of `microjoules` over `seconds`; watts absent in a gap.
void AppendCsvEnergy(std::string* out, int64_t microjoules, double seconds, bool gap) {
  AppendInteger(out, microjoules);
  out->push_back(',');
  AppendNumber(out, double(microjoules) / 1e6);
  out->push_back(',');
  if (!gap && seconds > 0) AppendNumber(out, double(microjoules) / 1e6 / seconds);
}

void AppendJsonEnergy(std::string* out, int64_t microjoules, double seconds, bool gap) {
  *out += "\"microjoules\":";
  AppendInteger(out, microjoules);
  *out += ",\"joules\":";
  AppendNumber(out, double(microjoules) / 1e6);
  *out += ",\"watts\":";
  if (!gap && seconds > 0) {
    AppendNumber(out, double(microjoules) / 1e6 / seconds);
  } else {
    *out += "null";
  }
}

void AppendKey(std::string* out, const char* key) {
  AppendJsonString(out, key);
  out->push_back(':');
}

// One output file (or the standard output), written a report at a time so that a reader following
// it (tail -f) sees whole lines.
class TextOutput : public OutputSink {
 public:
  TextOutput(const OutputSpec& spec, bool csv) : spec_(spec), csv_(csv) {}
  ~TextOutput() override {
    if (fd_ > 2) ::close(fd_);
  }

  std::string Name() const override { return spec_.shown; }
  OutputStats Stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  Status Begin(const MeterHeader& header) override {
    header_ = header;
    bool append = false;
    if (spec_.path == "-") {
      fd_ = STDOUT_FILENO;
    } else {
      // A meter that goes on from its state file appends to the earlier run's file, which must
      // be this output's: its intervals go on there with their sequence.
      if (header.first_sequence > 0) {
        KWATT_ASSIGN_OR_RETURN(append, AppendsToEarlierRun());
      }
      fd_ = ::open(spec_.path.c_str(),
                   O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
      if (fd_ < 0) {
        return Status::IOError("cannot create " + spec_.path + ": " + std::strerror(errno));
      }
    }
    buffer_.clear();
    if (!csv_) {
      AppendHeaderLine();  // again when appending: the run that goes on, from first_sequence
    } else if (!append) {
      buffer_ = kCsvHeader;
    }
    return Flush();
  }

  Status Write(const IntervalReport& report) override {
    if (fd_ < 0) return Status::Internal(spec_.shown + ": Write before Begin");
    buffer_.clear();
    int64_t rows = csv_ ? AppendCsvRows(report) : AppendIntervalLine(report);
    KWATT_RETURN_IF_ERROR(Flush());
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.reports;
    stats_.rows_written += rows;
    last_end_ = report.end;
    return Status::OK();
  }

  Status Finish() override {
    if (fd_ < 0) return Status::OK();
    Status status;
    if (!csv_) {
      buffer_ = "{\"type\":\"end\",\"reports\":" + std::to_string(Stats().reports) + ",\"end\":";
      AppendJsonString(&buffer_, last_end_ ? UtcNanosText(last_end_) : "");
      buffer_ += "}\n";
      status = Flush();
    }
    struct stat info;
    if (status.ok() && ::fstat(fd_, &info) == 0 && S_ISREG(info.st_mode) && ::fsync(fd_) != 0) {
      status = Status::IOError("cannot sync " + spec_.path + ": " + std::strerror(errno));
    }
    if (fd_ > 2 && ::close(fd_) != 0 && status.ok()) {
      status = Status::IOError("cannot close " + spec_.path + ": " + std::strerror(errno));
    }
    fd_ = -1;
    return status;
  }

 private:
  // Whether the file holds an earlier run's output to append to: false when it is absent or
  // empty; InvalidArgument when it holds something else (it is not overwritten).
  Result<bool> AppendsToEarlierRun() const {
    int fd = ::open(spec_.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      if (errno == ENOENT) return false;
      return Status::IOError("cannot read " + spec_.path + ": " + std::strerror(errno));
    }
    char first[512];
    ssize_t got = -1;
    struct stat info;
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
      do {
        got = ::pread(fd, first, sizeof first, 0);
      } while (got < 0 && errno == EINTR);
    }
    ::close(fd);
    if (got == 0) return false;  // an empty file: written as a new one
    if (got < 0) return false;   // not a regular file: written to as it is (a pipe, a device)
    const std::string_view start(first, size_t(got));
    const std::string_view expected =
        csv_ ? std::string_view(kCsvHeader)
             : std::string_view("{\"format\":\"kwatt-meter\",\"version\":");
    if (start.substr(0, expected.size()) != expected.substr(0, start.size())) {
      return Status::InvalidArgument(
          spec_.shown + " holds something other than the meter's " + (csv_ ? "CSV" : "JSON Lines") +
          ": the meter goes on from its state file and appends to its earlier output, which "
          "this is not; give another file, or move this one away");
    }
    return true;
  }

  // Writes the buffer: a report's lines whole or not at all. A write that fails midway (a full
  // disk) is taken back in a regular file, so that later lines never continue a cut one.
  Status Flush() {
    const std::string name = spec_.path == "-" ? "the standard output" : spec_.path;
    struct stat info;
    const off_t before =
        ::fstat(fd_, &info) == 0 && S_ISREG(info.st_mode) ? ::lseek(fd_, 0, SEEK_END) : off_t(-1);
    Status status = WriteAll(fd_, buffer_, name);
    if (!status.ok() && before >= 0) {
      if (::ftruncate(fd_, before) == 0 && ::lseek(fd_, before, SEEK_SET) == before) {
        status = Status::IOError(status.message() +
                                 " (this report is not in the file, which holds whole lines)");
      } else {
        status =
            Status::IOError(status.message() + "; and its part written cannot be taken " +
                            "back (" + std::strerror(errno) + "): the file's last line is cut");
      }
    }
    buffer_.clear();
    return status;
  }

  void AppendHeaderLine() {
    std::string& out = buffer_;
    out += "{\"format\":\"kwatt-meter\",\"version\":" + std::to_string(kJsonlFormatVersion) +
           ",\"type\":\"header\",";
    AppendKey(&out, "sensor");
    AppendJsonString(&out, header_.sensor);
    out += ",\"formula\":";
    AppendJsonString(&out, header_.formula);
    out += ",\"idle_policy\":";
    AppendJsonString(&out, header_.idle_policy);
    out += ",\"start\":";
    AppendJsonString(&out, UtcNanosText(header_.start));
    out += ",\"start_ns\":" + std::to_string(header_.start);
    if (header_.first_sequence > 0) {
      out += ",\"first_sequence\":" + std::to_string(header_.first_sequence);
    }
    out += ",\"domains\":[";
    for (size_t d = 0; d < header_.domains.size(); ++d) {
      const Domain& domain = header_.domains[d];
      out += d ? ",{" : "{";
      AppendKey(&out, "source");
      AppendJsonString(&out, domain.source);
      out += ",\"domain\":";
      AppendJsonString(&out, domain.name);
      out += ",\"kind\":";
      AppendJsonString(&out, domain.kind);
      out += ",\"socket\":" + std::to_string(domain.socket) + ",\"origin\":";
      AppendJsonString(&out, domain.origin);
      out += "}";
    }
    out += "],\"notes\":[";
    for (size_t i = 0; i < header_.notes.size(); ++i) {
      if (i) out += ',';
      AppendJsonString(&out, header_.notes[i]);
    }
    out += "]}\n";
  }

  int64_t AppendIntervalLine(const IntervalReport& report) {
    std::string& out = buffer_;
    double seconds = IntervalSeconds(report);
    out += "{\"type\":\"interval\",\"sequence\":" + std::to_string(report.sequence) + ",\"start\":";
    AppendJsonString(&out, UtcNanosText(report.start));
    out += ",\"end\":";
    AppendJsonString(&out, UtcNanosText(report.end));
    out += ",\"start_ns\":" + std::to_string(report.start) +
           ",\"end_ns\":" + std::to_string(report.end) + ",\"seconds\":";
    AppendNumber(&out, seconds);
    out += ",\"busy_cpu_seconds\":";
    AppendNumber(&out, double(report.busy_microseconds) / 1e6);
    out += ",\"capacity_cpu_seconds\":";
    AppendNumber(&out, double(report.capacity_microseconds) / 1e6);
    out += ",\"targets\":[";
    for (size_t t = 0; t < report.targets.size(); ++t) {
      const ReportTarget& target = report.targets[t];
      out += t ? ",{" : "{";
      AppendKey(&out, "target");
      AppendJsonString(&out, target.target.key);
      out += ",\"kind\":";
      AppendJsonString(&out, TargetKindName(target.target.kind));
      out += ",\"name\":";
      AppendJsonString(&out, target.target.name);
      out += ",\"pid\":" + std::to_string(target.target.pid) + ",\"cpu_seconds\":";
      AppendNumber(&out, double(target.cpu_microseconds) / 1e6);
      out += "}";
    }
    out += "],\"domains\":[";
    for (size_t d = 0; d < report.domains.size(); ++d) {
      const DomainEnergy& energy = report.domains[d];
      const Domain& domain = header_.domains[d];
      bool gap = IsGap(energy);
      out += d ? ",{" : "{";
      AppendKey(&out, "source");
      AppendJsonString(&out, domain.source);
      out += ",\"domain\":";
      AppendJsonString(&out, domain.name);
      out += ",\"flags\":[";
      std::vector<const char*> words = FlagWords(energy.flags);
      for (size_t i = 0; i < words.size(); ++i) {
        if (i) out += ',';
        AppendJsonString(&out, words[i]);
      }
      out += "],\"measured\":{";
      AppendJsonEnergy(&out, energy.measured_microjoules, seconds, gap);
      out += "},\"idle\":{";
      AppendJsonEnergy(&out, energy.idle_microjoules, seconds, gap);
      out += "},\"unattributed\":{";
      AppendJsonEnergy(&out, energy.unattributed_microjoules, seconds, gap);
      out += "},\"targets\":[";
      for (size_t t = 0; t < report.targets.size(); ++t) {
        out += t ? ",{" : "{";
        AppendKey(&out, "target");
        AppendJsonString(&out, report.targets[t].target.key);
        out += ',';
        int64_t share = t < energy.target_microjoules.size() ? energy.target_microjoules[t] : 0;
        AppendJsonEnergy(&out, share, seconds, gap);
        out += "}";
      }
      out += "]}";
    }
    out += "],\"models\":[";
    for (size_t m = 0; m < report.models.size(); ++m) {
      const ModelInfo& model = report.models[m];
      out += m ? ",{" : "{";
      AppendKey(&out, "domain");
      bool known = model.domain >= 0 && size_t(model.domain) < header_.domains.size();
      AppendJsonString(&out, known ? header_.domains[size_t(model.domain)].name : "");
      out += ",\"socket\":" + std::to_string(model.socket) +
             ",\"layer_frequency_mhz\":" + std::to_string(model.layer_frequency_mhz) +
             ",\"package_frequency_mhz\":" + std::to_string(model.package_frequency_mhz) +
             ",\"id\":";
      AppendJsonString(&out, model.id);
      out += ",\"samples\":" + std::to_string(model.samples) + ",\"error_watts\":";
      AppendNumber(&out, model.error_watts);
      out += ",\"intercept_watts\":";
      AppendNumber(&out, model.intercept_watts);
      out += ",\"coefficients\":{";
      for (size_t c = 0; c < model.coefficients.size(); ++c) {
        if (c) out += ',';
        AppendJsonString(&out, model.coefficients[c].first);
        out += ':';
        AppendNumber(&out, model.coefficients[c].second);
      }
      out += "}}";
    }
    const MeterHealth& health = report.health;
    out += "],\"health\":{\"ticks\":" + std::to_string(health.ticks) +
           ",\"late_ticks\":" + std::to_string(health.late_ticks) +
           ",\"missed_ticks\":" + std::to_string(health.missed_ticks) +
           ",\"merged_samples\":" + std::to_string(health.merged_samples) + ",\"max_lag_seconds\":";
    AppendNumber(&out, health.max_lag_seconds);
    out += ",\"reports\":" + std::to_string(health.reports) + ",\"dropped_reports\":{";
    for (size_t i = 0; i < health.dropped_reports.size(); ++i) {
      if (i) out += ',';
      AppendJsonString(&out, health.dropped_reports[i].first);
      out += ':' + std::to_string(health.dropped_reports[i].second);
    }
    out += "},\"wraps\":" + std::to_string(health.wraps) +
           ",\"resets\":" + std::to_string(health.resets) + "}}\n";
    return 1;
  }

  int64_t AppendCsvRows(const IntervalReport& report) {
    std::string& out = buffer_;
    double seconds = IntervalSeconds(report);
    std::string interval = std::to_string(report.sequence) + "," + UtcNanosText(report.start) +
                           "," + UtcNanosText(report.end) + ",";
    AppendNumber(&interval, seconds);
    interval += ',';
    AppendCsvField(&interval, header_.sensor);
    interval += ',';
    int64_t rows = 0;
    for (size_t d = 0; d < report.domains.size(); ++d) {
      const DomainEnergy& energy = report.domains[d];
      const Domain& domain = header_.domains[d];
      bool gap = IsGap(energy);
      std::string flags;
      for (const char* word : FlagWords(energy.flags)) {
        flags += (flags.empty() ? "" : "|") + std::string(word);
      }
      std::string prefix = interval;
      AppendCsvField(&prefix, domain.source);
      prefix += ',';
      AppendCsvField(&prefix, domain.name);
      prefix += ',';
      AppendCsvField(&prefix, domain.kind);
      prefix += ',';
      auto row = [&](const char* share, const ReportTarget* target, int64_t microjoules) {
        out += prefix;
        out += share;
        out += ',';
        if (target) {
          AppendCsvField(&out, target->target.key);
          out += ',';
          out += TargetKindName(target->target.kind);
          out += ',';
          AppendCsvField(&out, target->target.name);
          out += ',';
          if (target->target.pid > 0) AppendInteger(&out, target->target.pid);
          out += ',';
          AppendNumber(&out, double(target->cpu_microseconds) / 1e6);
        } else {
          out += ",,,,";
        }
        out += ',';
        AppendCsvEnergy(&out, microjoules, seconds, gap);
        out += ',';
        out += flags;
        out += '\n';
        ++rows;
      };
      row("measured", nullptr, energy.measured_microjoules);
      row("idle", nullptr, energy.idle_microjoules);
      row("unattributed", nullptr, energy.unattributed_microjoules);
      for (size_t t = 0; t < report.targets.size(); ++t) {
        row("target", &report.targets[t],
            t < energy.target_microjoules.size() ? energy.target_microjoules[t] : 0);
      }
    }
    return rows;
  }

  const OutputSpec spec_;
  const bool csv_;
  MeterHeader header_;
  int fd_ = -1;
  std::string buffer_;
  UnixNanos last_end_ = 0;
  mutable std::mutex mutex_;  // guards stats_
  OutputStats stats_;
};

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenCsvOrJsonlOutput(const OutputSpec& spec,
                                                         const OutputOptions& options) {
  if (spec.path != "-") KWATT_RETURN_IF_ERROR(CheckWritableFile(spec.path, spec.shown));
  return std::unique_ptr<OutputSink>(
      std::make_unique<TextOutput>(spec, spec.kind == OutputKind::kCsv));
}

}  // namespace kwatt::meter::internal
