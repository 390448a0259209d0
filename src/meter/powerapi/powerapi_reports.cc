#include "kwatt/meter/powerapi/powerapi_reports.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <vector>

#include "kwatt/core/json_text.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"

namespace kwatt::meter {
namespace {

constexpr char kPowerHeader[] = "timestamp,sensor,target,power,socket,formula,ratio,scope";
constexpr char kFormulaHeader[] = "timestamp,sensor,target,metadata";

// One row of a power report, in the fields every PowerAPI form carries.
struct PowerRow {
  std::string target;
  double power = 0;
  int socket = -1;
  std::string formula, scope;
  double ratio = 0;
};

std::string ScopeOf(const Domain& d) {
  if (d.kind == "package") return "cpu";
  return d.kind;
}

std::string TargetName(const Target& t) { return t.kind == TargetKind::kCgroup ? t.name : t.key; }

// The rows of one report: per domain that is not a gap, the domain's then its targets'.
void PowerRows(const MeterHeader& header, const IntervalReport& report,
               std::vector<PowerRow>* rows) {
  rows->clear();
  const int64_t micros = (report.end - report.start) / 1000;
  if (micros <= 0) return;
  for (size_t d = 0; d < report.domains.size() && d < header.domains.size(); ++d) {
    const DomainEnergy& e = report.domains[d];
    const Domain& domain = header.domains[d];
    if (e.flags & (kUnreadable | kReset)) continue;
    std::string model_id = header.formula;
    for (const ModelInfo& m : report.models) {
      if (m.domain == int(d)) model_id = m.id;
    }
    PowerRow row;
    row.target = domain.source;
    row.power = double(e.measured_microjoules) / double(micros);
    row.socket = domain.socket;
    row.formula = domain.kind == "package" ? "RAPL_ENERGY_PKG"
                  : domain.kind == "dram"  ? "RAPL_ENERGY_DRAM"
                                           : domain.name;
    row.scope = ScopeOf(domain);
    row.ratio = 1;
    rows->push_back(row);
    const int64_t above_idle = e.measured_microjoules - e.idle_microjoules;
    for (size_t t = 0; t < report.targets.size() && t < e.target_microjoules.size(); ++t) {
      PowerRow r;
      r.target = TargetName(report.targets[t].target);
      r.power = double(e.target_microjoules[t]) / double(micros);
      r.socket = domain.socket;
      r.formula = model_id;
      r.scope = row.scope;
      r.ratio = above_idle > 0 ? double(e.target_microjoules[t]) / double(above_idle) : 0;
      rows->push_back(std::move(r));
    }
  }
}

std::string FormulaMetadata(const MeterHeader& header, const ModelInfo& m) {
  std::string out = "{\"scope\":";
  std::string scope = m.domain >= 0 && size_t(m.domain) < header.domains.size()
                          ? ScopeOf(header.domains[size_t(m.domain)])
                          : "cpu";
  AppendJsonString(&out, scope);
  out += ",\"socket\":" + std::to_string(m.socket);
  out += ",\"layer_frequency\":" + std::to_string(m.layer_frequency_mhz);
  out += ",\"pkg_frequency\":" + std::to_string(m.package_frequency_mhz);
  out += ",\"samples\":" + std::to_string(m.samples);
  out += ",\"id\":";
  AppendJsonString(&out, m.id);
  out += ",\"error\":";
  AppendJsonNumber(&out, m.error_watts);
  out += ",\"intercept\":";
  AppendJsonNumber(&out, m.intercept_watts);
  out += ",\"coef\":{";
  for (size_t i = 0; i < m.coefficients.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(&out, m.coefficients[i].first);
    out += ':';
    AppendJsonNumber(&out, m.coefficients[i].second);
  }
  out += "}}";
  return out;
}

int64_t TimestampMs(const IntervalReport& report) { return FloorDiv(report.end, 1000000); }

// ---------------------------------------------------------------------------------------------

class CsvSink : public ReportSink {
 public:
  CsvSink(std::string directory, PowerApiSinkOptions options)
      : directory_(std::move(directory)), options_(options) {}
  ~CsvSink() override { (void)CloseAll(); }  // Finish reports the errors

  // Made when the sink is opened, so that a directory that cannot be is said before the meter
  // starts.
  Status MakeDirectory() {
    std::error_code error;
    std::filesystem::create_directories(directory_, error);
    struct stat st;
    if (::stat(directory_.c_str(), &st) != 0) {
      return Status::IOError(directory_ + ": " +
                             (error ? error.message() : std::string(std::strerror(errno))));
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(directory_ + " exists and is not a directory");
    }
    return Status::OK();
  }

  Status Begin(const MeterHeader& header) override {
    header_ = header;
    return Status::OK();
  }

  Status Write(const IntervalReport& report) override {
    const int64_t ms = TimestampMs(report);
    PowerRows(header_, report, &rows_);
    for (const PowerRow& row : rows_) {
      line_ = std::to_string(ms);
      line_ += ',';
      AppendCsvField(&line_, header_.sensor);
      line_ += ',';
      AppendCsvField(&line_, row.target);
      line_ += ',';
      AppendJsonNumber(&line_, row.power);
      line_ += ',';
      line_ += std::to_string(row.socket);
      line_ += ',';
      AppendCsvField(&line_, row.formula);
      line_ += ',';
      AppendJsonNumber(&line_, row.ratio);
      line_ += ',';
      AppendCsvField(&line_, row.scope);
      line_ += '\n';
      KWATT_RETURN_IF_ERROR(Append(row.target, "PowerReport.csv", kPowerHeader));
    }
    for (const ModelInfo& m : report.models) {
      line_ = std::to_string(ms);
      line_ += ',';
      AppendCsvField(&line_, header_.sensor);
      line_ += ',';
      AppendCsvField(&line_, m.id);
      line_ += ',';
      AppendCsvField(&line_, FormulaMetadata(header_, m));
      line_ += '\n';
      KWATT_RETURN_IF_ERROR(Append(m.id, "FormulaReport.csv", kFormulaHeader));
    }
    if (options_.flush_each_report) {
      for (auto& [key, file] : files_) {
        if (file.dirty && std::fflush(file.file) != 0) {
          return Status::IOError(file.path + ": " + std::strerror(errno));
        }
        file.dirty = false;
      }
    }
    return Status::OK();
  }

  Status Finish() override { return CloseAll(); }

 private:
  struct OpenFile {
    std::string path;
    std::FILE* file = nullptr;
    int64_t used = 0;
    bool dirty = false;
  };

  // DIRECTORY/SENSOR-TARGET/NAME, as PowerAPI lays it out, without leaving DIRECTORY.
  std::string PathOf(const std::string& target, const char* name, std::string* parent) {
    std::string relative = header_.sensor + "-" + target;
    std::string path = directory_;
    size_t from = 0;
    while (from <= relative.size()) {
      size_t slash = relative.find('/', from);
      if (slash == std::string::npos) slash = relative.size();
      std::string part = relative.substr(from, slash - from);
      from = slash + 1;
      if (part.empty()) continue;
      if (part == "." || part == "..") part = "_";
      path += "/" + part;
    }
    *parent = path;
    return path + "/" + name;
  }

  Status Append(const std::string& target, const char* name, const char* header) {
    key_.assign(name);
    key_ += '\n';
    key_ += target;
    auto it = files_.find(key_);
    if (it == files_.end()) {
      std::string parent;
      std::string path = PathOf(target, name, &parent);
      if (int(files_.size()) >= options_.max_open_files) {
        auto oldest = files_.begin();
        for (auto f = files_.begin(); f != files_.end(); ++f) {
          if (f->second.used < oldest->second.used) oldest = f;
        }
        if (std::fclose(oldest->second.file) != 0) {
          return Status::IOError(oldest->second.path + ": write failed");
        }
        files_.erase(oldest);
      }
      KWATT_RETURN_IF_ERROR(MakeDirectories(parent));
      OpenFile f;
      f.path = path;
      f.file = std::fopen(path.c_str(), "a+");
      if (!f.file) return Status::IOError(path + ": " + std::strerror(errno));
      // As PowerAPI: an existing file is appended to when its header is ours.
      std::fseek(f.file, 0, SEEK_END);
      if (std::ftell(f.file) > 0) {
        std::rewind(f.file);
        char first[256] = {0};
        if (!std::fgets(first, sizeof first, f.file)) first[0] = 0;
        std::string existing = first;
        while (!existing.empty() && (existing.back() == '\n' || existing.back() == '\r')) {
          existing.pop_back();
        }
        if (existing != header) {
          std::fclose(f.file);
          return Status::InvalidArgument(path + " exists with another header (\"" + existing +
                                         "\", not \"" + header +
                                         "\"): give another directory or remove it");
        }
        std::fseek(f.file, 0, SEEK_END);
      } else {
        std::fputs(header, f.file);
        std::fputc('\n', f.file);
      }
      it = files_.emplace(key_, f).first;
    }
    it->second.used = ++clock_;
    it->second.dirty = true;
    if (std::fwrite(line_.data(), 1, line_.size(), it->second.file) != line_.size()) {
      return Status::IOError(it->second.path + ": write failed");
    }
    return Status::OK();
  }

  Status MakeDirectories(const std::string& path) {
    for (size_t slash = directory_.size(); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      std::string prefix = path.substr(0, slash);
      if (prefix.size() <= directory_.size()) continue;
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::IOError(prefix + ": " + std::strerror(errno));
      }
    }
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IOError(path + ": " + std::strerror(errno));
    }
    return Status::OK();
  }

  Status CloseAll() {
    Status status;
    for (auto& [key, file] : files_) {
      if (std::fclose(file.file) != 0 && status.ok()) {
        status = Status::IOError(file.path + ": write failed");
      }
    }
    files_.clear();
    return status;
  }

  std::string directory_;
  PowerApiSinkOptions options_;
  MeterHeader header_;
  std::unordered_map<std::string, OpenFile> files_;  // by NAME "\n" TARGET
  std::string key_;
  int64_t clock_ = 0;
  std::vector<PowerRow> rows_;
  std::string line_;
};

class JsonSink : public ReportSink {
 public:
  JsonSink(std::string path, PowerApiReportType type, PowerApiSinkOptions options)
      : path_(std::move(path)), type_(type), options_(options) {}
  ~JsonSink() override {
    if (file_ && file_ != stdout) std::fclose(file_);
  }

  // Opened (truncated) when the sink is opened, so that a file that cannot be written is said
  // before the meter starts.
  Status Open() {
    if (path_ == "-") {
      file_ = stdout;
    } else {
      file_ = std::fopen(path_.c_str(), "wb");
      if (!file_) return Status::IOError(path_ + ": " + std::strerror(errno));
    }
    return Status::OK();
  }

  Status Begin(const MeterHeader& header) override {
    header_ = header;
    return Status::OK();
  }

  Status Write(const IntervalReport& report) override {
    if (!file_) return Status::Internal("Write before Begin");
    const std::string ms = std::to_string(TimestampMs(report));
    text_.clear();
    auto head = [&](const std::string& target) {
      text_ += "{\"timestamp\":" + ms + ",\"sensor\":";
      AppendJsonString(&text_, header_.sensor);
      text_ += ",\"target\":";
      AppendJsonString(&text_, target);
    };
    if (type_ == PowerApiReportType::kPower) {
      PowerRows(header_, report, &rows_);
      for (const PowerRow& row : rows_) {
        head(row.target);
        text_ += ",\"power\":";
        AppendJsonNumber(&text_, row.power);
        text_ += ",\"metadata\":{\"scope\":";
        AppendJsonString(&text_, row.scope);
        text_ += ",\"socket\":" + std::to_string(row.socket) + ",\"formula\":";
        AppendJsonString(&text_, row.formula);
        text_ += ",\"ratio\":";
        AppendJsonNumber(&text_, row.ratio);
        text_ += "}}\n";
      }
    } else {
      for (const ModelInfo& m : report.models) {
        head(m.id);
        text_ += ",\"metadata\":" + FormulaMetadata(header_, m) + "}\n";
      }
    }
    if (std::fwrite(text_.data(), 1, text_.size(), file_) != text_.size()) {
      return Status::IOError(path_ + ": write failed");
    }
    if (options_.flush_each_report && std::fflush(file_) != 0) {
      return Status::IOError(path_ + ": " + std::strerror(errno));
    }
    return Status::OK();
  }

  Status Finish() override {
    if (!file_) return Status::OK();
    bool ok = std::fflush(file_) == 0;
    if (file_ != stdout) ok = std::fclose(file_) == 0 && ok;
    file_ = nullptr;
    return ok ? Status::OK() : Status::IOError(path_ + ": write failed");
  }

 private:
  std::string path_;
  PowerApiReportType type_;
  PowerApiSinkOptions options_;
  MeterHeader header_;
  std::FILE* file_ = nullptr;
  std::vector<PowerRow> rows_;
  std::string text_;
};

}  // namespace

Result<std::unique_ptr<ReportSink>> OpenPowerApiCsvSink(const std::string& directory,
                                                        const PowerApiSinkOptions& options) {
  if (directory.empty()) return Status::InvalidArgument("powerapi-csv: an empty directory");
  if (options.max_open_files < 1) return Status::InvalidArgument("max_open_files: at least 1");
  std::string dir = directory;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto sink = std::make_unique<CsvSink>(dir, options);
  KWATT_RETURN_IF_ERROR(sink->MakeDirectory());
  return std::unique_ptr<ReportSink>(std::move(sink));
}

Result<std::unique_ptr<ReportSink>> OpenPowerApiJsonSink(const std::string& path,
                                                         PowerApiReportType type,
                                                         const PowerApiSinkOptions& options) {
  if (path.empty()) return Status::InvalidArgument("powerapi-json: an empty file name");
  auto sink = std::make_unique<JsonSink>(path, type, options);
  KWATT_RETURN_IF_ERROR(sink->Open());
  return std::unique_ptr<ReportSink>(std::move(sink));
}

}  // namespace kwatt::meter
